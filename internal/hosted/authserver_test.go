package hosted

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/syntax"
)

var noRedirect = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func postJSON(t testing.TB, u string, in any) (int, map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(in)
	resp, err := noRedirect.Post(u, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func postForm(t testing.TB, u string, f url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := noRedirect.PostForm(u, f)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

const testRedirect = "http://127.0.0.1:9/callback"

func registerClient(t testing.TB, in *instance) string {
	t.Helper()
	st, out := postJSON(t, in.URL+"/register", map[string]any{"client_name": "test client", "redirect_uris": []string{testRedirect}, "token_endpoint_auth_method": "none"})
	if st != 201 {
		t.Fatalf("register: %d %v", st, out)
	}
	return out["client_id"].(string)
}

// seedGrant stores an upstream session for did (a placeholder: the bearer
// check only needs it to exist) and a code for clientID.
func seedGrant(t testing.TB, in *instance, clientID, did, verifier, scope string) string {
	t.Helper()
	ctx := context.Background()
	if err := in.storeSession(ctx, &sessionRow{ClientID: "x", Callback: "x", Data: oauth.ClientSessionData{AccountDID: syntax.DID(did), SessionID: "s", HostURL: "http://127.0.0.1:1"}}); err != nil {
		t.Fatal(err)
	}
	code := newToken("code-")
	if _, err := in.db.Exec(ctx, `INSERT INTO auth_codes (code_hash, client_id, redirect_uri, code_challenge, scope, resource, did, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now() + interval '60 seconds')`, hashToken(code), clientID, testRedirect, oauth.S256CodeChallenge(verifier), scope, in.resource, did); err != nil {
		t.Fatal(err)
	}
	return code
}

const verifier = "0123456789012345678901234567890123456789abcdefgh"

func exchange(t testing.TB, in *instance, clientID, code, v, redirect string) (int, map[string]any) {
	return postForm(t, in.URL+"/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {clientID}, "code": {code},
		"code_verifier": {v}, "redirect_uri": {redirect}, "resource": {in.resource}})
}

func mcpStatus(t testing.TB, in *instance, token, body string) (int, http.Header) {
	t.Helper()
	if body == "" {
		body = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	}
	req, _ := http.NewRequest("POST", in.URL+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

func TestMigrationsIdempotent(t *testing.T) {
	e := newEnv(t)
	a := e.start(t, nil)
	if err := Migrate(context.Background(), a.db); err != nil {
		t.Fatal(err)
	}
	var n int
	a.db.QueryRow(context.Background(), "SELECT count(*) FROM schema_migrations").Scan(&n)
	files, _ := fs.Glob(migrations, "migrations/*.sql")
	if n != len(files) || n < 2 {
		t.Fatalf("%d migrations recorded, %d files", n, len(files))
	}
}

func TestMetadata(t *testing.T) {
	in := newEnv(t).start(t, nil)
	var prm map[string]any
	resp, err := http.Get(in.URL + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&prm)
	resp.Body.Close()
	if prm["resource"] != in.URL+"/mcp" || prm["authorization_servers"].([]any)[0] != in.URL {
		t.Fatalf("protected resource metadata %v", prm)
	}
	var as map[string]any
	resp, _ = http.Get(in.URL + "/.well-known/oauth-authorization-server")
	json.NewDecoder(resp.Body).Decode(&as)
	resp.Body.Close()
	if as["issuer"] != in.URL || as["client_id_metadata_document_supported"] != true || as["code_challenge_methods_supported"].([]any)[0] != "S256" {
		t.Fatalf("authorization server metadata %v", as)
	}
	// the upstream client's metadata is confidential (private_key_jwt) with
	// its keys served here
	var cm oauth.ClientMetadata
	resp, _ = http.Get(in.URL + "/oauth/client-metadata.json")
	json.NewDecoder(resp.Body).Decode(&cm)
	resp.Body.Close()
	if cm.TokenEndpointAuthMethod != "private_key_jwt" || cm.JWKSURI == nil || cm.ClientID != in.URL+"/oauth/client-metadata.json" {
		t.Fatalf("client metadata %+v", cm)
	}
	var jwks oauth.JWKS
	resp, _ = http.Get(*cm.JWKSURI)
	json.NewDecoder(resp.Body).Decode(&jwks)
	resp.Body.Close()
	if len(jwks.Keys) != 1 || jwks.Keys[0].KeyID == nil {
		t.Fatalf("jwks %+v", jwks)
	}
	// 401 names the metadata
	st, h := mcpStatus(t, in, "", "")
	if st != 401 || !strings.Contains(h.Get("WWW-Authenticate"), `resource_metadata="`+in.URL+`/.well-known/oauth-protected-resource/mcp"`) {
		t.Fatalf("no token: %d %q", st, h.Get("WWW-Authenticate"))
	}
}

func TestTokenNegatives(t *testing.T) {
	e := newEnv(t)
	a := e.start(t, func(c *Config) { c.RefreshGrace = 300 * time.Millisecond })
	b := e.start(t, nil) // another resource (audience) on the same database
	cid := registerClient(t, a)
	did := "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"

	t.Run("pkce mismatch", func(t *testing.T) {
		code := seedGrant(t, a, cid, did, verifier, ScopeRead+" "+ScopeWrite)
		if st, out := exchange(t, a, cid, code, verifier+"x", testRedirect); st != 400 || out["error"] != "invalid_grant" {
			t.Fatalf("%d %v", st, out)
		}
	})
	t.Run("redirect mismatch", func(t *testing.T) {
		code := seedGrant(t, a, cid, did, verifier, ScopeRead)
		if st, out := exchange(t, a, cid, code, verifier, "http://127.0.0.1:9/other"); st != 400 || out["error"] != "invalid_grant" {
			t.Fatalf("%d %v", st, out)
		}
	})
	t.Run("reused code revokes", func(t *testing.T) {
		code := seedGrant(t, a, cid, did, verifier, ScopeRead)
		st, out := exchange(t, a, cid, code, verifier, testRedirect)
		if st != 200 {
			t.Fatalf("%d %v", st, out)
		}
		tok := out["access_token"].(string)
		if st, _ := mcpStatus(t, a, tok, ""); st != 200 {
			t.Fatalf("fresh token: %d", st)
		}
		if st, out := exchange(t, a, cid, code, verifier, testRedirect); st != 400 || out["error"] != "invalid_grant" {
			t.Fatalf("reuse: %d %v", st, out)
		}
		if st, _ := mcpStatus(t, a, tok, ""); st != 401 {
			t.Fatalf("token of a replayed code: %d", st)
		}
	})
	t.Run("tokens", func(t *testing.T) {
		code := seedGrant(t, a, cid, did, verifier, ScopeRead)
		st, out := exchange(t, a, cid, code, verifier, testRedirect)
		if st != 200 {
			t.Fatalf("%d %v", st, out)
		}
		access, refresh := out["access_token"].(string), out["refresh_token"].(string)
		if st, _ := mcpStatus(t, a, "bmat_unknown", ""); st != 401 {
			t.Fatalf("unknown token: %d", st)
		}
		// wrong audience: a token of a presented to b
		if st, h := mcpStatus(t, b, access, ""); st != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "another resource") {
			t.Fatalf("wrong audience: %d %q", st, h.Get("WWW-Authenticate"))
		}
		// a read-only grant may read but not write
		if st, _ := mcpStatus(t, a, access, ""); st != 200 {
			t.Fatalf("read: %d", st)
		}
		st, h := mcpStatus(t, a, access, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"insert_after","arguments":{"text":"x"}}}`)
		if st != 403 || !strings.Contains(h.Get("WWW-Authenticate"), `error="insufficient_scope"`) {
			t.Fatalf("write with read scope: %d %q", st, h.Get("WWW-Authenticate"))
		}
		// rotation: the old refresh token works again within the grace window
		st, r1 := postForm(t, a.URL+"/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {cid}, "refresh_token": {refresh}})
		if st != 200 {
			t.Fatalf("refresh: %d %v", st, r1)
		}
		st, r2 := postForm(t, a.URL+"/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {cid}, "refresh_token": {refresh}})
		if st != 200 {
			t.Fatalf("retry within grace: %d %v", st, r2)
		}
		time.Sleep(400 * time.Millisecond)
		st, r3 := postForm(t, a.URL+"/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {cid}, "refresh_token": {refresh}})
		if st != 400 || r3["error"] != "invalid_grant" {
			t.Fatalf("replay after grace: %d %v", st, r3)
		}
		if st, _ := mcpStatus(t, a, r1["access_token"].(string), ""); st != 401 {
			t.Fatalf("the family survived a replay: %d", st)
		}
		// expiry
		code = seedGrant(t, a, cid, did, verifier, ScopeRead)
		_, out = exchange(t, a, cid, code, verifier, testRedirect)
		access = out["access_token"].(string)
		a.db.Exec(context.Background(), "UPDATE tokens SET expires_at = now() - interval '1 second' WHERE hash = $1", hashToken(access))
		if st, h := mcpStatus(t, a, access, ""); st != 401 || !strings.Contains(h.Get("WWW-Authenticate"), "invalid_token") {
			t.Fatalf("expired: %d", st)
		}
		// revocation
		code = seedGrant(t, a, cid, did, verifier, ScopeRead)
		_, out = exchange(t, a, cid, code, verifier, testRedirect)
		access, refresh = out["access_token"].(string), out["refresh_token"].(string)
		if st, _ := postForm(t, a.URL+"/revoke", url.Values{"client_id": {cid}, "token": {refresh}}); st != 200 {
			t.Fatalf("revoke: %d", st)
		}
		if st, _ := mcpStatus(t, a, access, ""); st != 401 {
			t.Fatalf("revoked grant's access token: %d", st)
		}
		if st, _ := postForm(t, a.URL+"/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {cid}, "refresh_token": {refresh}}); st != 400 {
			t.Fatalf("revoked refresh token: %d", st)
		}
	})
	t.Run("wrong resource", func(t *testing.T) {
		code := seedGrant(t, a, cid, did, verifier, ScopeRead)
		st, out := postForm(t, a.URL+"/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {cid}, "code": {code},
			"code_verifier": {verifier}, "redirect_uri": {testRedirect}, "resource": {b.resource}})
		if st != 400 || out["error"] != "invalid_target" {
			t.Fatalf("%d %v", st, out)
		}
	})
}

func TestAuthorizePage(t *testing.T) {
	in := newEnv(t).start(t, nil)
	cid := registerClient(t, in)
	q := url.Values{"client_id": {cid}, "redirect_uri": {testRedirect}, "response_type": {"code"}, "state": {"st"},
		"code_challenge": {oauth.S256CodeChallenge(verifier)}, "code_challenge_method": {"S256"}, "resource": {in.resource}}
	get := func(q url.Values) *http.Response {
		resp, err := noRedirect.Get(in.URL + "/authorize?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	// an unregistered redirect URI is never redirected to
	bad := url.Values{}
	for k, v := range q {
		bad[k] = v
	}
	bad.Set("redirect_uri", "https://evil.example/cb")
	if resp := get(bad); resp.StatusCode != 400 {
		t.Fatalf("unregistered redirect: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// no PKCE: an error sent back to the client
	nop := url.Values{}
	for k, v := range q {
		nop[k] = v
	}
	nop.Del("code_challenge")
	if resp := get(nop); resp.StatusCode != 302 || !strings.Contains(resp.Header.Get("Location"), "error=invalid_request") {
		t.Fatalf("no PKCE: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	plain := url.Values{}
	for k, v := range q {
		plain[k] = v
	}
	plain.Set("code_challenge_method", "plain")
	if resp := get(plain); resp.StatusCode != 302 || !strings.Contains(resp.Header.Get("Location"), "error=invalid_request") {
		t.Fatalf("plain PKCE: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	// the consent page: not frameable, CSRF-protected
	resp := get(q)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Frame-Options") != "DENY" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("consent page: %d %v", resp.StatusCode, resp.Header)
	}
	if !strings.Contains(string(body), "test client") {
		t.Fatalf("consent page does not name the client: %s", body)
	}
	reqID := hidden(string(body), "request")
	// a form without the cookie (another site posting it) is refused
	st, _ := postForm(t, in.URL+"/authorize", url.Values{"request": {reqID}, "csrf": {"forged"}, "action": {"allow"}, "identifier": {"did:plc:x"}})
	if st != 403 {
		t.Fatalf("forged consent: %d", st)
	}
	// deny goes back to the client with access_denied
	var csrf string
	for _, c := range resp.Cookies() {
		if c.Name == csrfCookie {
			csrf = c.Value
		}
	}
	req, _ := http.NewRequest("POST", in.URL+"/authorize", strings.NewReader(url.Values{"request": {reqID}, "csrf": {csrf}, "action": {"deny"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(&http.Cookie{Name: csrfCookie, Value: csrf})
	dr, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	dr.Body.Close()
	if dr.StatusCode != 302 || !strings.Contains(dr.Header.Get("Location"), "error=access_denied") || !strings.Contains(dr.Header.Get("Location"), "state=st") {
		t.Fatalf("deny: %d %s", dr.StatusCode, dr.Header.Get("Location"))
	}
}

func hidden(page, name string) string {
	i := strings.Index(page, `name="`+name+`" value="`)
	if i < 0 {
		return ""
	}
	rest := page[i+len(`name="`+name+`" value="`):]
	return rest[:strings.IndexByte(rest, '"')]
}

func TestClientIDMetadataDocument(t *testing.T) {
	in := newEnv(t).start(t, nil)
	var docURL string
	doc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"client_id": docURL, "client_name": "Document client", "redirect_uris": []string{testRedirect}, "token_endpoint_auth_method": "none"})
	}))
	defer doc.Close()
	docURL = doc.URL + "/client.json"
	q := url.Values{"client_id": {docURL}, "redirect_uri": {testRedirect}, "response_type": {"code"},
		"code_challenge": {oauth.S256CodeChallenge(verifier)}, "code_challenge_method": {"S256"}}
	resp, err := noRedirect.Get(in.URL + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "Document client") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// a document whose client_id is not its URL is refused
	docURL = doc.URL + "/elsewhere.json"
	q.Set("client_id", doc.URL+"/other.json")
	resp, _ = noRedirect.Get(in.URL + "/authorize?" + q.Encode())
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Fatalf("mismatched document: %d", resp.StatusCode)
	}
}

// TestLedgerShared: reservations from two instances' ledgers on one
// database, racing, never pass the hourly limit.
func TestLedgerShared(t *testing.T) {
	e := newEnv(t)
	a, b := e.start(t, nil), e.start(t, nil)
	la := &Ledger{DB: a.db, Limit: 500}
	lb := &Ledger{DB: b.db, Limit: 500}
	ctx := context.Background()
	did := "did:plc:budget"
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted, refused := 0, 0
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := la
			if i%2 == 1 {
				l = lb
			}
			for range 10 {
				id, err := l.Reserve(ctx, did, 7)
				if err != nil {
					mu.Lock()
					refused++
					mu.Unlock()
					continue
				}
				l.Settle(ctx, did, id, 7)
				mu.Lock()
				granted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	spent, err := la.Spent(ctx, did, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if spent > 500 || spent != granted*7 || granted != 500/7 {
		t.Fatalf("spent %d, granted %d, refused %d", spent, granted, refused)
	}
	_, err = la.Reserve(ctx, did, 7)
	if err == nil || !strings.Contains(err.Error(), "left in the rolling hour") {
		t.Fatalf("over the limit: %v", err)
	}
}
