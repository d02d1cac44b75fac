package enginetest

import (
	"context"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

// everyIntentAndItsInverse runs each intent of package intent once on a
// small outline, checks its effect as read back from the repository, then
// undoes it and checks the repository holds exactly the records it held
// before (same keys, same CIDs).
func everyIntentAndItsInverse(t *testing.T, open Open) {
	ctx := context.Background()
	repo := open(t)
	e := outline.New(repo)
	top := Insert(t, e, outline.Position{}, "b pears", "a apples", "c cherries")
	kids := Insert(t, e, outline.Position{Parent: top[0]}, "two", "one")
	str := func(s string) *string { return &s }
	node := func(tr *outline.Tree, k string) *outline.Item { return tr.Nodes.Get(k) }
	cases := []struct {
		name   string
		in     outline.Intent
		effect func(tr *outline.Tree) bool
	}{
		{"insert", intent.Insert{Pos: outline.Position{Parent: top[1]}, Nodes: []intent.NewNode{{Text: "granny smith"}}},
			func(tr *outline.Tree) bool {
				c := node(tr, top[1]).Children
				return c.Len() == 1 && c.At(0).Str("text") == "granny smith"
			}},
		{"move", intent.Move{Nodes: []string{kids[1]}, Pos: outline.Position{Parent: top[2], Where: "first"}},
			func(tr *outline.Tree) bool { return tr.Parent(node(tr, kids[1])) == node(tr, top[2]) }},
		{"edit", intent.Edit{Node: top[0], Text: str("pears, ripe"), Note: str("from the market")},
			func(tr *outline.Tree) bool {
				it := node(tr, top[0])
				return it.Str("text") == "pears, ripe" && it.Note != nil
			}},
		{"complete", intent.Complete{Node: top[1], Done: true},
			func(tr *outline.Tree) bool {
				it := node(tr, top[1])
				return it.Str("layout") == "todo" && it.Str("completedAt") != ""
			}},
		{"delete", intent.Delete{Node: top[0], Children: "subtree"},
			func(tr *outline.Tree) bool { return node(tr, top[0]) == nil && node(tr, kids[0]) == nil }},
		{"delete lift", intent.Delete{Node: top[0], Children: "lift"},
			func(tr *outline.Tree) bool { return node(tr, top[0]) == nil && tr.Parent(node(tr, kids[0])) == nil }},
		{"policy", intent.Policy{Allow: []string{"mentioned"}},
			func(tr *outline.Tree) bool { return tr.Policies.Len() == 1 }},
		{"mirror", intent.Mirror{Original: top[2], Pos: outline.Position{Parent: top[1]}},
			func(tr *outline.Tree) bool { c := node(tr, top[1]).Children; return c.Len() == 1 && c.At(0).Mirror }},
		{"comment", intent.Comment{Subject: top[2], Text: "lovely"},
			func(tr *outline.Tree) bool { return countColl(tr, "app.bulleted.comment") == 1 }},
		{"outline", intent.Outline{Title: str("Fruit")},
			func(tr *outline.Tree) bool {
				r, ok := tr.Outlines.Lookup("self")
				return ok && r.Value.Get("title") == "Fruit"
			}},
		{"sort", intent.Sort{By: intent.SortText},
			func(tr *outline.Tree) bool { return tr.Roots.At(0).Key() == top[1] && tr.Roots.At(2).Key() == top[2] }},
		{"batch", intent.Batch{
			{Tool: "insert_after", Intent: intent.Insert{Nodes: []intent.NewNode{{Text: "d dates"}}}},
			{Tool: "sort_children", Intent: intent.Sort{By: intent.SortReverse}}},
			func(tr *outline.Tree) bool { return tr.Roots.Len() == 4 && tr.Roots.At(0).Str("text") == "d dates" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before, err := repo.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out, err := e.Do(ctx, c.in, false)
			if err != nil {
				t.Fatal(err)
			}
			if out.NoChange || out.Op == nil {
				t.Fatalf("%s wrote nothing", c.name)
			}
			after, err := repo.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !c.effect(outline.Build(after)) {
				t.Fatalf("%s: the effect is not in the repository as read back", c.name)
			}
			if _, err := e.Undo(ctx, 1, "", false); err != nil {
				t.Fatalf("undo %s: %v", c.name, err)
			}
			undone, err := repo.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !sameRecords(before, undone) {
				t.Fatalf("undo %s: the repository differs from before (%d records before, %d after undo)", c.name, len(before.Records), len(undone.Records))
			}
		})
	}
}

func countColl(tr *outline.Tree, coll string) int {
	n := 0
	for _, r := range tr.Records() {
		if r.Collection == coll {
			n++
		}
	}
	return n
}
