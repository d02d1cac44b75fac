package search_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// pages returns every hit of q, page by page.
func pages(t *testing.T, x *search.Index, tr *outline.Tree, q search.Query) []search.Hit {
	t.Helper()
	var all []search.Hit
	for i := 0; ; i++ {
		r, err := x.Search(tr, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, r.Hits...)
		if r.Cursor == "" || i > 100 {
			return all
		}
		q.Cursor = r.Cursor
	}
}

// The index kept current commit by commit answers every query as an index
// built from scratch on the same tree does (inserts, moves, edits, deletes
// with children lifted, notes), and after a commit it visits only what
// changed.
func TestIndexFollowsCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := outline.New(l)
	rng := rand.New(rand.NewPCG(3, 9))
	var seed []intent.NewNode
	for i := range 30 {
		n := intent.NewNode{Text: fmt.Sprintf("section %d budget", i)}
		for j := range 20 {
			n.Children = append(n.Children, intent.NewNode{Text: fmt.Sprintf("item %d.%d review", i, j), Note: "budget note"})
		}
		seed = append(seed, n)
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: seed}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	x := search.New()
	tr, _ := e.Tree(ctx)
	x.Update(tr)
	for step := range 60 {
		var all []string
		for k := range tr.Nodes.All() {
			all = append(all, k)
		}
		slices.Sort(all)
		pick := func() string { return all[rng.IntN(len(all))] }
		var fn func(p *outline.Planner) error
		switch rng.IntN(5) {
		case 0:
			par := pick()
			fn = func(p *outline.Planner) error {
				return intent.Insert{Pos: outline.Position{Parent: par}, Nodes: []intent.NewNode{{Text: fmt.Sprint("new budget ", step)}}}.Plan(p)
			}
		case 1:
			a, b := pick(), pick()
			fn = func(p *outline.Planner) error {
				return intent.Move{Nodes: []string{a}, Pos: outline.Position{Parent: b}}.Plan(p)
			}
		case 2:
			a := pick()
			txt := fmt.Sprint("edited review ", step)
			fn = func(p *outline.Planner) error { return intent.Edit{Node: a, Text: &txt}.Plan(p) }
		case 3:
			a := pick()
			fn = func(p *outline.Planner) error { return intent.Delete{Node: a, Children: "lift"}.Plan(p) }
		case 4:
			a := pick()
			note := fmt.Sprint("budget note ", step)
			fn = func(p *outline.Planner) error { return intent.Edit{Node: a, Note: &note}.Plan(p) }
		}
		out, err := e.DoFunc(ctx, false, fn)
		if err != nil {
			continue // a refused move (into its own subtree): nothing written
		}
		tr, _ = e.Tree(ctx)
		x.Update(tr)
		if x.Derived > len(out.Plan.Writes) {
			t.Fatalf("step %d: %d entries derived again for a commit of %d writes", step, x.Derived, len(out.Plan.Writes))
		}
		fresh := search.New()
		fresh.Update(tr)
		search.SameScan(t, x, fresh)
		under := tr.Roots.At(rng.IntN(tr.Roots.Len()))
		for _, q := range []search.Query{{Text: "budget", Limit: 7}, {Text: "review", Limit: 5}, {Text: "budget", Under: under, Limit: 3}, {Text: fmt.Sprint(step)}} {
			got, want := pages(t, x, tr, q), pages(t, fresh, tr, q)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, query %+v: %d hits, fresh index %d", step, q, len(got), len(want))
			}
		}
	}
}

// The same on a generated outline of many blocks, with the engine's trees
// (outline.Tree.Next: unchanged subtrees shared): batches inserted, whole
// subtrees deleted and moved, texts and notes edited; after each commit
// the scan is a fresh index's, block by block, and only the blocks of what
// changed were laid out again.
func TestIndexFollowsCommitsInBlocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := outline.New(outlinegen.NewMemory(outlinegen.Generate(8_000, 4)))
	rng := rand.New(rand.NewPCG(5, 11))
	x := search.New()
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x.Update(tr)
	if search.Blocks(x) < 4 {
		t.Fatalf("only %d blocks", search.Blocks(x))
	}
	for step := range 120 {
		var all []string
		for k := range tr.Nodes.All() {
			all = append(all, k)
		}
		slices.Sort(all)
		pick := func() string { return all[rng.IntN(len(all))] }
		var fn func(p *outline.Planner) error
		kind := rng.IntN(7)
		switch kind {
		case 0, 1:
			par := pick()
			ns := make([]intent.NewNode, 1+rng.IntN(3)*rng.IntN(400))
			for j := range ns {
				ns[j] = intent.NewNode{Text: fmt.Sprint("zebra ", step, " ", j)}
			}
			fn = func(p *outline.Planner) error {
				return intent.Insert{Pos: outline.Position{Parent: par}, Nodes: ns}.Plan(p)
			}
		case 2:
			a, b := pick(), pick()
			if rng.IntN(3) == 0 {
				b = ""
			}
			fn = func(p *outline.Planner) error {
				return intent.Move{Nodes: []string{a}, Pos: outline.Position{Parent: b}}.Plan(p)
			}
		case 3:
			a := pick()
			txt := fmt.Sprint("zebra edited ", step)
			fn = func(p *outline.Planner) error { return intent.Edit{Node: a, Text: &txt}.Plan(p) }
		case 4:
			a := pick()
			fn = func(p *outline.Planner) error { return intent.Delete{Node: a, Children: "subtree"}.Plan(p) }
		case 5:
			a := pick()
			fn = func(p *outline.Planner) error { return intent.Delete{Node: a, Children: "lift"}.Plan(p) }
		case 6:
			a := pick()
			note := fmt.Sprint("zebra note ", step)
			fn = func(p *outline.Planner) error { return intent.Edit{Node: a, Note: &note}.Plan(p) }
		}
		if _, err := e.DoFunc(ctx, false, fn); err != nil {
			continue // refused (a move into its own subtree, a plan too large): nothing written
		}
		tr, _ = e.Tree(ctx)
		x.Update(tr)
		fresh := search.New()
		fresh.Update(tr)
		search.SameScan(t, x, fresh)
		if (kind == 3 || kind == 6) && (x.Derived != 1 || search.Relaid(x) != 1) {
			t.Fatalf("step %d: one bullet's text or note edited: %d entries derived, %d blocks laid out again (of %d)", step, x.Derived, search.Relaid(x), search.Blocks(x))
		}
		under := tr.Roots.At(rng.IntN(tr.Roots.Len()))
		for _, q := range []search.Query{{Text: "zebra", Limit: 50}, {Text: "budget", Under: under, Limit: 9}, {Text: fmt.Sprint(step)}, {State: "open", Limit: 30}} {
			got, want := pages(t, x, tr, q), pages(t, fresh, tr, q)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, query %+v: %d hits, fresh index %d", step, q, len(got), len(want))
			}
		}
	}
}
