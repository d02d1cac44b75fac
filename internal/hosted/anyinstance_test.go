package hosted

import (
	"context"
	"errors"
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

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
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
func legacyClient(t testing.TB, base, token, version string, caps mcp.ClientCapabilities, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}),
		transport.WithHTTPBasicClient(testClient()))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
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
	// (bounded: a request lost between instances must fail the test, not hang it)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
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

// accepter answers every elicitation with accept (a person who agrees).
type accepter struct{}

func (accepter) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// askingClient is a 2026-07-28 client of in that can ask its person
// (elicitation) and leaves the input round trips to the caller.
func askingClient(t testing.TB, in *instance, token string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(in.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}),
		transport.WithHTTPBasicClient(testClient()))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithElicitationHandler(accepter{}), client.WithManualInputRoundTrips())
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "hosted-test", Version: "1"}
	init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

func count(texts []string, s string) int {
	n := 0
	for _, x := range texts {
		if x == s {
			n++
		}
	}
	return n
}

// TestPlanAnyInstance: a dry run's plan made on instance A is applied on
// B, exactly once (applying it again, on A or B, is refused and writes
// nothing); another user cannot apply a plan (and does not use it up); a
// big delete held for the person's confirmation on A (2026-07-28: input
// required, the plan id as the request state) is accepted on B and
// applied. Read back from the PDS. Before, plans lived in the memory of
// the instance that made them: B refused them as "not known here".
func TestPlanAnyInstance(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	rules := tools.DefaultConfirm
	a := e.start(t, func(c *Config) { c.Confirm = &rules })
	b := e.start(t, func(c *Config) { c.Confirm = &rules; c.PublicURL = a.public })
	u := newAccount(t, p, fmt.Sprintf("pa%d", time.Now().UnixNano()%1e6))
	v := newAccount(t, p, fmt.Sprintf("pv%d", time.Now().UnixNano()%1e6))
	tokU, _ := signIn(t, a, registerClient(t, a), u, "")
	tokV, _ := signIn(t, b, registerClient(t, b), v, "")
	ca, cb, cv := askingClient(t, a, tokU), askingClient(t, b, tokU), askingClient(t, b, tokV)
	ctx := context.Background()
	planOf := func(res *mcp.CallToolResult, err error) string {
		t.Helper()
		if err != nil || res.IsError {
			t.Fatalf("dry run: %v %s", err, resultText(res))
		}
		sc, _ := res.StructuredContent.(map[string]any)
		id, _ := sc["plan"].(string)
		if id == "" {
			t.Fatalf("dry run without a plan id: %.300s", resultText(res))
		}
		return id
	}

	// made on A, applied on B once
	one := map[string]any{"text": "planned on A"}
	id := planOf(call(ctx, ca, "insert_after", map[string]any{"text": "planned on A", "dry_run": true}))
	one["plan"] = id
	if res, err := call(ctx, cb, "insert_after", one); err != nil || res.IsError {
		t.Fatalf("plan %s applied on B: %v %s", id, err, resultText(res))
	}
	for _, c := range []*client.Client{ca, cb} {
		if res, err := call(ctx, c, "insert_after", one); err != nil || !res.IsError {
			t.Fatalf("plan %s applied a second time: %v %v", id, err, res)
		}
	}
	if n := count(nodesOf(t, p, u), "planned on A"); n != 1 {
		t.Fatalf("the PDS holds %d of the planned bullet, want 1", n)
	}

	// another user cannot apply u's plan, nor use it up
	two := map[string]any{"text": "u's own"}
	id2 := planOf(call(ctx, ca, "insert_after", map[string]any{"text": "u's own", "dry_run": true}))
	two["plan"] = id2
	if res, err := call(ctx, cv, "insert_after", two); err != nil || !res.IsError {
		t.Fatalf("another user applied u's plan: %v %v", err, res)
	}
	if n := len(nodesOf(t, p, v)); n != 0 {
		t.Fatalf("another user's repository got %d bullets", n)
	}
	if res, err := call(ctx, cb, "insert_after", two); err != nil || res.IsError {
		t.Fatalf("u's plan after another user tried it: %v %s", err, resultText(res))
	}

	// a confirmation asked on A, answered on B
	var kids []intent.NewNode
	for i := range 25 {
		kids = append(kids, intent.NewNode{Text: fmt.Sprintf("old %d", i)})
	}
	ua, err := a.user(ctx, u.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := insertTop(ctx, ua.env.Engine, []intent.NewNode{{Text: "Archive", Children: kids}})
	if err != nil {
		t.Fatal(err)
	}
	del := map[string]any{"node": out.Plan.Created[0].RKey, "children": "subtree"}
	asked, err := call(ctx, ca, "delete_node", del)
	if err != nil || asked.ResultType != mcp.ResultTypeInputRequired || asked.RequestState == "" {
		t.Fatalf("want input required with a confirmation, got %v %+v", err, asked)
	}
	if n := count(nodesOf(t, p, u), "Archive"); n != 1 {
		t.Fatalf("asking wrote: %d archives", n)
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "delete_node"
	req.Params.Arguments = del
	req.Params.MultiRoundTripParams = mcp.MultiRoundTripParams{RequestState: asked.RequestState,
		InputResponses: mcp.InputResponses{"confirm": mcp.NewElicitationInputResponse(mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}})}}
	res, err := cb.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("accepted on B: %v %s", err, resultText(res))
	}
	if got := nodesOf(t, p, u); count(got, "Archive") != 0 || count(got, "old 3") != 0 {
		t.Fatalf("after the confirmation on B the PDS holds %v", got)
	}
}

// writingPerson writes through another client while they are asked, then
// accepts.
type writingPerson struct {
	write func() error
	err   error
}

func (p *writingPerson) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	p.err = p.write()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// TestConfirmAnyInstanceLegacy: a 2025-11-25 client that can ask its
// person, behind a round-robin balancer over two instances: a big delete
// on one instance asks mid-call (elicitation/create on the call's stream);
// the client's answer, posted to the other instance, is forwarded to the
// one whose call waits for it, and the delete is applied (read back from
// the PDS). Before, the other instance could not deliver the answer and
// the call waited for it in vain (declined: no answer came). While the
// person is asked, the call does not hold the user's turn to write: a
// write of another client on the same instance lands meanwhile.
func TestConfirmAnyInstanceLegacy(t *testing.T) {
	old := server.ConfirmTimeout
	server.ConfirmTimeout = 30 * time.Second // (a lost answer fails the test in 30 s)
	defer func() { server.ConfirmTimeout = old }()
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	rules := tools.DefaultConfirm
	a := e.start(t, func(c *Config) { c.Confirm = &rules })
	b := e.start(t, func(c *Config) { c.Confirm = &rules; c.PublicURL = a.public })
	u := newAccount(t, p, fmt.Sprintf("cl%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, a, registerClient(t, a), u, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ua, err := a.user(ctx, u.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	var kids []intent.NewNode
	for i := range 25 {
		kids = append(kids, intent.NewNode{Text: fmt.Sprintf("old %d", i)})
	}
	out, err := insertTop(ctx, ua.env.Engine, []intent.NewNode{{Text: "Archive", Children: kids}, {Text: "Elsewhere", Children: []intent.NewNode{{Text: "x"}}}})
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := ""
	for _, c := range out.Plan.Created {
		if c.Text == "Elsewhere" {
			elsewhere = c.RKey
		}
	}
	base, counts := roundRobin(t, a, b)
	other := mcpClient(t, a, tok)
	person := &writingPerson{write: func() error {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		// (under another bullet: not where the delete's plan touches)
		res, err := call(wctx, other, "insert_after", map[string]any{"text": "while asked", "parent": elsewhere})
		if err == nil && res.IsError {
			err = errors.New(resultText(res))
		}
		return err
	}}
	c := legacyClient(t, base, tok, mcp.ProtocolVersion20251125, mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}},
		client.WithElicitationHandler(person))
	// initialize went to one instance, the initialized notification to the
	// other: the call goes to the first, the answer to the second
	before := []int64{counts[0].Load(), counts[1].Load()}
	res, err := call(ctx, c, "delete_node", map[string]any{"node": out.Plan.Created[0].RKey, "children": "subtree"})
	if err != nil {
		t.Fatalf("the confirmed delete: %v", err)
	}
	if res.IsError {
		t.Fatalf("the confirmed delete: %s", resultText(res))
	}
	if d0, d1 := counts[0].Load()-before[0], counts[1].Load()-before[1]; d0 < 1 || d1 < 1 {
		t.Fatalf("the call and its answer reached %d and %d requests of the instances: not both", d0, d1)
	}
	if got := nodesOf(t, p, u); count(got, "Archive") != 0 || count(got, "old 3") != 0 || count(got, "while asked") != 1 {
		t.Fatalf("after the confirmation the PDS holds %v", got)
	}
	if person.err != nil {
		t.Fatalf("the write while the person was asked: %v", person.err)
	}
}
