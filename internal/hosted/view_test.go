package hosted

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// viewUsers starts an instance with two signed-in users (their access
// tokens issued by /token; read and write for did:plc:alice, read only for
// did:plc:bob), each with an outline of their own in memory.
func viewUsers(t *testing.T) (in *instance, tokens map[string]string) {
	t.Helper()
	in = newEnv(t).start(t, nil)
	texts := map[string]string{"did:plc:alice": "Alice's plans", "did:plc:bob": "Bob's plans"}
	in.Server.open = func(ctx context.Context, did string) (*user, error) {
		e := outline.New(outlinegen.NewMemory(nil))
		if _, err := insertTop(ctx, e, bullets(texts[did], 2)); err != nil {
			return nil, err
		}
		return &user{did: did, env: &tools.Env{Engine: e, Search: in.search, Snapshots: in.snapshots}}, nil
	}
	cid := registerClient(t, in)
	tokens = map[string]string{}
	for did, scope := range map[string]string{"did:plc:alice": ScopeRead + " " + ScopeWrite, "did:plc:bob": ScopeRead} {
		st, out := exchange(t, in, cid, seedGrant(t, in, cid, did, verifier, scope), verifier, testRedirect)
		if st != 200 {
			t.Fatalf("token for %s: %d %v", did, st, out)
		}
		tokens[did] = out["access_token"].(string)
	}
	return in, tokens
}

// viewDo sends one request to in's /view endpoints (no redirects followed).
func viewDo(t *testing.T, in *instance, method, path string, hdr map[string]string, body string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, method, in.URL+path, strings.NewReader(body))
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := noRedirectClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res
}

func noRedirectClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// viewCookie signs a browser in as the token's user: the link from POST
// /view/session, opened; returns the cookie it set.
func viewCookie(t *testing.T, in *instance, token string) *http.Cookie {
	t.Helper()
	res := viewDo(t, in, "POST", "/view/session", map[string]string{"Authorization": "Bearer " + token}, "")
	var out struct {
		URL string `json:"url"`
	}
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&out) != nil {
		t.Fatalf("/view/session: %d", res.StatusCode)
	}
	u, err := url.Parse(out.URL)
	if err != nil || !strings.HasPrefix(out.URL, in.public+"/view?link=") {
		t.Fatalf("link %q", out.URL)
	}
	page := viewDo(t, in, "GET", u.RequestURI(), nil, "")
	var c *http.Cookie
	for _, x := range page.Cookies() {
		if x.Name == ViewCookie {
			c = x
		}
	}
	body, _ := io.ReadAll(page.Body)
	if page.StatusCode != 200 || c == nil {
		t.Fatalf("opening the link: %d %v %s", page.StatusCode, page.Cookies(), body)
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/view" || c.MaxAge <= 0 || c.MaxAge > int(ViewCookieTTL.Seconds()) {
		t.Fatalf("the view cookie is not HttpOnly, SameSite=Strict, path /view, expiring: %+v", c)
	}
	if strings.Contains(strings.ToLower(string(body)), "<script") || !strings.Contains(page.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("the signed-in page: %s %v", body, page.Header)
	}
	return c
}

// firstState is the first "state" event of /view/events with hdr; status
// is the answer's when it is not a stream.
func firstState(t *testing.T, in *instance, hdr map[string]string) (status int, texts string) {
	t.Helper()
	res := viewDo(t, in, "GET", "/view/events", hdr, "")
	if res.StatusCode != 200 {
		return res.StatusCode, ""
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return 200, nextState(t, sc)
}

// nextState is the texts of a stream's next "state" event.
func nextState(t *testing.T, sc *bufio.Scanner) string {
	t.Helper()
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if e, ok := strings.CutPrefix(line, "event: "); ok {
			event = e
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && event == "state" {
			var m struct {
				Outline struct {
					Nodes []struct {
						Text string `json:"text"`
					} `json:"nodes"`
				} `json:"outline"`
			}
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, n := range m.Outline.Nodes {
				out = append(out, n.Text)
			}
			return strings.Join(out, "|")
		}
		if ok := strings.HasPrefix(line, "data: "); ok && event == "notice" {
			t.Fatalf("notice: %s", line)
		}
	}
	t.Fatalf("the stream ended: %v", sc.Err())
	return ""
}

func cookieHdr(c *http.Cookie) map[string]string {
	return map[string]string{"Cookie": c.Name + "=" + c.Value}
}

// TestHostedView: /view for hosted users behind their own sign-in. Each
// of two users sees only their own outline; no cookie, an expired one, a
// forged one, one sealed with another key, a link used as a cookie, a
// cookie beside another user's token, and a cookie whose user signed out
// are all 401; the Host must be the public one; Undo keeps the
// single-user rules (same Origin) and needs the write scope.
func TestHostedView(t *testing.T) {
	in, tokens := viewUsers(t)
	alice, bob := viewCookie(t, in, tokens["did:plc:alice"]), viewCookie(t, in, tokens["did:plc:bob"])
	for c, want := range map[*http.Cookie]string{alice: "Alice's plans 0|Alice's plans 1", bob: "Bob's plans 0|Bob's plans 1"} {
		st, texts := firstState(t, in, cookieHdr(c))
		if st != 200 || texts != want {
			t.Fatalf("own outline: %d %q, want %q", st, texts, want)
		}
	}
	// live: a write to Alice's outline reaches her open page, not Bob's
	live := viewDo(t, in, "GET", "/view/events", cookieHdr(alice), "")
	sc := bufio.NewScanner(live.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if first := nextState(t, sc); !strings.HasPrefix(first, "Alice's plans 0") {
		t.Fatalf("live page: %q", first)
	}
	ua, err := in.user(context.Background(), "did:plc:alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := insertTop(context.Background(), ua.env.Engine, bullets("Later", 1)); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(nextState(t, sc), "Later 0") {
	}
	if _, texts := firstState(t, in, cookieHdr(bob)); strings.Contains(texts, "Later") || strings.Contains(texts, "Alice") {
		t.Fatalf("bob sees alice's outline: %q", texts)
	}
	// the page itself, for a signed-in user; not for anyone else
	if res := viewDo(t, in, "GET", "/view", cookieHdr(alice), ""); res.StatusCode != 200 || !strings.Contains(res.Header.Get("Content-Security-Policy"), "script-src 'sha256-") {
		t.Fatalf("the page: %d %v", res.StatusCode, res.Header)
	}
	// the access token itself works too
	if st, texts := firstState(t, in, map[string]string{"Authorization": "Bearer " + tokens["did:plc:bob"]}); st != 200 || !strings.Contains(texts, "Bob's") {
		t.Fatalf("with the token: %d %q", st, texts)
	}

	raw, _ := base64.RawURLEncoding.DecodeString(alice.Value)
	raw[len(raw)-1] ^= 1
	other := testSealer(t)
	link := in.sealView(purposeViewLink, viewSeal{DID: "did:plc:alice", Scope: ScopeRead, Exp: time.Now().Add(time.Minute).Unix()})
	for name, hdr := range map[string]map[string]string{
		"no cookie":                       nil,
		"a wrong token":                   {"Authorization": "Bearer nope"},
		"an expired cookie":               {"Cookie": ViewCookie + "=" + in.sealView(purposeViewCookie, viewSeal{DID: "did:plc:alice", Scope: ScopeRead, Exp: time.Now().Add(-time.Second).Unix()})},
		"a forged cookie (one bit)":       {"Cookie": ViewCookie + "=" + base64.RawURLEncoding.EncodeToString(raw)},
		"a cookie of another key":         {"Cookie": ViewCookie + "=" + base64.RawURLEncoding.EncodeToString(other.Seal(purposeViewCookie, []byte(`{"did":"did:plc:alice","scope":"bulleted:read","exp":9999999999}`)))},
		"a link as the cookie":            {"Cookie": ViewCookie + "=" + link},
		"garbage":                         {"Cookie": ViewCookie + "=%%%"},
		"alice's cookie, bob's token":     {"Cookie": ViewCookie + "=" + alice.Value, "Authorization": "Bearer " + tokens["did:plc:bob"]},
		"bob's cookie, alice's token":     {"Cookie": ViewCookie + "=" + bob.Value, "Authorization": "Bearer " + tokens["did:plc:alice"]},
		"alice's cookie, a wrong token":   {"Cookie": ViewCookie + "=" + alice.Value, "Authorization": "Bearer nope"},
		"an expired link (as the cookie)": {"Cookie": ViewCookie + "=" + in.sealView(purposeViewLink, viewSeal{DID: "did:plc:alice", Exp: 1})},
	} {
		if st, texts := firstState(t, in, hdr); st != 401 {
			t.Errorf("%s: %d %q, want 401", name, st, texts)
		}
		if res := viewDo(t, in, "GET", "/view", hdr, ""); res.StatusCode != 401 {
			t.Errorf("%s: the page %d, want 401", name, res.StatusCode)
		}
	}
	// links: an expired one, a cookie used as a link
	for name, l := range map[string]string{"an expired link": in.sealView(purposeViewLink, viewSeal{DID: "did:plc:alice", Exp: time.Now().Add(-time.Second).Unix()}), "a cookie as the link": alice.Value} {
		res := viewDo(t, in, "GET", "/view?link="+l, nil, "")
		if res.StatusCode != 401 || len(res.Cookies()) != 0 {
			t.Errorf("%s: %d %v, want 401 and no cookie", name, res.StatusCode, res.Cookies())
		}
	}
	// DNS rebinding: another Host is refused before anything else
	if res := viewDo(t, in, "GET", "/view", map[string]string{"Cookie": ViewCookie + "=" + alice.Value, "Host": "evil.example"}, ""); res.StatusCode != 403 {
		t.Errorf("another Host: %d, want 403", res.StatusCode)
	}
	// Undo: the page's own Origin and JSON; the write scope
	own := map[string]string{"Cookie": ViewCookie + "=" + alice.Value, "Origin": in.public, "Content-Type": "application/json"}
	if res := viewDo(t, in, "POST", "/view/undo", map[string]string{"Cookie": own["Cookie"], "Origin": "https://evil.example", "Content-Type": "application/json"}, `{"operation":"x"}`); res.StatusCode != 403 {
		t.Errorf("undo from another origin: %d, want 403", res.StatusCode)
	}
	if res := viewDo(t, in, "POST", "/view/undo", map[string]string{"Cookie": ViewCookie + "=" + bob.Value, "Origin": in.public, "Content-Type": "application/json"}, `{"operation":"x"}`); res.StatusCode != 403 {
		t.Errorf("undo with the read scope only: %d, want 403", res.StatusCode)
	}
	if res := viewDo(t, in, "POST", "/view/undo", own, `{"operation":"x"}`); res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		t.Errorf("undo from the page: %d %s, want 200 (the tool's answer)", res.StatusCode, b)
	}
	// /view/session: POST with a token only
	if res := viewDo(t, in, "POST", "/view/session", cookieHdr(alice), ""); res.StatusCode != 401 {
		t.Errorf("/view/session with a cookie: %d, want 401", res.StatusCode)
	}
	if res := viewDo(t, in, "GET", "/view/session", map[string]string{"Authorization": "Bearer " + tokens["did:plc:alice"]}, ""); res.StatusCode != 405 {
		t.Errorf("GET /view/session: %d, want 405", res.StatusCode)
	}
	// signed out: the cookie stops working
	if _, err := in.db.Exec(context.Background(), `DELETE FROM atproto_sessions WHERE did = 'did:plc:alice'`); err != nil {
		t.Fatal(err)
	}
	if st, _ := firstState(t, in, cookieHdr(alice)); st != 401 {
		t.Errorf("signed out: %d, want 401", st)
	}
	if st, texts := firstState(t, in, cookieHdr(bob)); st != 200 || !strings.Contains(texts, "Bob's") {
		t.Errorf("bob after alice signed out: %d %q", st, texts)
	}
}

// TestHostedViewPDS: through the real sign-in at the reference PDS, two
// users each write a bullet with their MCP client and see only their own
// outline on /view, read from their repository; a second instance on the
// same database (behind the same public URL) honours the first's cookie.
func TestHostedViewPDS(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	in := e.start(t, nil)
	other := e.start(t, func(c *Config) { c.PublicURL = in.public })
	cid := registerClient(t, in)
	ctx := context.Background()
	cookies := map[string]*http.Cookie{}
	for _, name := range []string{"ana", "ben"} {
		a := newAccount(t, p, fmt.Sprintf("view%s%d", name, time.Now().UnixNano()%1e6))
		access, _ := signIn(t, in, cid, a, "")
		res, err := call(ctx, mcpClient(t, in, access), "insert_after", map[string]any{"text": "Only " + name + " sees this"})
		if err != nil || res.IsError {
			t.Fatalf("insert: %v %s", err, resultText(res))
		}
		cookies[name] = viewCookie(t, in, access)
	}
	for _, name := range []string{"ana", "ben"} {
		for _, x := range []*instance{in, other} {
			hdr := cookieHdr(cookies[name])
			hdr["Host"] = strings.TrimPrefix(in.public, "http://")
			st, texts := firstState(t, x, hdr)
			if st != 200 || texts != "Only "+name+" sees this" {
				t.Fatalf("%s's view: %d %q", name, st, texts)
			}
		}
	}
}
