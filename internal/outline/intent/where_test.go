package intent_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// whereEngine is an engine over a fresh store holding nodes.
func whereEngine(t *testing.T, nodes []intent.NewNode) (*outline.Engine, *outline.Tree) {
	t.Helper()
	repo, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	e := outline.New(repo)
	if _, err := e.Do(context.Background(), intent.Insert{Nodes: nodes}, false); err != nil {
		t.Fatal(err)
	}
	tr, err := e.Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return e, tr
}

func treeTexts(items outline.Kids) []string {
	var out []string
	for it := range items.Items() {
		out = append(out, it.Str("text"))
	}
	return out
}

// TestDeleteWhereNested: a selected bullet under a selected one goes
// first (children=refuse would refuse the parent otherwise); with subtree
// it goes with its ancestor. A bullet with an unselected child is refused.
func TestDeleteWhereNested(t *testing.T) {
	ctx := context.Background()
	nodes := []intent.NewNode{{Text: "x parent", Children: []intent.NewNode{{Text: "x child", Children: []intent.NewNode{{Text: "x grandchild"}}}}}, {Text: "keep"}}
	e, _ := whereEngine(t, nodes)
	out, err := e.Do(ctx, intent.DeleteWhere{Where: intent.Where{Text: "x "}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Plan.Writes) != 3 {
		t.Fatalf("%d writes", len(out.Plan.Writes))
	}
	tr, _ := e.Tree(ctx)
	if got := treeTexts(tr.Roots); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("left %q", got)
	}

	e, _ = whereEngine(t, []intent.NewNode{{Text: "x parent", Children: []intent.NewNode{{Text: "other"}}}})
	if _, err := e.Do(ctx, intent.DeleteWhere{Where: intent.Where{Text: "x "}}, false); err == nil || !strings.Contains(err.Error(), "nothing cascades") {
		t.Fatalf("a selected bullet with an unselected child: %v", err)
	}
	_, err = e.Do(ctx, intent.DeleteWhere{Where: intent.Where{Text: "x "}, Children: "lift"}, false)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ = e.Tree(ctx)
	if got := treeTexts(tr.Roots); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("lifted: %q", got)
	}
}

// TestMoveWhereInPlace: without parent or after, each parent's selected
// children move to the position among their own siblings; with a parent,
// the runs land there in the outline's order.
func TestMoveWhereInPlace(t *testing.T) {
	ctx := context.Background()
	nodes := []intent.NewNode{
		{Text: "A", Children: []intent.NewNode{{Text: "a1"}, {Text: "a2 #up"}, {Text: "a3"}, {Text: "a4 #up"}}},
		{Text: "B", Children: []intent.NewNode{{Text: "b1"}, {Text: "b2 #up"}}},
		{Text: "C"},
	}
	e, tr := whereEngine(t, nodes)
	if _, err := e.Do(ctx, intent.MoveWhere{Where: intent.Where{Tags: []string{"up"}}, Pos: outline.Position{Where: "first"}}, false); err != nil {
		t.Fatal(err)
	}
	tr2, _ := e.Tree(ctx)
	a, b := tr2.Nodes.Get(tr.Roots.At(0).Key()), tr2.Nodes.Get(tr.Roots.At(1).Key())
	if got := treeTexts(a.Children); !slices.Equal(got, []string{"a2 #up", "a4 #up", "a1", "a3"}) {
		t.Fatalf("A: %q", got)
	}
	if got := treeTexts(b.Children); !slices.Equal(got, []string{"b2 #up", "b1"}) {
		t.Fatalf("B: %q", got)
	}
	c := tr.Roots.At(2).Key()
	if _, err := e.Do(ctx, intent.MoveWhere{Where: intent.Where{Tags: []string{"up"}}, Pos: outline.Position{Parent: c}}, false); err != nil {
		t.Fatal(err)
	}
	tr3, _ := e.Tree(ctx)
	if got := treeTexts(tr3.Nodes.Get(c).Children); !slices.Equal(got, []string{"a2 #up", "a4 #up", "b2 #up"}) {
		t.Fatalf("C: %q", got)
	}
	// nothing selected: no writes, said
	out, err := e.Do(ctx, intent.MoveWhere{Where: intent.Where{Tags: []string{"none"}}, Pos: outline.Position{Parent: c}}, true)
	if err != nil || len(out.Plan.Writes) != 0 || !slices.ContainsFunc(out.Plan.Diagnostics, func(d string) bool { return strings.Contains(d, "where selected 0 bullet(s)") }) {
		t.Fatalf("an empty selection: %v %+v", err, out)
	}
}

// TestRenameMention: find "@alice.example" renames whole mentions only
// (not "@alice.example.org"), as a tag rename does whole tags.
func TestRenameMention(t *testing.T) {
	ctx := context.Background()
	e, _ := whereEngine(t, []intent.NewNode{{Text: "ask @alice.example today"}, {Text: "ask @alice.example.org"}, {Text: "mail alice.example"}})
	if _, err := e.Do(ctx, intent.EditWhere{Where: &intent.Where{Text: "alice"}, Replace: &intent.Replace{Find: "@alice.example", With: "@bob.example"}}, false); err != nil {
		t.Fatal(err)
	}
	tr, _ := e.Tree(ctx)
	if got := treeTexts(tr.Roots); !slices.Equal(got, []string{"ask @bob.example today", "ask @alice.example.org", "mail alice.example"}) {
		t.Fatalf("after the rename: %q", got)
	}
}

// TestDeleteWhereDepth: with under and depth, where takes the bullets
// within depth levels below under only; a depth below 1, or without
// under, is refused naming where.depth, and nothing is written.
func TestDeleteWhereDepth(t *testing.T) {
	ctx := context.Background()
	nodes := []intent.NewNode{{Text: "L", Children: []intent.NewNode{{Text: "x child"}, {Text: "keep", Children: []intent.NewNode{{Text: "x grandchild"}}}}}}
	e, tr := whereEngine(t, nodes)
	L := tr.Roots.At(0).Key()
	for _, w := range []intent.Where{{Text: "x ", Under: L, Depth: -1}, {Text: "x ", Depth: 1}} {
		if _, err := e.Do(ctx, intent.DeleteWhere{Where: w}, false); err == nil || !strings.Contains(err.Error(), "where.depth") {
			t.Fatalf("depth %d under %q: %v", w.Depth, w.Under, err)
		}
	}
	out, err := e.Do(ctx, intent.DeleteWhere{Where: intent.Where{Text: "x ", Under: L, Depth: 1}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Plan.Writes) != 1 {
		t.Fatalf("%d writes, want the child's delete", len(out.Plan.Writes))
	}
	tr, _ = e.Tree(ctx)
	keep := tr.ChildrenOf(tr.Roots.At(0))
	if got := treeTexts(keep); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("L keeps %q", got)
	}
	if got := treeTexts(tr.ChildrenOf(keep.At(0))); !slices.Equal(got, []string{"x grandchild"}) {
		t.Fatalf("the grandchild: %q", got)
	}
}
