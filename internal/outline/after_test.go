package outline_test

import (
	"context"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

// TestDryRunAfter: a dry run's Outcome.After, the planner's tree (what the
// tools' before/after view and changes read instead of bringing the tree
// forward again), is the tree before brought forward by the plan's writes,
// for plans of one intent and of a batch whose steps see each other.
func TestDryRunAfter(t *testing.T) {
	ctx := context.Background()
	e := outline.New(openLocal(t, t.TempDir()))
	top := enginetest.Insert(t, e, outline.Position{}, "A", "B", "C")
	kids := enginetest.Insert(t, e, outline.Position{Parent: top[0]}, "a1", "a2")
	for name, in := range map[string]outline.Intent{
		"insert": intent.Insert{Pos: outline.Position{After: top[1]}, Nodes: []intent.NewNode{{Text: "new", Note: "n", Children: []intent.NewNode{{Text: "kid"}}}}},
		"move":   intent.Move{Nodes: []string{kids[1]}, Pos: outline.Position{Parent: top[2]}},
		"lift":   intent.Delete{Node: top[0], Children: "lift"},
		"batch": intent.Batch{
			{Tool: "move_node", Intent: intent.Move{Nodes: []string{top[2]}, Pos: outline.Position{Where: "first"}}},
			{Tool: "insert_after", Intent: intent.Insert{Pos: outline.Position{Parent: top[2]}, Nodes: []intent.NewNode{{Text: "under C"}}}},
		},
	} {
		out, err := e.Do(ctx, in, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out.After == nil {
			t.Fatalf("%s: a dry run without the tree after it", name)
		}
		want := out.Before.Next(out.Before.Commit, out.Before.Rev, outline.WriteChanges(out.Plan.Writes))
		if got, want := out.After.Describe(), want.Describe(); got != want {
			t.Errorf("%s: the tree after the dry run\n%s\nis not the tree before brought forward by its writes\n%s", name, got, want)
		}
	}
}
