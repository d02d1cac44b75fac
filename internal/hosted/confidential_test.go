package hosted

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// TestConfidentialUpstream: the whole flow of TestFullFlow with this server
// on https (as https://bulleted.internal:PORT, its certificate from the test's
// CA, which the reference PDS trusts), so that it signs in upstream as the
// confidential client it is in production: client ID = its metadata
// document, which the PDS fetches, with its JWKS, and private_key_jwt
// client assertions at the PDS's PAR and token endpoints (the code grant
// and refreshes).
func TestConfidentialUpstream(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc, e.tls = p.PLCURL, true
	in := e.start(t, nil)
	if !strings.HasPrefix(in.URL, "https://"+testHost+":") || !in.confidential() {
		t.Fatalf("instance at %s, confidential %v", in.URL, in.confidential())
	}
	a := newAccount(t, p, fmt.Sprintf("conf%d", time.Now().UnixNano()%1e6))
	ctx := context.Background()

	// the MCP client, as in TestFullFlow
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	redirect := "http://" + ln.Addr().String() + "/callback"
	ln.Close()
	c, err := client.NewOAuthStreamableHttpClient(in.URL+"/mcp", client.OAuthConfig{
		RedirectURI: redirect, Scopes: []string{ScopeRead, ScopeWrite}, TokenStore: transport.NewMemoryTokenStore(), PKCEEnabled: true,
		HTTPClient: testClient(),
	}, transport.WithHTTPBasicClient(testClient()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "confidential-test", Version: "1"}
	_, err = c.Initialize(ctx, init)
	if !client.IsOAuthAuthorizationRequiredError(err) {
		t.Fatalf("want authorization required, got %v", err)
	}
	h := client.GetOAuthHandler(err)
	if err := h.RegisterClient(ctx, "Confidential test client"); err != nil {
		t.Fatal(err)
	}
	v, _ := transport.GenerateCodeVerifier()
	state, _ := transport.GenerateState()
	authURL, err := h.GetAuthorizationURL(ctx, state, transport.GenerateCodeChallenge(v))
	if err != nil {
		t.Fatal(err)
	}
	back, err := authorizeInBrowser(ctx, authURL, a)
	if err != nil {
		t.Fatal(err)
	}
	if e := back.Query().Get("error"); e != "" {
		t.Fatalf("authorization refused: %s: %s", e, back.Query().Get("error_description"))
	}
	if err := h.ProcessAuthorizationResponse(ctx, back.Query().Get("code"), back.Query().Get("state"), v); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}

	// the PDS knew us as the confidential client: it fetched our metadata
	// document and our keys, and the session is the confidential client's
	metaHits, jwksHits := in.Hits("/oauth/client-metadata.json"), in.Hits("/oauth/jwks.json")
	if metaHits == 0 || jwksHits == 0 {
		t.Fatalf("the PDS fetched the client metadata %d times and the JWKS %d times", metaHits, jwksHits)
	}
	row := loadRow(t, in, a.DID.String())
	if !row.Confidential || row.ClientID != in.URL+"/oauth/client-metadata.json" || row.Callback != in.URL+"/oauth/callback" {
		t.Fatalf("stored session: confidential %v, client %s, callback %s", row.Confidential, row.ClientID, row.Callback)
	}
	t.Logf("the PDS fetched the metadata %d and the JWKS %d times; granted upstream scopes %q", metaHits, jwksHits, row.Data.Scopes)

	insert := func(t *testing.T, text string) {
		t.Helper()
		res, err := call(ctx, c, "insert_after", map[string]any{"text": text})
		if err != nil || res.IsError {
			t.Fatalf("insert %q: %v %s", text, err, resultText(res))
		}
	}
	insert(t, "Written by the confidential client")
	if got := nodesOf(t, p, a); strings.Join(got, "|") != "Written by the confidential client" {
		t.Fatalf("the repository holds %q", got)
	}

	t.Run("refresh when the access token is refused", func(t *testing.T) {
		// the stored access token spoiled, as an expired one is refused: the
		// PDS answers invalid_token, the server refreshes (a client
		// assertion at the token endpoint) and the write lands
		spoilAccessToken(t, in, a.DID.String())
		before := Refreshes.Load()
		insert(t, "Written after a refresh")
		if n := Refreshes.Load() - before; n != 1 {
			t.Fatalf("%d refresh requests, want 1", n)
		}
		after := loadRow(t, in, a.DID.String())
		if after.Data.RefreshToken == row.Data.RefreshToken || after.Data.AccessToken == "spoilt" || !after.Confidential {
			t.Fatal("the refreshed session was not stored")
		}
		if got := nodesOf(t, p, a); strings.Join(got, "|") != "Written after a refresh|Written by the confidential client" {
			t.Fatalf("the repository holds %q", got)
		}
		// and a forced refresh, then a read
		u, err := in.user(ctx, a.DID.String())
		if err != nil {
			t.Fatal(err)
		}
		if err := u.auth.refresh(ctx, "", true); err != nil {
			t.Fatal(err)
		}
		if res, err := call(ctx, c, "read_outline", nil); err != nil || res.IsError || !strings.Contains(resultText(res), "Written after a refresh") {
			t.Fatalf("read after a forced refresh: %v %s", err, resultText(res))
		}
	})

	t.Run("another instance refreshes with the same key", func(t *testing.T) {
		// instances share the client key (server_keys): the PDS binds the
		// session to the key of its first client assertion, and refuses a
		// refresh signed with another
		b := e.start(t, func(c *Config) { c.PublicURL = in.URL })
		if b.keyID != in.keyID {
			t.Fatalf("key IDs %s and %s", b.keyID, in.keyID)
		}
		ub, err := b.user(ctx, a.DID.String())
		if err != nil {
			t.Fatal(err)
		}
		before := Refreshes.Load()
		if err := ub.auth.refresh(ctx, "", true); err != nil {
			t.Fatal(err)
		}
		ua, err := in.user(ctx, a.DID.String())
		if err != nil {
			t.Fatal(err)
		}
		if err := ua.auth.refresh(ctx, "", true); err != nil { // takes the stored tokens
			t.Fatal(err)
		}
		if n := Refreshes.Load() - before; n != 1 {
			t.Fatalf("%d refresh requests, want 1", n)
		}
		insert(t, "Written after the other instance refreshed")
		if got := nodesOf(t, p, a); len(got) != 3 {
			t.Fatalf("the repository holds %q", got)
		}
	})

	t.Run("a refresh refused for our key keeps the session", func(t *testing.T) {
		// the PDS refuses the client assertion (invalid_client) before it
		// looks at the refresh token: the session is still good at the PDS,
		// so it must not be forgotten here (which would make every user
		// authorize again after a fault of this server's key or metadata)
		restore := useWrongKey(t, in)
		spoilAccessToken(t, in, a.DID.String())
		res, err := call(ctx, c, "insert_after", map[string]any{"text": "Not written"})
		if err == nil && !res.IsError {
			t.Fatal("written with a refused client assertion")
		}
		msg := ""
		if err != nil {
			msg = err.Error()
		} else {
			msg = resultText(res)
		}
		t.Logf("refused: %.300s", msg)
		if !strings.Contains(msg, "refused this server as an OAuth client") || strings.Contains(msg, "authorize again") {
			t.Fatalf("the user reads %q", msg)
		}
		var n int
		in.db.QueryRow(ctx, "SELECT count(*) FROM atproto_sessions WHERE did = $1", a.DID.String()).Scan(&n)
		if n != 1 {
			t.Fatal("the session was forgotten")
		}
		restore()
		in.forget(a.DID.String()) // its session was opened with the wrong key
		insert(t, "Written once the key is right again")
		if got := nodesOf(t, p, a); len(got) != 4 || got[3] != "Written once the key is right again" {
			t.Fatalf("the repository holds %q", got)
		}
	})

	t.Run("assertion signed with a key not in the JWKS", func(t *testing.T) {
		// another key under the same key ID, our published JWKS unchanged:
		// the PDS refuses the pushed authorization request, and the user
		// reads why on our page
		defer useWrongKey(t, in)()
		b := newAccount(t, p, fmt.Sprintf("wrongkey%d", time.Now().UnixNano()%1e6))
		cid := registerClient(t, in)
		q := url.Values{"client_id": {cid}, "redirect_uri": {testRedirect}, "response_type": {"code"}, "state": {"s1"},
			"code_challenge": {oauth.S256CodeChallenge(verifier)}, "code_challenge_method": {"S256"}, "resource": {in.resource}}
		_, err = authorizeInBrowser(ctx, in.URL+"/authorize?"+q.Encode(), b)
		if err == nil || !strings.Contains(err.Error(), "signing in to your PDS failed") || !strings.Contains(err.Error(), "refused this server as an OAuth client") {
			t.Fatalf("sign-in with the wrong key: %v", err)
		}
		t.Logf("refused: %.300s", err)
	})
}

// useWrongKey makes in sign its client assertions with another key under
// the same key ID, its published JWKS unchanged; the function returned
// undoes it.
func useWrongKey(t testing.TB, in *instance) func() {
	t.Helper()
	wrong, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		t.Fatal(err)
	}
	jwks := in.JWKS()
	in.Override("/oauth/jwks.json", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, jwks) }))
	good := in.clientKey
	in.clientKey = wrong
	return func() { in.clientKey = good; in.Override("/oauth/jwks.json", nil) }
}

func loadRow(t testing.TB, in *instance, did string) *sessionRow {
	t.Helper()
	ctx := context.Background()
	row, err := in.loadSession(ctx, in.db.QueryRow(ctx, "SELECT "+sessionColumns+" FROM atproto_sessions WHERE did = $1", did), did)
	if err != nil {
		t.Fatal(err)
	}
	return row
}

// spoilAccessToken replaces the stored upstream access token of did with
// one the PDS refuses, and drops the identity opened on in, so that its
// next call starts from the stored session.
func spoilAccessToken(t testing.TB, in *instance, did string) {
	t.Helper()
	row := loadRow(t, in, did)
	row.Data.AccessToken = "spoilt"
	sealed, err := in.sealSession(&row.Data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.db.Exec(context.Background(), "UPDATE atproto_sessions SET sealed = $2 WHERE did = $1", did, sealed); err != nil {
		t.Fatal(err)
	}
	in.forget(did)
}

// TestRejected: which refresh errors (as indigo words them) end the
// session here.
func TestRejected(t *testing.T) {
	for msg, want := range map[string]bool{
		"token refresh failed (HTTP 400): invalid_grant":                                   true,
		"token refresh failed (HTTP 401): unknown":                                         true,
		"token refresh failed (HTTP 400): invalid_request":                                 true,
		"token refresh failed: auth server request failed (HTTP 400): invalid_client":      false,
		"token refresh failed (HTTP 400): invalid_client_metadata":                         false,
		"token refresh failed (HTTP 400): use_dpop_nonce":                                  false,
		"token refresh failed (HTTP 400): invalid_dpop_proof":                              false,
		"token refresh failed (HTTP 500): unknown":                                         false,
		"token refresh failed: Post \"https://pds.example/oauth/token\": context deadline": false,
	} {
		if got := rejected(errors.New(msg)); got != want {
			t.Errorf("rejected(%q) = %v, want %v", msg, got, want)
		}
	}
}
