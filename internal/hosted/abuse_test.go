package hosted

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"golang.org/x/time/rate"
)

// trickle sends path's request headers announcing a body of n bytes, then
// one byte of it every 50 ms, and returns the status line the server
// answers with ("" when it closed the connection without one) and how long
// after the headers that came, or ok=false when the server neither answered
// nor closed within limit.
func trickle(t *testing.T, in *instance, path, contentType string, extra http.Header, limit time.Duration) (status string, after time.Duration, ok bool) {
	t.Helper()
	u, _ := url.Parse(in.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 10_000 // 500 s at one byte every 50 ms
	var hdr strings.Builder
	fmt.Fprintf(&hdr, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n", path, u.Host, contentType, n)
	for k, vs := range extra {
		for _, v := range vs {
			fmt.Fprintf(&hdr, "%s: %s\r\n", k, v)
		}
	}
	hdr.WriteString("\r\n")
	if _, err := io.WriteString(conn, hdr.String()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	answered := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		answered <- strings.TrimSpace(line)
	}()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(limit)
	for i := 0; ; i++ {
		select {
		case line := <-answered:
			return line, time.Since(start), true
		case <-giveUp:
			return "", time.Since(start), false
		case <-tick.C:
			if i < n-1 {
				conn.Write([]byte{'x'}) // an error: the server closed it; the reader says so
			}
		}
	}
}

// TestSlowBodiesCut: a body trickled to /register, /token or /mcp is cut
// (408, connection closed) at the configured read deadline, not read for as
// long as the client keeps sending (before: read until the client stopped,
// 60 s and more).
func TestSlowBodiesCut(t *testing.T) {
	const deadline = 400 * time.Millisecond
	limit := 10 * deadline // far below the 500 s the trickle would last
	e := newEnv(t)
	in := e.start(t, func(c *Config) { c.BodyTimeout, c.MCPBodyTimeout = deadline, deadline })
	cid := registerClient(t, in)
	code := seedGrant(t, in, cid, "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", verifier, ScopeRead)
	st, out := exchange(t, in, cid, code, verifier, testRedirect)
	if st != 200 {
		t.Fatalf("token: %d %v", st, out)
	}
	bearer := http.Header{"Authorization": {"Bearer " + out["access_token"].(string)}, "Accept": {"application/json, text/event-stream"}}
	for _, c := range []struct {
		path, ctype string
		hdr         http.Header
	}{
		{"/register", "application/json", nil},
		{"/token", "application/x-www-form-urlencoded", nil},
		{"/authorize", "application/x-www-form-urlencoded", nil},
		{"/mcp", "application/json", bearer},
	} {
		status, after, ok := trickle(t, in, c.path, c.ctype, c.hdr, limit)
		if !ok {
			t.Errorf("%s: a body trickled for %v is still being read (deadline %v)", c.path, after, deadline)
			continue
		}
		t.Logf("%s: %q after %v (deadline %v)", c.path, status, after, deadline)
		if status != "" && !strings.Contains(status, " 408 ") {
			t.Errorf("%s: answered %q, want 408", c.path, status)
		}
	}
	// a body sent at once is still served, on the same server
	if st, out := postJSON(t, in.URL+"/register", map[string]any{"redirect_uris": []string{testRedirect}, "token_endpoint_auth_method": "none"}); st != 201 {
		t.Fatalf("a prompt registration: %d %v", st, out)
	}
	// and a body over the limit is refused with 413
	big := bytes.Repeat([]byte("x"), formLimit+1)
	resp, err := http.Post(in.URL+"/register", "application/json", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("an oversized registration: %d", resp.StatusCode)
	}
}

// clientFrom is an HTTP client whose connections come from the loopback
// address local (127.0.0.2 is another client than 127.0.0.1).
func clientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func send(t *testing.T, c *http.Client, method, u, ctype, body string, hdr http.Header) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func countRows(t *testing.T, in *instance, table string) int {
	t.Helper()
	var n int
	if err := in.db.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRateLimits: a flood of registrations or consent pages from one
// address gets 429 with Retry-After after the burst, and nothing more is
// stored; another address is unaffected; X-Forwarded-For counts only from
// a trusted proxy (before: 10,000 registrations in 10 s all accepted).
func TestRateLimits(t *testing.T) {
	const burst, flood = 5, 20
	slow := RateLimit{Rate: rate.Every(time.Hour), Burst: burst}
	e := newEnv(t)
	in := e.start(t, func(c *Config) { c.Limits = Limits{Register: slow, Authorize: slow, Token: slow} })
	a, b := clientFrom("127.0.0.1"), clientFrom("127.0.0.2")
	reg := `{"client_name":"flood","redirect_uris":["` + testRedirect + `"],"token_endpoint_auth_method":"none"}`

	flooded := func(name string, do func(c *http.Client, hdr http.Header) *http.Response, c *http.Client, hdr http.Header, okStatus int) {
		t.Helper()
		accepted, refused := 0, 0
		for i := 0; i < flood; i++ {
			resp := do(c, hdr)
			switch resp.StatusCode {
			case okStatus:
				accepted++
				if refused > 0 {
					t.Fatalf("%s: request %d accepted after a refusal", name, i)
				}
			case http.StatusTooManyRequests:
				refused++
				ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
				if err != nil || ra < 1 {
					t.Fatalf("%s: 429 with Retry-After %q", name, resp.Header.Get("Retry-After"))
				}
			default:
				t.Fatalf("%s: request %d: HTTP %d", name, i, resp.StatusCode)
			}
		}
		t.Logf("%s: %d of %d accepted, %d refused with 429", name, accepted, flood, refused)
		if accepted != burst {
			t.Fatalf("%s: %d of %d accepted, want the burst (%d)", name, accepted, flood, burst)
		}
	}
	register := func(c *http.Client, hdr http.Header) *http.Response {
		return send(t, c, "POST", in.URL+"/register", "application/json", reg, hdr)
	}
	flooded("register from 127.0.0.1", register, a, nil, 201)
	if n := countRows(t, in, "oauth_clients"); n != burst {
		t.Fatalf("%d clients stored after the flood, want %d", n, burst)
	}
	// the refusal is machine-readable
	req, _ := http.NewRequest("POST", in.URL+"/register", strings.NewReader(reg))
	resp, err := a.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var oe map[string]any
	json.NewDecoder(resp.Body).Decode(&oe)
	resp.Body.Close()
	if resp.StatusCode != 429 || oe["error"] != "rate_limited" || !strings.Contains(fmt.Sprint(oe["error_description"]), "retry after") {
		t.Fatalf("refusal: %d %v", resp.StatusCode, oe)
	}
	// another address is unaffected
	if resp := register(b, nil); resp.StatusCode != 201 {
		t.Fatalf("register from 127.0.0.2 after 127.0.0.1's flood: %d", resp.StatusCode)
	}
	// X-Forwarded-For from an untrusted peer is ignored
	if resp := register(a, http.Header{"X-Forwarded-For": {"203.0.113.9"}}); resp.StatusCode != 429 {
		t.Fatalf("a spoofed X-Forwarded-For escaped the limit: %d", resp.StatusCode)
	}

	// the consent page
	cid := registerClientFrom(t, b, in)
	q := url.Values{"client_id": {cid}, "redirect_uri": {testRedirect}, "response_type": {"code"}, "state": {"st"},
		"code_challenge": {oauth.S256CodeChallenge(verifier)}, "code_challenge_method": {"S256"}, "resource": {in.resource}}
	consent := func(c *http.Client, hdr http.Header) *http.Response {
		return send(t, c, "GET", in.URL+"/authorize?"+q.Encode(), "", "", hdr)
	}
	flooded("consent page from 127.0.0.1", consent, a, nil, 200)
	if n := countRows(t, in, "auth_requests"); n != burst {
		t.Fatalf("%d authorization requests stored after the flood, want %d", n, burst)
	}
	if resp := consent(b, nil); resp.StatusCode != 200 {
		t.Fatalf("consent page from 127.0.0.2 after 127.0.0.1's flood: %d", resp.StatusCode)
	}
	// the form posted from the flooding address is refused too
	if resp := send(t, a, "POST", in.URL+"/authorize", "application/x-www-form-urlencoded", "request=x", nil); resp.StatusCode != 429 {
		t.Fatalf("consent form from the flooding address: %d", resp.StatusCode)
	}

	// an access token exchanged for a /view sign-in link (a row each), as
	// /token (failed before: every one answered)
	viewSession := func(c *http.Client, hdr http.Header) *http.Response {
		return send(t, c, "POST", in.URL+"/view/session", "", "", http.Header{"Authorization": {"Bearer not-a-token"}})
	}
	flooded("view sign-in links from 127.0.0.1", viewSession, a, nil, http.StatusUnauthorized)
	if resp := viewSession(b, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("view sign-in link from 127.0.0.2 after 127.0.0.1's flood: %d", resp.StatusCode)
	}

	// behind a trusted proxy, the forwarded address counts
	p := e.start(t, func(c *Config) {
		c.Limits = Limits{Register: slow}
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	xff := func(addr string) http.Header { return http.Header{"X-Forwarded-For": {"198.51.100.7, " + addr}} }
	flood2 := func(c *http.Client, hdr http.Header) *http.Response {
		return send(t, c, "POST", p.URL+"/register", "application/json", reg, hdr)
	}
	flooded("register via the proxy for 203.0.113.1", flood2, a, xff("203.0.113.1"), 201)
	if resp := flood2(a, xff("203.0.113.2")); resp.StatusCode != 201 {
		t.Fatalf("another client behind the proxy: %d", resp.StatusCode)
	}
	// an untrusted peer's header is still ignored on this instance
	if resp := flood2(b, xff("203.0.113.1")); resp.StatusCode != 201 {
		t.Fatalf("127.0.0.2 (not a proxy) counted as the forwarded address: %d", resp.StatusCode)
	}
}

func registerClientFrom(t *testing.T, c *http.Client, in *instance) string {
	t.Helper()
	req, _ := http.NewRequest("POST", in.URL+"/register", strings.NewReader(`{"client_name":"test client","redirect_uris":["`+testRedirect+`"],"token_endpoint_auth_method":"none"}`))
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != 201 {
		t.Fatalf("register: %d %v", resp.StatusCode, out)
	}
	return out["client_id"].(string)
}

// TestLimiterBounded: the per-address buckets stay within MaxAddresses
// however many addresses come, idle ones going first.
func TestLimiterBounded(t *testing.T) {
	a := newAddrLimiter("/register", RateLimit{Rate: 1, Burst: 2}, 100)
	now := time.Now()
	for i := 0; i < 1000; i++ {
		a.allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now)
		if n := a.size(); n > 100 {
			t.Fatalf("%d addresses tracked, max 100", n)
		}
	}
	// full of idle addresses: they go, and an active one keeps its
	// (spent) bucket rather than getting a fresh burst
	a = newAddrLimiter("/register", RateLimit{Rate: 1, Burst: 2}, 100)
	for i := 0; i < 100; i++ {
		a.allow(fmt.Sprintf("10.0.%d.%d", i/256, i%256), now)
	}
	later := now.Add(10 * time.Second) // the others have refilled
	for i := 0; i < 2; i++ {
		if ok, _ := a.allow("192.0.2.1", later); !ok {
			t.Fatalf("192.0.2.1's burst refused at %d", i)
		}
	}
	if n := a.size(); n != 1 {
		t.Fatalf("%d addresses tracked after the idle ones were evicted, want 1", n)
	}
	for i := 0; i < 50; i++ {
		a.allow(fmt.Sprintf("10.1.%d.%d", i/256, i%256), later)
	}
	if ok, wait := a.allow("192.0.2.1", later); ok || wait <= 0 {
		t.Fatalf("192.0.2.1 over its burst: allowed %v, wait %v", ok, wait)
	}
}

// TestPrune: expired authorization requests, codes (an hour past expiry)
// and tokens are deleted in batches, by two instances at once; live ones
// stay (before: 10,016 expired requests still stored 19 minutes later).
func TestPrune(t *testing.T) {
	e := newEnv(t)
	a, b := e.start(t, nil), e.start(t, nil)
	cid := registerClient(t, a)
	ctx := context.Background()
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := a.db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	const expiredReqs = 2*pruneBatch + 500 // more than one batch
	exec(`INSERT INTO auth_requests (id, client_id, redirect_uri, code_challenge, scope, resource, csrf_hash, expires_at)
		SELECT 'ar-old-' || i, $1, $2, 'c', 's', 'r', '\x00', now() - interval '1 second' FROM generate_series(1, $3) i`, cid, testRedirect, expiredReqs)
	exec(`INSERT INTO auth_requests (id, client_id, redirect_uri, code_challenge, scope, resource, csrf_hash, expires_at)
		SELECT 'ar-live-' || i, $1, $2, 'c', 's', 'r', '\x00', now() + interval '10 minutes' FROM generate_series(1, 3) i`, cid, testRedirect)
	for i, age := range []string{"2 hours", "61 minutes", "59 minutes", "-1 minute"} { // two prunable, one kept for replay detection, one live
		exec(`INSERT INTO auth_codes (code_hash, client_id, redirect_uri, code_challenge, scope, resource, did, expires_at)
			VALUES ($1, $2, $3, 'c', 's', 'r', 'did:plc:x', now() - $4::interval)`, []byte{byte(i)}, cid, testRedirect, age)
	}
	for i, age := range []string{"1 second", "30 days", "-1 hour", "-30 days"} { // two expired, two live
		exec(`INSERT INTO tokens (hash, kind, client_id, did, scope, resource, family, expires_at)
			VALUES ($1, 'access', $2, 'did:plc:x', 's', 'r', 'f', now() - $3::interval)`, []byte{byte(i)}, cid, age)
	}
	var wg sync.WaitGroup
	stats := make([]PruneStats, 2)
	errs := make([]error, 2)
	for i, in := range []*instance{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stats[i], errs[i] = in.Prune(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("pruned by a: %+v, by b: %+v", stats[0], stats[1])
	if got := stats[0].Requests + stats[1].Requests; got != expiredReqs {
		t.Errorf("%d requests reported pruned, want %d", got, expiredReqs)
	}
	// the database as read back
	if n := countRows(t, a, "auth_requests"); n != 3 {
		t.Errorf("%d authorization requests left, want the 3 live ones", n)
	}
	if n := countRows(t, a, "auth_codes"); n != 2 {
		t.Errorf("%d codes left, want 2 (one live, one expired under an hour ago)", n)
	}
	if n := countRows(t, a, "tokens"); n != 2 {
		t.Errorf("%d tokens left, want the 2 live ones", n)
	}
	// nothing left to do
	if st, err := a.Prune(ctx); err != nil || st != (PruneStats{}) {
		t.Fatalf("second pass: %+v %v", st, err)
	}
}

// TestRedirectURIs: registration admits https, loopback http and
// reverse-domain private-use schemes, at most 10; every other scheme is
// refused with invalid_redirect_uri and nothing is stored (before: blob:,
// about:blank, filesystem:, ms-settings: and 2,000 redirect URIs accepted).
func TestRedirectURIs(t *testing.T) {
	in := newEnv(t).start(t, func(c *Config) { c.Limits.Register = RateLimit{Rate: rate.Inf} })
	reg := func(uris ...string) (int, map[string]any) {
		return postJSON(t, in.URL+"/register", map[string]any{"redirect_uris": uris, "token_endpoint_auth_method": "none"})
	}
	bad := []string{
		"blob:https://app.example/0b6a-11", "about:blank", "filesystem:https://app.example/temporary/cb", "ms-settings:privacy",
		"javascript:alert(1)", "data:text/html,hi", "file:///etc/passwd", "vbscript:x", "myapp:/cb", "chrome-extension://abc/cb",
		"http://app.example/cb", "http://10.0.0.1/cb", "https:///cb", "https://app.example/cb#frag",
	}
	for _, u := range bad {
		if st, out := reg(u); st != 400 || out["error"] != "invalid_redirect_uri" {
			t.Errorf("%s: %d %v, want 400 invalid_redirect_uri", u, st, out)
		}
	}
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = fmt.Sprintf("https://app.example/cb%d", i)
	}
	if st, out := reg(eleven...); st != 400 || out["error"] != "invalid_redirect_uri" {
		t.Errorf("11 redirect URIs: %d %v", st, out)
	}
	if n := countRows(t, in, "oauth_clients"); n != 0 {
		t.Fatalf("%d clients stored from refused registrations", n)
	}
	good := []string{"https://app.example/cb", "http://127.0.0.1:8123/cb", "http://[::1]:9/cb", "http://localhost/cb", "com.example.app:/oauth2redirect", "com.example.app://callback"}
	for _, u := range good {
		if st, out := reg(u); st != 201 {
			t.Errorf("%s: %d %v, want 201", u, st, out)
		}
	}
	if st, out := reg(eleven[:10]...); st != 201 {
		t.Errorf("10 redirect URIs: %d %v", st, out)
	}
	if n := countRows(t, in, "oauth_clients"); n != len(good)+1 {
		t.Fatalf("%d clients stored, want %d", n, len(good)+1)
	}
}

// TestMCPStreamNotCut: the body deadline bounds reading, not the response:
// a GET /mcp listening stream (SSE) outlives it, and a POST whose body was
// read in time is answered after it.
func TestMCPStreamNotCut(t *testing.T) {
	const deadline = 300 * time.Millisecond
	in := newEnv(t).start(t, func(c *Config) { c.BodyTimeout, c.MCPBodyTimeout = deadline, deadline })
	cid := registerClient(t, in)
	code := seedGrant(t, in, cid, "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", verifier, ScopeRead)
	st, out := exchange(t, in, cid, code, verifier, testRedirect)
	if st != 200 {
		t.Fatalf("token: %d %v", st, out)
	}
	tok := out["access_token"].(string)
	// the listening stream belongs to a session (a GET without one is 400)
	st, hdr := mcpStatus(t, in, tok, "")
	sid := hdr.Get("Mcp-Session-Id")
	if st != 200 || sid == "" {
		t.Fatalf("initialize: %d, session %q", st, sid)
	}
	req, _ := http.NewRequest("GET", in.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /mcp: %d", resp.StatusCode)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	// the stream lives past the deadline several times, and a POST with its
	// body at once is answered each time
	for i := 0; i < 4; i++ {
		time.Sleep(deadline)
		select {
		case err := <-ended:
			t.Fatalf("the SSE stream ended after %v (body deadline %v): %v", time.Duration(i+1)*deadline, deadline, err)
		default:
		}
		if st, _ := mcpStatus(t, in, tok, ""); st != 200 {
			t.Fatalf("POST /mcp: %d", st)
		}
	}
}

// TestLimitsSet: serve's --rate-limit form.
func TestLimitsSet(t *testing.T) {
	var l Limits
	if got, want := l.String(), "register=1/s:30,authorize=0.5/s:30,token=5/s:60"; got != want {
		t.Fatalf("defaults: %s, want %s", got, want)
	}
	if err := l.Set("token=20/s:200,register=60/m"); err != nil {
		t.Fatal(err)
	}
	if err := l.Set("authorize=off"); err != nil {
		t.Fatal(err)
	}
	if got, want := l.String(), "register=1/s:60,authorize=off,token=20/s:200"; got != want {
		t.Fatalf("%s, want %s", got, want)
	}
	for _, bad := range []string{"token", "tokens=1/s", "token=1", "token=0/s", "token=-1/s", "token=1/d", "token=1/s:0", "token=1/s:x", "token=NaN/s", "token=Inf/s"} {
		if err := (&Limits{}).Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestRunPruner: the periodic pruner prunes on its own, says what it
// deleted, and stops with its context.
func TestRunPruner(t *testing.T) {
	in := newEnv(t).start(t, nil)
	cid := registerClient(t, in)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := in.db.Exec(ctx, `INSERT INTO auth_requests (id, client_id, redirect_uri, code_challenge, scope, resource, csrf_hash, expires_at)
		SELECT 'ar-old-' || i, $1, $2, 'c', 's', 'r', '\x00', now() - interval '1 second' FROM generate_series(1, 7) i`, cid, testRedirect); err != nil {
		t.Fatal(err)
	}
	logs := make(chan string, 100)
	stopped := make(chan struct{})
	go func() {
		in.RunPruner(ctx, 20*time.Millisecond, func(f string, a ...any) { logs <- fmt.Sprintf(f, a...) })
		close(stopped)
	}()
	// wait for what is expected: on a busy machine a round may time out
	// first, which the pruner says and retries
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case msg := <-logs:
			switch {
			case strings.Contains(msg, "pruned 7 expired authorization requests"):
				done = true
			case strings.Contains(msg, "failed (retried in"):
				t.Logf("a round failed and is retried: %s", msg)
			default:
				t.Fatalf("pruner said %q", msg)
			}
		case <-deadline:
			t.Fatal("the pruner pruned nothing in 60 s")
		}
	}
	if n := countRows(t, in, "auth_requests"); n != 0 {
		t.Fatalf("%d expired requests left", n)
	}
	cancel()
	<-stopped
}

// TestMigrationList: two migration files with one version number (two
// branches each adding the next migration) are refused rather than one of
// them skipped as already applied; the embedded ones are in order.
func TestMigrationList(t *testing.T) {
	dup := fstest.MapFS{"migrations/001_init.sql": {}, "migrations/002_a.sql": {}, "migrations/002_b.sql": {}}
	if _, err := migrationList(dup); err == nil || !strings.Contains(err.Error(), "same version number") {
		t.Fatalf("duplicate versions: %v", err)
	}
	list, err := migrationList(migrations)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range list {
		if m.version != i+1 {
			t.Fatalf("embedded migration %d is %s", i+1, m.base)
		}
	}
}

// TestClientAddr: the address a request counts against.
func TestClientAddr(t *testing.T) {
	plain := &Server{}
	proxied := &Server{cfg: Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}}
	for _, c := range []struct {
		s         *Server
		remote    string
		xff, want string
	}{
		{plain, "192.0.2.1:5555", "", "192.0.2.1"},
		{plain, "[::ffff:192.0.2.1]:5555", "", "192.0.2.1"},
		{plain, "[2001:db8:1:2:3::4]:5555", "", "2001:db8:1:2::/64"},
		{plain, "[2001:db8:1:2:ffff::9]:1", "", "2001:db8:1:2::/64"}, // one subscriber's /64
		{plain, "[2001:db8:1:3::1]:1", "", "2001:db8:1:3::/64"},
		{plain, "192.0.2.1:5555", "203.0.113.5", "192.0.2.1"}, // not a trusted proxy: the header is ignored
		{proxied, "10.0.0.1:5555", "203.0.113.5", "203.0.113.5"},
		{proxied, "10.0.0.1:5555", "198.51.100.1, 203.0.113.5, 10.0.0.2", "203.0.113.5"}, // the nearest untrusted hop
		{proxied, "10.0.0.1:5555", "", "10.0.0.1"},
		{proxied, "192.0.2.1:5555", "203.0.113.5", "192.0.2.1"},
	} {
		r := httptest.NewRequest("GET", "/authorize", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := c.s.clientAddr(r); got != c.want {
			t.Errorf("%s with X-Forwarded-For %q: %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}

// TestFormsFromAnotherOrigin: the consent form and the /view sign-in form
// posted from another origin are refused (403, a page saying why) before
// their fields are read.
func TestFormsFromAnotherOrigin(t *testing.T) {
	in := newEnv(t).start(t, nil)
	c := clientFrom("127.0.0.1")
	for _, path := range []string{"/authorize", "/view/signin"} {
		req, _ := http.NewRequest("POST", in.URL+path, strings.NewReader("request=x&csrf=y"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "cross-origin form submission refused") {
			t.Errorf("POST %s from another origin: %d %.200s, want 403 saying why", path, resp.StatusCode, body)
		}
	}
}
