package hosted

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// browser is a person's browser on an instance: a cookie jar, no
// redirects followed (each is checked).
type browser struct {
	t  testing.TB
	in *instance
	hc *http.Client
}

func newBrowser(t testing.TB, in *instance) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, in: in, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, u string, form url.Values, hdr map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, u, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res, string(raw)
}

// cookie is the browser's view cookie (nil: none).
func (b *browser) cookie() *http.Cookie {
	u, _ := url.Parse(b.in.URL + "/view")
	for _, c := range b.hc.Jar.Cookies(u) {
		if c.Name == ViewCookie {
			return c
		}
	}
	return nil
}

// startSignIn opens /view signed out (the sign-in page) and sends its form
// for a; it returns where the browser is sent (the PDS).
func (b *browser) startSignIn(a *pdstest.Account) string {
	b.t.Helper()
	res, page := b.do("GET", b.in.URL+"/view", nil, nil)
	if res.StatusCode != 401 || !strings.Contains(page, `action="/view/signin"`) || strings.Contains(strings.ToLower(page), "<script") ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		b.t.Fatalf("the sign-in page: %d %v %s", res.StatusCode, res.Header, page)
	}
	// (a browser sends Origin: null from a page with Referrer-Policy: no-referrer)
	res, page = b.do("POST", b.in.URL+"/view/signin", url.Values{"csrf": {hidden(page, "csrf")}, "identifier": {a.DID.String()}}, map[string]string{"Origin": "null"})
	if res.StatusCode != 303 {
		b.t.Fatalf("sending the sign-in form: %d %s", res.StatusCode, page)
	}
	return res.Header.Get("Location")
}

// signInView signs a browser in to in's /view as a, through the sign-in
// page, a's PDS and the callback; it returns the view cookie it holds.
func signInView(t testing.TB, in *instance, a *pdstest.Account) *http.Cookie {
	t.Helper()
	b := newBrowser(t, in)
	cb, err := pdstest.ConsentAt(context.Background(), b.startSignIn(a), a)
	if err != nil {
		t.Fatal(err)
	}
	res, page := b.do("GET", cb, nil, nil)
	if res.StatusCode != 200 || !strings.Contains(page, `content="0;url=/view"`) || strings.Contains(strings.ToLower(page), "<script") {
		t.Fatalf("the callback: %d %s", res.StatusCode, page)
	}
	var set *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == ViewCookie {
			set = c
		}
	}
	if set == nil || !set.HttpOnly || set.SameSite != http.SameSiteStrictMode || set.Path != "/view" || set.MaxAge <= 0 || b.cookie() == nil {
		t.Fatalf("the view cookie: %+v", set)
	}
	// the page itself, for the signed-in browser
	if res, _ := b.do("GET", in.URL+"/view", nil, nil); res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'sha256-") {
		t.Fatalf("/view after signing in: %d %v", res.StatusCode, res.Header)
	}
	return b.cookie()
}

// TestHostedViewSignIn: a person signs in to /view in their browser (the
// sign-in page, their PDS, the callback) and sees their own outline, read
// from their repository; one who never connected an MCP client as well
// (their own, empty). Another user's cookie beside the first's token is
// refused (401), and neither sees the other's outline.
func TestHostedViewSignIn(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	in := e.start(t, nil)
	cid := registerClient(t, in)
	ana := newAccount(t, p, fmt.Sprintf("vsana%d", time.Now().UnixNano()%1e6))
	access, _ := signIn(t, in, cid, ana, "")
	res, err := call(context.Background(), mcpClient(t, in, access), "insert_after", map[string]any{"text": "Only ana sees this"})
	if err != nil || res.IsError {
		t.Fatalf("insert: %v %s", err, resultText(res))
	}
	anaC := signInView(t, in, ana)
	if st, texts := firstState(t, in, cookieHdr(anaC)); st != 200 || texts != "Only ana sees this" {
		t.Fatalf("ana's view: %d %q", st, texts)
	}
	ben := newAccount(t, p, fmt.Sprintf("vsben%d", time.Now().UnixNano()%1e6))
	benC := signInView(t, in, ben)
	if st, texts := firstState(t, in, cookieHdr(benC)); st != 200 || texts != "" {
		t.Fatalf("ben's view: %d %q, want his own empty outline", st, texts)
	}
	mixed := map[string]string{"Cookie": ViewCookie + "=" + benC.Value, "Authorization": "Bearer " + access}
	if st, texts := firstState(t, in, mixed); st != 401 {
		t.Errorf("ben's cookie with ana's token: %d %q, want 401", st, texts)
	}
	if res := viewDo(t, in, "GET", "/view", mixed, ""); res.StatusCode != 401 {
		t.Errorf("ben's cookie with ana's token, the page: %d, want 401", res.StatusCode)
	}
}

// TestHostedViewSignInRefused: the sign-in's callback with a state that
// is not the request's is refused, and so is the request's own state in
// another browser (without its CSRF cookie); neither sets a view cookie.
// The form itself is refused without its CSRF token or from another
// origin.
func TestHostedViewSignInRefused(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	in := e.start(t, nil)
	a := newAccount(t, p, fmt.Sprintf("vsref%d", time.Now().UnixNano()%1e6))
	b := newBrowser(t, in)
	if pdsURL := b.startSignIn(a); !strings.HasPrefix(pdsURL, p.URL) {
		t.Fatalf("sent to %q, not the PDS %s", pdsURL, p.URL)
	}
	var state string
	if err := in.db.QueryRow(context.Background(), "SELECT upstream_state FROM auth_requests WHERE view").Scan(&state); err != nil {
		t.Fatal(err)
	}
	cb := func(state string) string {
		return in.URL + "/oauth/callback?" + url.Values{"state": {state}, "iss": {p.URL}, "code": {"cod-x"}}.Encode()
	}
	if res, page := b.do("GET", cb("not-"+state), nil, nil); res.StatusCode != 400 || b.cookie() != nil {
		t.Errorf("a wrong state: %d %s, want 400 and no view cookie", res.StatusCode, page)
	}
	other := newBrowser(t, in)
	if res, page := other.do("GET", cb(state), nil, nil); res.StatusCode != 403 || other.cookie() != nil {
		t.Errorf("the state in another browser: %d %s, want 403 and no view cookie", res.StatusCode, page)
	}
	// the form: without its CSRF token, with another's, from another origin
	_, page := b.do("GET", in.URL+"/view", nil, nil)
	csrf := hidden(page, "csrf")
	for name, c := range map[string]struct {
		csrf, origin string
		want         int
	}{"no token": {"", "null", 403}, "a wrong token": {csrf + "x", "null", 403}, "another origin": {csrf, "https://evil.example", 403}} {
		res, page := b.do("POST", in.URL+"/view/signin", url.Values{"csrf": {c.csrf}, "identifier": {a.DID.String()}}, map[string]string{"Origin": c.origin})
		if res.StatusCode != c.want {
			t.Errorf("the form with %s: %d %s, want %d", name, res.StatusCode, page, c.want)
		}
	}
	if res, page := other.do("POST", in.URL+"/view/signin", url.Values{"csrf": {csrf}, "identifier": {a.DID.String()}}, nil); res.StatusCode != 403 {
		t.Errorf("the form from another browser: %d %s, want 403", res.StatusCode, page)
	}
	var n int
	in.db.QueryRow(context.Background(), "SELECT count(*) FROM auth_requests").Scan(&n)
	if n != 0 {
		t.Errorf("%d authorization requests recorded by refused forms (or left by refused callbacks)", n)
	}
}

// TestHostedViewRevoked: a view cookie stops working at once when the
// access token it was exchanged from is revoked (the token alone, or its
// grant by its refresh token), and when its sign-in's row expires; other
// sign-ins go on.
func TestHostedViewRevoked(t *testing.T) {
	in, tokens := viewUsers(t)
	ctx := context.Background()
	var cid string
	if err := in.db.QueryRow(ctx, "SELECT client_id FROM tokens WHERE hash = $1", hashToken(tokens["did:plc:alice"])).Scan(&cid); err != nil {
		t.Fatal(err)
	}
	alice, bob := viewCookie(t, in, tokens["did:plc:alice"]), viewCookie(t, in, tokens["did:plc:bob"])
	st, out := exchange(t, in, cid, seedGrant(t, in, cid, "did:plc:bob", verifier, ScopeRead), verifier, testRedirect)
	if st != 200 {
		t.Fatalf("token: %d %v", st, out)
	}
	bob2 := viewCookie(t, in, out["access_token"].(string))
	live := func(name string, c *http.Cookie, want int) {
		t.Helper()
		if st, _ := firstState(t, in, cookieHdr(c)); st != want {
			t.Errorf("%s: %d, want %d", name, st, want)
		}
	}
	live("alice before", alice, 200)
	live("bob's second sign-in before", bob2, 200)
	if st, _ := postForm(t, in.URL+"/revoke", url.Values{"client_id": {cid}, "token": {tokens["did:plc:alice"]}}); st != 200 {
		t.Fatalf("revoke: %d", st)
	}
	live("alice after her access token was revoked", alice, 401)
	if res := viewDo(t, in, "GET", "/view", cookieHdr(alice), ""); res.StatusCode != 401 {
		t.Errorf("alice's page after the revocation: %d, want 401", res.StatusCode)
	}
	if st, _ := postForm(t, in.URL+"/revoke", url.Values{"client_id": {cid}, "token": {out["refresh_token"].(string)}}); st != 200 {
		t.Fatalf("revoke: %d", st)
	}
	live("bob's second sign-in after its grant was revoked", bob2, 401)
	live("bob's first sign-in", bob, 200)
	if _, err := in.db.Exec(ctx, "UPDATE view_sessions SET expires_at = now() - interval '1 second' WHERE token_hash = $1", hashToken(tokens["did:plc:bob"])); err != nil {
		t.Fatal(err)
	}
	live("bob's first sign-in expired", bob, 401)
}
