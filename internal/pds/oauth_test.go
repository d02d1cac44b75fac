package pds_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// The package's one PDS (TestMain) also publishes the permission sets, so
// that include:app.bulleted.authFull resolves offline.
func init() {
	dir, err := pdstest.PermissionSets()
	if err != nil {
		panic(err)
	}
	os.Setenv(pdstest.LexiconAuthorityEnv, dir)
}

// expansion is what the reference PDS grants for include:app.bulleted.authFull.
var expansion = []string{"atproto", "repo?collection=app.bulleted.comment&collection=app.bulleted.commentPolicy&collection=app.bulleted.mirror&collection=app.bulleted.node&collection=app.bulleted.note&collection=app.bulleted.outline"}

func oauthLogin(t testing.TB, a *pdstest.Account, dir, permissionSet string) *pds.OAuthGrant {
	t.Helper()
	start := time.Now()
	g, err := pds.OAuthLogin{
		Identifier: a.Handle, PDS: srv.URL, Dir: dir, Directory: pds.Directory(srv.PLCURL),
		Browse:        func(ctx context.Context, u string) error { return srv.Authorize(ctx, u, a) },
		PermissionSet: permissionSet, Wait: time.Minute,
	}.Login(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("login took %v; granted %q", time.Since(start), g.Scopes)
	slices.Sort(g.Scopes)
	if g.DID != a.DID || g.Host != srv.URL {
		t.Fatalf("grant %s on %s, want %s on %s", g.DID, g.Host, a.DID, srv.URL)
	}
	return g
}

// statuses counts answers by HTTP status and WWW-Authenticate error.
type statuses struct {
	mu sync.Mutex
	n  map[string]int
}

func (s *statuses) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		k := strconv.Itoa(resp.StatusCode)
		h := resp.Header.Get("WWW-Authenticate")
		if i := strings.Index(h, "error="); i >= 0 {
			e, _, _ := strings.Cut(h[i:], ",")
			k += " " + e
		}
		s.mu.Lock()
		s.n[k]++
		s.mu.Unlock()
	}
	return resp, err
}

func (s *statuses) get(prefix string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, v := range s.n {
		if strings.HasPrefix(k, prefix) {
			n += v
		}
	}
	return n
}

func openOAuth(t testing.TB, dir string) (*atclient.APIClient, *pds.OAuthAuth) {
	t.Helper()
	return openOAuthHTTP(t, dir, nil)
}

func openOAuthHTTP(t testing.TB, dir string, hc *http.Client) (*atclient.APIClient, *pds.OAuthAuth) {
	t.Helper()
	c, did, ok, err := pds.OpenOAuth(context.Background(), dir, hc)
	if err != nil || !ok {
		t.Fatalf("OpenOAuth: ok=%v %v", ok, err)
	}
	if *c.AccountDID != did {
		t.Fatalf("client DID %s, OpenOAuth said %s", *c.AccountDID, did)
	}
	return c, c.Auth.(*pds.OAuthAuth)
}

// records lists a's collection through an independent (password) client.
func records(t testing.TB, a *pdstest.Account, collection string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := srv.Client(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Records []struct {
			URI   string         `json:"uri"`
			Value map[string]any `json:"value"`
		} `json:"records"`
	}
	if err := c.Get(ctx, "com.atproto.repo.listRecords", map[string]any{"repo": a.DID.String(), "collection": collection, "limit": 100}, &out); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, r := range out.Records {
		texts = append(texts, fmt.Sprint(r.Value["text"]))
	}
	slices.Sort(texts)
	return texts
}

// insert writes top-level bullets through c (the engine's applyWrites).
func insert(t testing.TB, c *atclient.APIClient, did syntax.DID, texts ...string) {
	t.Helper()
	enginetest.Insert(t, outline.New(pds.New(c, did)), outline.Position{}, texts...)
}

func refreshToken(t testing.TB, dir string) string {
	t.Helper()
	raw, err := os.ReadFile(pds.OAuthFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(raw), `"refresh_token":"`)
	if i < 0 {
		t.Fatalf("no refresh token in %s", raw)
	}
	rest := string(raw[i+len(`"refresh_token":"`):])
	return rest[:strings.IndexByte(rest, '"')]
}

// Login with the permission set, write through the session, and a write
// outside the set refused with a clear error and nothing written.
func TestOAuthLogin(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	g := oauthLogin(t, a, dir, "")
	if !g.PermissionSet || g.Fallback != "" || !reflect.DeepEqual(g.Requested, []string{"atproto", "include:app.bulleted.authFull"}) {
		t.Fatalf("requested %q, fallback %q", g.Requested, g.Fallback)
	}
	if !reflect.DeepEqual(g.Scopes, expansion) {
		t.Fatalf("granted %q, want the permission set's expansion %q", g.Scopes, expansion)
	}
	fi, err := os.Stat(pds.OAuthFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("session file mode %v", fi.Mode().Perm())
	}
	raw, _ := os.ReadFile(pds.OAuthFile(dir))
	for _, want := range []string{`"dpop_privatekey_multibase":"z`, `"access_token":"`, `"client_id":"http://localhost?redirect_uri=http%3A%2F%2F127.0.0.1%3A`} {
		if !strings.Contains(string(raw), want) {
			t.Fatalf("session file lacks %s", want)
		}
	}
	if strings.Contains(string(raw), a.Password) {
		t.Fatal("the session file holds the password")
	}

	c, auth := openOAuth(t, dir)
	if scopes := auth.Scopes(); auth.DID() != a.DID || !reflect.DeepEqual(slices.Sorted(slices.Values(scopes)), expansion) {
		t.Fatalf("session %s %q", auth.DID(), auth.Scopes())
	}
	insert(t, c, a.DID, "through oauth", "second")
	if got := records(t, a, "app.bulleted.node"); !reflect.DeepEqual(got, []string{"second", "through oauth"}) {
		t.Fatalf("read back %q", got)
	}

	// outside the permission set: refused, clearly, and nothing written
	err = c.Post(ctx, "com.atproto.repo.createRecord", map[string]any{
		"repo": a.DID.String(), "collection": "app.bsky.feed.post",
		"record": map[string]any{"$type": "app.bsky.feed.post", "text": "not allowed", "createdAt": time.Now().UTC().Format(time.RFC3339)}}, nil)
	if !pds.IsScopeMissing(err) {
		t.Fatalf("want a scope error, got %v", err)
	}
	t.Logf("outside the scope: %v", err)
	for _, want := range []string{"OAuth session does not permit", "app.bsky.feed.post", "app.bulleted collections only"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks %q", err, want)
		}
	}
	if got := records(t, a, "app.bsky.feed.post"); len(got) != 0 {
		t.Fatalf("a post was written: %q", got)
	}

	// the backend's choice: the OAuth session where there is one, else the
	// app password
	pc, did, isOAuth, err := pds.Login{PDS: srv.URL, Identifier: a.Handle, Password: a.AppPassword, Dir: dir}.OpenPreferOAuth(ctx)
	if _, ok := pc.Auth.(*pds.OAuthAuth); err != nil || !isOAuth || !ok || did != a.DID {
		t.Fatalf("with an OAuth session: %T oauth=%v %v", pc.Auth, isOAuth, err)
	}
	if _, _, _, err := (pds.Login{Identifier: "did:plc:someoneelse", Dir: dir}).OpenPreferOAuth(ctx); err == nil || !strings.Contains(err.Error(), "is for "+a.DID.String()) {
		t.Fatalf("another DID: %v", err)
	}
	other := t.TempDir()
	pc, did, isOAuth, err = pds.Login{PDS: srv.URL, Identifier: a.Handle, Password: a.AppPassword, Dir: other}.OpenPreferOAuth(ctx)
	if _, ok := pc.Auth.(*atclient.PasswordAuth); err != nil || isOAuth || !ok || did != a.DID {
		t.Fatalf("without an OAuth session: %T oauth=%v %v", pc.Auth, isOAuth, err)
	}
	if _, _, err := pds.New(pc, did).Head(ctx); err != nil {
		t.Fatal(err)
	}
	// the app password still works in the OAuth session's data directory
	r := pdstest.Login(t, srv, a, dir, nil)
	if _, _, err := r.Head(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pds.OAuthFile(dir)); err != nil {
		t.Fatalf("the app-password login disturbed the OAuth session: %v", err)
	}
}

// An authorization server that cannot resolve the permission set: the
// login asks for the six collections one by one instead, and says so.
func TestOAuthFallback(t *testing.T) {
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	g := oauthLogin(t, a, dir, "app.bulleted.unpublished")
	if g.PermissionSet || !strings.Contains(g.Fallback, "include:app.bulleted.unpublished") {
		t.Fatalf("permission set %v, fallback %q", g.PermissionSet, g.Fallback)
	}
	t.Logf("fallback: %s", g.Fallback)
	want := pds.GranularScopes()
	if !reflect.DeepEqual(g.Requested, want) || !reflect.DeepEqual(g.Scopes, slices.Sorted(slices.Values(want))) {
		t.Fatalf("requested %q, granted %q, want %q", g.Requested, g.Scopes, want)
	}
	c, _ := openOAuth(t, dir)
	insert(t, c, a.DID, "granular")
	if got := records(t, a, "app.bulleted.node"); !reflect.DeepEqual(got, []string{"granular"}) {
		t.Fatalf("read back %q", got)
	}
}

// Two clients of one data directory (as two processes) refresh at the
// same time, repeatedly: the lock and the re-read mean the PDS never sees
// a rotated refresh token again, and the session survives for both.
func TestOAuthConcurrentRefresh(t *testing.T) {
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	oauthLogin(t, a, dir, "")
	c1, auth1 := openOAuth(t, dir)
	st := &statuses{n: map[string]int{}}
	c2, auth2 := openOAuthHTTP(t, dir, &http.Client{Transport: st})
	ctx := context.Background()
	seen := map[string]bool{refreshToken(t, dir): true}
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, au := range []*pds.OAuthAuth{auth1, auth2} {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- au.Refresh(ctx) }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		rt := refreshToken(t, dir)
		if seen[rt] {
			t.Fatalf("round %d: the refresh token did not change", round)
		}
		seen[rt] = true
	}
	insert(t, c1, a.DID, "one")
	insert(t, c2, a.DID, "two")
	// c1 refreshes alone; c2 still holds the old tokens and must take c1's
	// instead of refreshing with a used token
	if err := auth1.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	before := st.get(`401 error="invalid_token"`)
	insert(t, c2, a.DID, "three")
	t.Logf("c2's answers: %v", st.n)
	if st.get(`401 error="invalid_token"`) == before {
		t.Fatal("c2's old access token was accepted after c1's refresh: the adoption path was not exercised")
	}
	insert(t, c1, a.DID, "four")
	c3, _ := openOAuth(t, dir)
	insert(t, c3, a.DID, "five")
	if got := records(t, a, "app.bulleted.node"); !reflect.DeepEqual(got, []string{"five", "four", "one", "three", "two"}) {
		t.Fatalf("read back %q", got)
	}
}

// Logout revokes the tokens at the server and deletes the file; a copy of
// the file is worthless afterwards, and says to log in again.
func TestOAuthLogout(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	oauthLogin(t, a, dir, "")
	c, _ := openOAuth(t, dir)
	saved, err := os.ReadFile(pds.OAuthFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	did, err := pds.LogoutOAuth(ctx, dir)
	if err != nil || did != a.DID {
		t.Fatalf("logout %s: %v", did, err)
	}
	if _, err := os.Stat(pds.OAuthFile(dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("session file still there: %v", err)
	}
	if _, _, ok, err := pds.OpenOAuth(ctx, dir, nil); ok || err != nil {
		t.Fatalf("after logout: ok=%v %v", ok, err)
	}
	if _, err := pds.LogoutOAuth(ctx, dir); !errors.Is(err, pds.ErrNoOAuthSession) {
		t.Fatalf("second logout: %v", err)
	}
	// the open client: its token is revoked
	err = c.Get(ctx, "com.atproto.server.getSession", nil, nil)
	if !pds.IsOAuthExpired(err) || !strings.Contains(err.Error(), "bulleted-mcp login") {
		t.Fatalf("revoked client: %v", err)
	}
	t.Logf("revoked client: %v", err)
	// a copy of the file: revoked at the server too
	if err := os.WriteFile(pds.OAuthFile(dir), saved, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, ok, err := pds.OpenOAuth(ctx, dir, nil)
	if !ok || !errors.Is(err, pds.ErrOAuthExpired) {
		t.Fatalf("revoked copy: ok=%v %v", ok, err)
	}
	t.Logf("revoked copy: %v", err)
}

// What the lock prevents, measured on the reference PDS: two holders of
// one session each refreshing with the same refresh token. The second
// refresh is refused, and the first one's fresh tokens die with it.
func TestOAuthReplayKillsSession(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	oauthLogin(t, a, dir, "")
	raw, err := os.ReadFile(pds.OAuthFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ClientID string                  `json:"client_id"`
		Session  oauth.ClientSessionData `json:"session"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	key, err := atcrypto.ParsePrivateMultibase(f.Session.DPoPPrivateKeyMultibase)
	if err != nil {
		t.Fatal(err)
	}
	holder := func() *oauth.ClientSession {
		d := f.Session
		return &oauth.ClientSession{Client: http.DefaultClient, Config: &oauth.ClientConfig{ClientID: f.ClientID}, Data: &d, DPoPPrivateKey: key}
	}
	first, second := holder(), holder()
	if _, err := first.RefreshTokens(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = second.RefreshTokens(ctx)
	if err == nil {
		t.Fatal("the PDS accepted a used refresh token")
	}
	t.Logf("replayed refresh token: %v", err)
	err = first.APIClient().Get(ctx, "com.atproto.server.getSession", nil, nil)
	if err == nil {
		t.Fatal("the first holder's fresh access token still works after the replay")
	}
	t.Logf("the first holder's fresh tokens after the replay: %v", err)
	if _, err := first.RefreshTokens(ctx); err == nil {
		t.Fatal("the first holder's fresh refresh token still works after the replay")
	} else {
		t.Logf("the first holder's fresh refresh token after the replay: %v", err)
	}
}

// An access token the PDS no longer takes (as when it expires) is renewed
// on the fly with the refresh token, and the new tokens are saved.
func TestOAuthStaleAccessToken(t *testing.T) {
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	oauthLogin(t, a, dir, "")
	file := func() map[string]any {
		raw, err := os.ReadFile(pds.OAuthFile(dir))
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]any
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	old := file()["session"].(map[string]any)["access_token"]
	_, auth := openOAuth(t, dir)
	if err := auth.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	// the file now holds the new refresh token and, spliced in, the access
	// token from before the refresh
	f := file()
	rt := f["session"].(map[string]any)["refresh_token"]
	f["session"].(map[string]any)["access_token"] = old
	raw, _ := json.Marshal(f)
	if err := os.WriteFile(pds.OAuthFile(dir), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	st := &statuses{n: map[string]int{}}
	c, _ := openOAuthHTTP(t, dir, &http.Client{Transport: st})
	if st.get(`401 error="invalid_token"`) != 1 {
		t.Fatalf("answers %v: the stale token was not refused once", st.n)
	}
	if got := refreshToken(t, dir); got == rt || got == "" {
		t.Fatal("the renewed tokens were not saved")
	}
	insert(t, c, a.DID, "after renewal")
	if got := records(t, a, "app.bulleted.node"); !reflect.DeepEqual(got, []string{"after renewal"}) {
		t.Fatalf("read back %q", got)
	}
}

// Production is https only; plain http only on a loopback host. These are
// refused before any request.
func TestOAuthInsecureURLs(t *testing.T) {
	cases := []struct{ name, pds string }{
		{"plain http on a public host", "http://pds.example.com"},
		{"plain http on a private address", "http://10.0.0.1:2583"},
		{"another scheme", "ftp://pds.example.com"},
		{"no host", "https://"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := pds.OAuthLogin{Identifier: "someone.example.com", PDS: c.pds, Dir: t.TempDir(), Directory: pds.Directory(srv.PLCURL),
				Browse: func(context.Context, string) error { t.Fatal("browsed"); return nil }}.Login(context.Background())
			if !errors.Is(err, pds.ErrInsecureURL) {
				t.Fatalf("want ErrInsecureURL, got %v", err)
			}
		})
	}
}
