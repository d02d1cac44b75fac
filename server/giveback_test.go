package server_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestGiveBackAfterBigPlans: a write of tools.BigPlan writes or more gives
// its memory back (env.GiveBack, in the background); a smaller one, or a
// dry run, does not.
func TestGiveBackAfterBigPlans(t *testing.T) {
	env, _ := gateEnv(t)
	env.Confirm = nil
	var calls atomic.Int32
	env.GiveBack = func() { calls.Add(1) }
	out, err := env.Engine.Do(context.Background(), intent.Insert{Nodes: []intent.NewNode{{Text: "big", Children: texts(tools.BigPlan/2, "child %d")}, {Text: "small"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	big, small := out.Plan.Created[0].RKey, out.Plan.Created[len(out.Plan.Created)-1].RKey
	c := connect(t, env, mcp.ProtocolVersion20251125, nil)
	wait := func() {
		for env.Settling() {
			runtime.Gosched() // the give-back runs in the background
		}
	}
	call(t, c, "delete_node", map[string]any{"node": small, "dry_run": true}, nil)
	wait()
	if n := calls.Load(); n != 0 {
		t.Fatalf("a one-bullet dry run gave back %d times", n)
	}
	// BigPlan/2+1 bullets: under the size
	call(t, c, "delete_node", map[string]any{"node": big, "children": "subtree", "dry_run": true}, nil)
	wait()
	if n := calls.Load(); n != 0 {
		t.Fatalf("a dry run of %d writes (under %d) gave back %d times", tools.BigPlan/2+1, tools.BigPlan, n)
	}
	if _, err := env.Engine.Do(context.Background(), intent.Insert{Pos: outline.Position{Parent: big}, Nodes: texts(tools.BigPlan/2, "more %d")}, false); err != nil {
		t.Fatal(err)
	}
	call(t, c, "delete_node", map[string]any{"node": big, "children": "subtree", "dry_run": true}, nil)
	wait()
	if n := calls.Load(); n != 0 {
		t.Fatalf("a dry run of %d writes gave back %d times", tools.BigPlan+1, n)
	}
	if res := call(t, c, "delete_node", map[string]any{"node": big, "children": "subtree"}, nil); res.IsError {
		t.Fatal(res.Content)
	}
	wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("a delete of %d writes gave back %d times, want 1", tools.BigPlan+1, n)
	}
}
