package hosted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/time/rate"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// ---- the user's browser ----

// authorizeInBrowser does what the user does: opens our authorization URL,
// allows the client on our consent page naming their identity, signs in
// and consents at the PDS, and follows the redirects back through our
// callback; it returns where the browser is sent at last (the MCP client's
// redirect URI with the code).
func authorizeInBrowser(ctx context.Context, authURL string, a *pdstest.Account) (*url.URL, error) {
	ours := map[string]string{}
	do := func(req *http.Request) (*http.Response, []byte, error) {
		for k, v := range ours {
			req.AddCookie(&http.Cookie{Name: k, Value: v})
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		for _, c := range resp.Cookies() {
			ours[c.Name] = c.Value
		}
		return resp, body, nil
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", authURL, nil)
	resp, body, err := do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("consent page: %d %s", resp.StatusCode, body)
	}
	au, _ := url.Parse(authURL)
	form := url.Values{"request": {hidden(string(body), "request")}, "csrf": {hidden(string(body), "csrf")}, "action": {"allow"}, "identifier": {a.DID.String()}}
	req, _ = http.NewRequestWithContext(ctx, "POST", au.Scheme+"://"+au.Host+"/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", au.Scheme+"://"+au.Host)
	resp, body, err = do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 303 {
		return nil, fmt.Errorf("consent: %d %s", resp.StatusCode, body)
	}
	cb, err := pdstest.ConsentAt(ctx, resp.Header.Get("Location"), a)
	if err != nil {
		return nil, err
	}
	req, _ = http.NewRequestWithContext(ctx, "GET", cb, nil)
	resp, body, err = do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 302 {
		return nil, fmt.Errorf("our callback: %d %s", resp.StatusCode, body)
	}
	return url.Parse(resp.Header.Get("Location"))
}

// signIn runs the whole authorization for account a through in (as an MCP
// client would, with a registered client) and returns the tokens.
func signIn(t testing.TB, in *instance, cid string, a *pdstest.Account, scope string) (access, refresh string) {
	t.Helper()
	ctx := context.Background()
	q := url.Values{"client_id": {cid}, "redirect_uri": {testRedirect}, "response_type": {"code"}, "state": {"s1"}, "scope": {scope},
		"code_challenge": {oauth.S256CodeChallenge(verifier)}, "code_challenge_method": {"S256"}, "resource": {in.resource}}
	var back *url.URL
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if back, err = authorizeInBrowser(ctx, in.public+"/authorize?"+q.Encode(), a); err == nil {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("state") != "s1" || back.Query().Get("iss") != in.public {
		t.Fatalf("redirect back %s", back)
	}
	st, out := exchange(t, in, cid, back.Query().Get("code"), verifier, testRedirect)
	if st != 200 {
		t.Fatalf("token: %d %v", st, out)
	}
	return out["access_token"].(string), out["refresh_token"].(string)
}

func newAccount(t testing.TB, p *pdstest.Server, name string) *pdstest.Account {
	t.Helper()
	a, err := p.CreateAccount(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// nodesOf reads a's app.bulleted.node texts straight from the PDS.
func nodesOf(t testing.TB, p *pdstest.Server, a *pdstest.Account) []string {
	t.Helper()
	ctx := context.Background()
	c, err := p.Client(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Records []struct {
			Value map[string]any `json:"value"`
		} `json:"records"`
	}
	if err := c.Get(ctx, "com.atproto.repo.listRecords", map[string]any{"repo": a.DID.String(), "collection": "app.bulleted.node", "limit": 100}, &out); err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, r := range out.Records {
		s, _ := r.Value["text"].(string)
		texts = append(texts, s)
	}
	sort.Strings(texts)
	return texts
}

// mcpClient is an MCP client of in's /mcp with a bearer token.
func mcpClient(t testing.TB, in *instance, token string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(in.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}),
		transport.WithHTTPBasicClient(testClient()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "hosted-test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func call(ctx context.Context, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func errorKind(r *mcp.CallToolResult) string {
	raw, _ := json.Marshal(r.StructuredContent)
	var v struct {
		Error struct {
			Kind string `json:"kind"`
		} `json:"error"`
	}
	json.Unmarshal(raw, &v)
	return v.Error.Kind
}

// TestFullFlow: a real MCP client (mcp-go's OAuth transport) adds the
// server by URL: 401 → metadata → registration → authorize (our consent,
// the PDS's sign-in and consent) → token → tools/call writes to the user's
// repository, read back from the PDS.
func TestFullFlow(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	in := e.start(t, nil)
	a := newAccount(t, p, fmt.Sprintf("flow%d", time.Now().UnixNano()%1e6))
	ctx := context.Background()

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	redirect := "http://" + ln.Addr().String() + "/callback"
	ln.Close()
	c, err := client.NewOAuthStreamableHttpClient(in.URL+"/mcp", client.OAuthConfig{
		RedirectURI: redirect, Scopes: []string{ScopeRead, ScopeWrite}, TokenStore: transport.NewMemoryTokenStore(), PKCEEnabled: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "flow-test", Version: "1"}
	_, err = c.Initialize(ctx, init)
	if !client.IsOAuthAuthorizationRequiredError(err) {
		t.Fatalf("want authorization required, got %v", err)
	}
	h := client.GetOAuthHandler(err)
	if err := h.RegisterClient(ctx, "Flow test client"); err != nil {
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
	if err := h.ProcessAuthorizationResponse(ctx, back.Query().Get("code"), back.Query().Get("state"), v); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	res, err := call(ctx, c, "insert_after", map[string]any{"text": "Written through the hosted server"})
	if err != nil || res.IsError {
		t.Fatalf("insert: %v %s", err, resultText(res))
	}
	if got := nodesOf(t, p, a); len(got) != 1 || got[0] != "Written through the hosted server" {
		t.Fatalf("the repository holds %q", got)
	}
	res, err = call(ctx, c, "read_outline", nil)
	if err != nil || res.IsError || !strings.Contains(resultText(res), "Written through the hosted server") {
		t.Fatalf("read: %v %s", err, resultText(res))
	}
	// the session is stored sealed: neither tokens nor the DPoP key in clear
	var sealed []byte
	in.db.QueryRow(ctx, "SELECT sealed FROM atproto_sessions WHERE did = $1", a.DID.String()).Scan(&sealed)
	row, _ := in.loadSession(ctx, in.db.QueryRow(ctx, "SELECT "+sessionColumns+" FROM atproto_sessions WHERE did = $1", a.DID.String()), a.DID.String())
	if row == nil || bytes.Contains(sealed, []byte(row.Data.RefreshToken)) || bytes.Contains(sealed, []byte(row.Data.DPoPPrivateKeyMultibase)) {
		t.Fatal("the session is not sealed")
	}
	t.Logf("granted upstream scopes %q", row.Data.Scopes)
}

// TestTwoInstances: two instances on one database behind one public URL.
func TestTwoInstances(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	const limit = 45
	a := e.start(t, func(c *Config) { c.HourLimit = limit })
	b := e.start(t, func(c *Config) { c.HourLimit = limit; c.PublicURL = a.public })
	cid := registerClient(t, a)
	ctx := context.Background()
	u1 := newAccount(t, p, fmt.Sprintf("one%d", time.Now().UnixNano()%1e6))
	u2 := newAccount(t, p, fmt.Sprintf("two%d", time.Now().UnixNano()%1e6))
	tok1, _ := signIn(t, a, cid, u1, "")
	tok2, _ := signIn(t, a, cid, u2, "")
	c1a, c1b := mcpClient(t, a, tok1), mcpClient(t, b, tok1)
	c2a, c2b := mcpClient(t, a, tok2), mcpClient(t, b, tok2)

	t.Run("undo across instances", func(t *testing.T) {
		for i, c := range []*client.Client{c1a, c1b} {
			if res, err := call(ctx, c, "insert_after", map[string]any{"text": fmt.Sprintf("kept %d", i)}); err != nil || res.IsError {
				t.Fatalf("insert: %v %s", err, resultText(res))
			}
		}
		if res, err := call(ctx, c1a, "insert_after", map[string]any{"text": "undo me"}); err != nil || res.IsError {
			t.Fatalf("insert: %v %s", err, resultText(res))
		}
		res, err := call(ctx, c1b, "undo", map[string]any{})
		if err != nil || res.IsError {
			t.Fatalf("undo on the other instance: %v %s", err, resultText(res))
		}
		if got := nodesOf(t, p, u1); strings.Join(got, "|") != "kept 0|kept 1" {
			t.Fatalf("after undo: %q", got)
		}
	})
	t.Run("users isolated", func(t *testing.T) {
		if res, err := call(ctx, c2b, "insert_after", map[string]any{"text": "second user's"}); err != nil || res.IsError {
			t.Fatalf("insert: %v %s", err, resultText(res))
		}
		res, _ := call(ctx, c2a, "read_outline", nil)
		if txt := resultText(res); strings.Contains(txt, "kept") || !strings.Contains(txt, "second user's") {
			t.Fatalf("user 2 reads %s", txt)
		}
		res, _ = call(ctx, c1a, "read_outline", nil)
		if txt := resultText(res); strings.Contains(txt, "second user's") {
			t.Fatalf("user 1 reads %s", txt)
		}
		res, _ = call(ctx, c2a, "operations", nil)
		if txt := resultText(res); strings.Contains(txt, "undo me") {
			t.Fatalf("user 2 sees user 1's operations: %s", txt)
		}
	})
	t.Run("concurrent refresh keeps the session", func(t *testing.T) {
		ua, _ := a.user(ctx, u1.DID.String())
		ub, _ := b.user(ctx, u1.DID.String())
		before := Refreshes.Load()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, u := range []*user{ua, ub} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = u.auth.refresh(ctx, "", true)
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		t.Logf("refresh requests sent: %d (the other instance took the stored tokens)", Refreshes.Load()-before)
		for _, c := range []*client.Client{c1a, c1b} {
			if res, err := call(ctx, c, "read_outline", nil); err != nil || res.IsError {
				t.Fatalf("after the refreshes: %v %s", err, resultText(res))
			}
		}
		// and once more from the other side: still one session
		if err := ub.auth.refresh(ctx, "", true); err != nil {
			t.Fatal(err)
		}
		if res, err := call(ctx, c1a, "read_outline", nil); err != nil || res.IsError {
			t.Fatalf("after a refresh on the other instance: %v %s", err, resultText(res))
		}
	})
	t.Run("budget never exceeded", func(t *testing.T) {
		ok, refused := 0, 0
		for i := range 20 {
			c := c2a
			if i%2 == 1 {
				c = c2b
			}
			res, err := call(ctx, c, "insert_after", map[string]any{"text": fmt.Sprintf("b%d", i)})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !res.IsError:
				ok++
			case errorKind(res) == "budget":
				refused++
			default:
				t.Fatalf("call %d: %s", i, resultText(res))
			}
		}
		spent, _ := a.ledger.Spent(ctx, u2.DID.String(), time.Hour)
		created := len(nodesOf(t, p, u2))
		t.Logf("budget %d: %d inserts landed, %d refused, %d points spent, %d bullets", limit, ok, refused, spent, created)
		if spent > limit || created*3 > limit || refused == 0 {
			t.Fatalf("spent %d of %d, %d bullets, %d refused", spent, limit, created, refused)
		}
	})
	t.Run("dry runs read the shared budget", func(t *testing.T) {
		spent, err := b.ledger.Spent(ctx, u2.DID.String(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		res, err := call(ctx, c2b, "insert_after", map[string]any{"text": "would not fit", "dry_run": true})
		if err != nil || res.IsError {
			t.Fatalf("dry run: %v %s", err, resultText(res))
		}
		txt := resultText(res)
		left := limit - spent
		if !strings.Contains(txt, fmt.Sprintf("(%d left this hour)", left)) {
			t.Errorf("the dry run does not say %d points are left of the shared budget: %.600s", left, txt)
		}
		if left < 3 && !strings.Contains(txt, fmt.Sprintf("%d of %d are left", left, limit)) {
			t.Errorf("the dry run does not say the insert would be refused: %.600s", txt)
		}
		if got := len(nodesOf(t, p, u2)); got*3 != spent {
			t.Errorf("%d bullets after a dry run, %d points spent", got, spent)
		}
	})
}

// TestLoad: 50 users × 20 calls across two instances, half writes, half
// reads, with p50/p99 and errors (any error fails it). About a minute on two
// cores (signing 50 users in at the reference PDS is a third of it); under
// -short 6 × 6.
func TestLoad(t *testing.T) {
	users, calls := 50, 20
	if testing.Short() {
		users, calls = 6, 6
	}
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	// every user signs in from this one address: no per-address limits
	off := Limits{Authorize: RateLimit{Rate: rate.Inf}, Token: RateLimit{Rate: rate.Inf}}
	a := e.start(t, func(c *Config) { c.Limits = off })
	b := e.start(t, func(c *Config) { c.PublicURL = a.public; c.Limits = off })
	cid := registerClient(t, a)
	type u struct {
		acct   *pdstest.Account
		ca, cb *client.Client
	}
	us := make([]*u, users)
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 6)
	var mu sync.Mutex
	for i := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			acct := newAccount(t, p, fmt.Sprintf("load%d-%d", time.Now().UnixNano()%1e6, i))
			tok, _ := signIn(t, a, cid, acct, "")
			x := &u{acct: acct, ca: mcpClient(t, a, tok), cb: mcpClient(t, b, tok)}
			mu.Lock()
			us[i] = x
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("%d accounts signed in in %v", users, time.Since(start))
	var lat []time.Duration
	errs := 0
	var firstErr string
	start = time.Now()
	for _, x := range us {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range calls {
				c := x.ca
				if j%2 == 1 {
					c = x.cb
				}
				name, args := "read_outline", map[string]any{}
				if j%4 < 2 {
					name, args = "insert_after", map[string]any{"text": fmt.Sprintf("load %d", j)}
				}
				t0 := time.Now()
				res, err := call(context.Background(), c, name, args)
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				if err != nil || res.IsError {
					errs++
					if firstErr == "" {
						if err != nil {
							firstErr = err.Error()
						} else {
							firstErr = resultText(res)
						}
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	t.Logf("load: %d users × %d calls over two instances in %v: p50 %v, p99 %v, max %v, errors %d", users, calls, wall, p50, p99, lat[len(lat)-1], errs)
	if errs > 0 {
		t.Fatalf("%d errors; first: %s", errs, firstErr)
	}
	// every write landed in its user's repository
	writes := 0
	for j := range calls {
		if j%4 < 2 {
			writes++
		}
	}
	for _, x := range us[:3] {
		if got := len(nodesOf(t, p, x.acct)); got != writes {
			t.Fatalf("%s holds %d bullets, want %d", x.acct.Handle, got, writes)
		}
	}
}
