package server_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

type person struct {
	mu     sync.Mutex
	answer mcp.ElicitationResponseAction
	asked  []string
}

func (p *person) Elicit(_ context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, r.Params.Message)
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: p.answer}}, nil
}

// confirmSetup is an embedded store with a bullet of 25 children, and the
// tool environment that asks above 20 deletes.
func confirmSetup(t *testing.T) (*tools.Env, store.Repository, string) {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e := outline.New(l)
	var kids []intent.NewNode
	for range 25 {
		kids = append(kids, intent.NewNode{Text: "old note"})
	}
	out, err := e.Do(context.Background(), intent.Insert{Nodes: []intent.NewNode{{Text: "Archive 2019", Children: kids}, {Text: "keep"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	rules := tools.DefaultConfirm
	return &tools.Env{Engine: e, Confirm: &rules}, l, out.Plan.Created[0].RKey
}

func nodeCount(t *testing.T, l store.Repository) int {
	t.Helper()
	s, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range s.Records {
		if r.Collection == "app.bulleted.node" {
			n++
		}
	}
	return n
}

func errKind(res *mcp.CallToolResult) string {
	b, _ := json.Marshal(res.StructuredContent)
	var v struct {
		Error struct{ Kind string } `json:"error"`
	}
	json.Unmarshal(b, &v)
	return v.Error.Kind
}

func connect(t *testing.T, env *tools.Env, version string, p *person, more ...client.ClientOption) *client.Client {
	t.Helper()
	opts := more
	if p != nil {
		opts = append(opts, client.WithElicitationHandler(p))
	}
	var c *client.Client
	var err error
	if mcp.IsModernProtocol(version) {
		// the in-process transport speaks the earlier protocols only
		srv := httptest.NewServer(server.HTTPHandler(server.NewWith(env, false), server.HTTPOptions{}))
		t.Cleanup(srv.Close)
		tr, terr := transport.NewStreamableHTTP(srv.URL + "/mcp")
		if terr != nil {
			t.Fatal(terr)
		}
		c = client.NewClient(tr, opts...)
	} else {
		c, err = client.NewInProcessClientWithOptions(server.NewWith(env, false), opts...)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if p != nil {
		init.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{}
	}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

func call(t *testing.T, c *client.Client, name string, args map[string]any, mrt *mcp.MultiRoundTripParams) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	if mrt != nil {
		req.Params.MultiRoundTripParams = *mrt
	}
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestConfirmBigDelete (protocols up to 2025-11-25, where the server asks
// mid-call): a 26-bullet delete asks the person with the counts; declined,
// nothing is written (read back) and the result's kind is declined;
// accepted, exactly the plan shown is applied. A small delete, and a client
// that cannot be asked, never ask.
func TestConfirmBigDelete(t *testing.T) {
	env, l, archive := confirmSetup(t)
	p := &person{answer: mcp.ElicitationResponseActionDecline}
	c := connect(t, env, mcp.ProtocolVersion20251125, p)
	del := map[string]any{"node": archive, "children": "subtree"}

	res := call(t, c, "delete_node", del, nil)
	if !res.IsError || errKind(res) != "declined" {
		t.Fatalf("declined: want an error of kind declined, got %v %s", res.IsError, errKind(res))
	}
	if n := nodeCount(t, l); n != 27 {
		t.Fatalf("declined: %d bullets left, want 27", n)
	}
	if len(p.asked) != 1 || !strings.Contains(p.asked[0], "26 bullet(s) deleted") {
		t.Fatalf("asked %q", p.asked)
	}
	p.answer = mcp.ElicitationResponseActionAccept
	res = call(t, c, "delete_node", del, nil)
	if res.IsError {
		t.Fatalf("accepted: %v", res.Content)
	}
	if n := nodeCount(t, l); n != 1 {
		t.Fatalf("accepted: %d bullets left, want 1", n)
	}

	// a small delete does not ask
	asked := len(p.asked)
	s, _ := l.Snapshot(context.Background())
	var keep string
	for _, r := range s.Records {
		if r.Collection == "app.bulleted.node" {
			keep = r.RKey
		}
	}
	if res := call(t, c, "delete_node", map[string]any{"node": keep}, nil); res.IsError || len(p.asked) != asked {
		t.Fatalf("a small delete asked, or failed: %v", res.Content)
	}

	// a client that cannot be asked: the write goes through as before
	env2, l2, archive2 := confirmSetup(t)
	c2 := connect(t, env2, mcp.ProtocolVersion20251125, nil)
	if res := call(t, c2, "delete_node", map[string]any{"node": archive2, "children": "subtree"}, nil); res.IsError {
		t.Fatalf("no elicitation: %v", res.Content)
	}
	if n := nodeCount(t, l2); n != 1 {
		t.Fatalf("no elicitation: %d bullets left, want 1", n)
	}
}

// TestConfirmBigDeleteModern (2026-07-28): the call answers input required
// with the question and the plan id as its state; the client asks the
// person and calls again with the answer, which applies the plan (accepted)
// or writes nothing (declined). Checked with the client's own retry loop,
// and by hand.
func TestConfirmBigDeleteModern(t *testing.T) {
	for _, answer := range []mcp.ElicitationResponseAction{mcp.ElicitationResponseActionDecline, mcp.ElicitationResponseActionAccept} {
		env, l, archive := confirmSetup(t)
		p := &person{answer: answer}
		c := connect(t, env, mcp.LATEST_PROTOCOL_VERSION, p)
		res := call(t, c, "delete_node", map[string]any{"node": archive, "children": "subtree"}, nil)
		want := map[mcp.ElicitationResponseAction]int{mcp.ElicitationResponseActionDecline: 27, mcp.ElicitationResponseActionAccept: 1}[answer]
		if n := nodeCount(t, l); n != want {
			t.Fatalf("%s: %d bullets left, want %d", answer, n, want)
		}
		if len(p.asked) != 1 || !strings.Contains(p.asked[0], "26 bullet(s) deleted") {
			t.Fatalf("asked %q", p.asked)
		}
		if answer == mcp.ElicitationResponseActionDecline && errKind(res) != "declined" {
			t.Fatalf("declined: kind %q", errKind(res))
		}
	}

	env, l, archive := confirmSetup(t)
	c := connect(t, env, mcp.LATEST_PROTOCOL_VERSION, &person{}, client.WithManualInputRoundTrips())
	del := map[string]any{"node": archive, "children": "subtree"}
	res := call(t, c, "delete_node", del, nil)
	if res.ResultType != mcp.ResultTypeInputRequired || res.InputRequests["confirm"].Elicitation == nil || res.RequestState == "" {
		t.Fatalf("want input required with a confirmation, got %+v", res)
	}
	if n := nodeCount(t, l); n != 27 {
		t.Fatalf("asking wrote: %d bullets", n)
	}
	call(t, c, "delete_node", del, &mcp.MultiRoundTripParams{RequestState: res.RequestState,
		InputResponses: mcp.InputResponses{"confirm": mcp.NewElicitationInputResponse(mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}})}})
	if n := nodeCount(t, l); n != 1 {
		t.Fatalf("accepted by hand: %d bullets left, want 1", n)
	}
}

// TestConfirmPlanID: applying a dry run's plan by id asks the person too
// when it is big (a plan id is no way around the question).
func TestConfirmPlanID(t *testing.T) {
	env, l, archive := confirmSetup(t)
	p := &person{answer: mcp.ElicitationResponseActionDecline}
	c := connect(t, env, mcp.ProtocolVersion20251125, p)
	dry := call(t, c, "delete_node", map[string]any{"node": archive, "children": "subtree", "dry_run": true}, nil)
	sc, _ := dry.StructuredContent.(map[string]any)
	id, _ := sc["plan"].(string)
	if id == "" || len(p.asked) != 0 {
		t.Fatalf("dry run: plan %q, asked %d times", id, len(p.asked))
	}
	res := call(t, c, "delete_node", map[string]any{"node": archive, "children": "subtree", "plan": id}, nil)
	if errKind(res) != "declined" || len(p.asked) != 1 {
		t.Fatalf("plan=ID: kind %q, asked %d times", errKind(res), len(p.asked))
	}
	if n := nodeCount(t, l); n != 27 {
		t.Fatalf("declined plan wrote: %d bullets", n)
	}
	p.answer = mcp.ElicitationResponseActionAccept
	if res := call(t, c, "delete_node", map[string]any{"node": archive, "children": "subtree", "plan": id}, nil); res.IsError {
		t.Fatalf("accepted plan: %v", res.Content)
	}
	if n := nodeCount(t, l); n != 1 {
		t.Fatalf("accepted plan: %d bullets left, want 1", n)
	}
}
