package tools_test

import (
	"context"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestPlanIDThroughTools: a write tool's dry run returns a plan id; the
// same call with plan=ID writes exactly the records the dry run listed
// (read back), once; apply_batch likewise; a plan with other arguments is
// refused and writes nothing.
func TestPlanIDThroughTools(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	args := map[string]any{"text": "call the plumber", "layout": "todo"}

	dry, sc := call(t, c, "insert_after", map[string]any{"text": "call the plumber", "layout": "todo", "dry_run": true})
	id, _ := sc["plan"].(string)
	if dry.IsError || id == "" {
		t.Fatalf("a dry run gave no plan id: %s", text(dry))
	}
	writes, _ := sc["writes"].([]any)
	if len(writes) != 1 {
		t.Fatalf("dry run writes %v", sc["writes"])
	}
	rkey := writes[0].(map[string]any)["rkey"].(string)

	if res, _ := call(t, c, "insert_after", map[string]any{"text": "something else", "plan": id}); !res.IsError {
		t.Fatal("a plan applied with other arguments")
	}
	args["plan"] = id
	if res, _ := call(t, c, "insert_after", args); res.IsError {
		t.Fatalf("apply: %s", text(res))
	}
	s, _ := l.Snapshot(context.Background())
	found := 0
	for _, r := range s.Records {
		if r.Collection == "app.bulleted.node" {
			found++
			if r.RKey != rkey || r.Value.Get("text") != "call the plumber" {
				t.Fatalf("the repository holds %s %v, not the dry run's %s", r.RKey, r.Value, rkey)
			}
		}
	}
	if found != 1 {
		t.Fatalf("%d bullets, want 1", found)
	}
	if res, _ := call(t, c, "insert_after", args); !res.IsError {
		t.Fatal("a plan applied twice")
	}

	batch := map[string]any{"ops": []any{
		map[string]any{"tool": "complete_todo", "args": map[string]any{"node": rkey}},
		map[string]any{"tool": "insert_after", "args": map[string]any{"text": "pay him"}},
	}}
	batch["dry_run"] = true
	_, sc = call(t, c, "apply_batch", batch)
	id, _ = sc["plan"].(string)
	if id == "" {
		t.Fatal("apply_batch dry run: no plan id")
	}
	delete(batch, "dry_run")
	batch["plan"] = id
	if res, _ := call(t, c, "apply_batch", batch); res.IsError {
		t.Fatalf("apply_batch with plan: %s", text(res))
	}
	tr, _ := e.Tree(context.Background())
	if len(tr.Roots) != 2 || tr.Nodes.Get(rkey).Str("completedAt") == "" {
		t.Fatal("the batch's plan is not in the repository")
	}
}
