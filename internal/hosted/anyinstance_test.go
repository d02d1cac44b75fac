package hosted

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// roundRobin is a balancer without affinity: each request goes to the next
// of ins in turn. It returns its URL and how many requests each instance got.
func roundRobin(t testing.TB, ins ...*instance) (string, []*atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	counts := make([]*atomic.Int64, len(ins))
	targets := make([]*url.URL, len(ins))
	for i, in := range ins {
		counts[i] = new(atomic.Int64)
		u, err := url.Parse(in.URL)
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = u
	}
	p := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		i := int(n.Add(1)-1) % len(ins)
		counts[i].Add(1)
		pr.SetURL(targets[i])
	}, Transport: testClient().Transport}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return srv.URL, counts
}

// legacyClient is an MCP client of base/mcp speaking protocol version
// version (one with sessions: Mcp-Session-Id), with a bearer token.
func legacyClient(t testing.TB, base, token, version string, caps mcp.ClientCapabilities) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}),
		transport.WithHTTPBasicClient(testClient()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "hosted-test", Version: "1"}
	init.Params.Capabilities = caps
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != version {
		t.Fatalf("negotiated %s, want %s", res.ProtocolVersion, version)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestSessionAnyInstance: a 2025-11-25 client (sessions, Mcp-Session-Id)
// behind a round-robin balancer over two instances: initialize on one,
// the initialized notification, tools/list and tools/call on the other,
// and so on, all served; what it wrote is read back from the PDS. Before,
// the session lived in the memory of the instance that started it: the
// other answered 404 "session terminated".
func TestSessionAnyInstance(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	a := e.start(t, nil)
	b := e.start(t, func(c *Config) { c.PublicURL = a.public })
	u := newAccount(t, p, fmt.Sprintf("rr%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, a, registerClient(t, a), u, "")
	base, counts := roundRobin(t, a, b)
	c := legacyClient(t, base, tok, mcp.ProtocolVersion20251125, mcp.ClientCapabilities{})
	ctx := context.Background()
	list, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(list.Tools) == 0 {
		t.Fatalf("tools/list: %v", err)
	}
	for i := range 3 {
		res, err := call(ctx, c, "insert_after", map[string]any{"text": fmt.Sprintf("through the balancer %d", i)})
		if err != nil || res.IsError {
			t.Fatalf("insert %d: %v %s", i, err, resultText(res))
		}
	}
	res, err := call(ctx, c, "read_outline", nil)
	if err != nil || res.IsError || !strings.Contains(resultText(res), "through the balancer 2") {
		t.Fatalf("read_outline: %v %.300s", err, resultText(res))
	}
	got := nodesOf(t, p, u)
	if len(got) != 3 {
		t.Fatalf("the PDS holds %v, want the 3 bullets written", got)
	}
	if counts[0].Load() < 3 || counts[1].Load() < 3 {
		t.Fatalf("requests by instance: %d, %d (the balancer did not spread them)", counts[0].Load(), counts[1].Load())
	}
	// a session is its user's: another user's token naming it is refused
	v := newAccount(t, p, fmt.Sprintf("rv%d", time.Now().UnixNano()%1e6))
	tokV, _ := signIn(t, b, registerClient(t, b), v, "")
	sid := c.GetSessionId()
	if sid == "" {
		t.Fatal("no session id")
	}
	req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+tokV)
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20251125)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := testClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another user's token with the session: %d, want 404", resp.StatusCode)
	}
}
