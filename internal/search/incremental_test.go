package search

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
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// pages returns every hit of q, page by page.
func pages(t *testing.T, x *Index, tr *outline.Tree, q Query) []Hit {
	t.Helper()
	var all []Hit
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
	x := New()
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
		fresh := New()
		fresh.Update(tr)
		sameScan(t, x, fresh)
		under := tr.Roots[rng.IntN(len(tr.Roots))]
		for _, q := range []Query{{Text: "budget", Limit: 7}, {Text: "review", Limit: 5}, {Text: "budget", Under: under, Limit: 3}, {Text: fmt.Sprint(step)}} {
			got, want := pages(t, x, tr, q), pages(t, fresh, tr, q)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, query %+v: %d hits, fresh index %d", step, q, len(got), len(want))
			}
		}
	}
}

// sameScan checks that x's scan is fresh's: the same items in the same
// order, with the same subtree sizes and the same texts, its blocks each
// laid out from their rows' entries.
func sameScan(t *testing.T, x, fresh *Index) {
	t.Helper()
	checkCorpus(t, x)
	flat := func(x *Index) (rows []row, text []string) {
		for _, b := range x.blocks {
			rows = append(rows, b.rows...)
			for i := range b.rows {
				text = append(text, string(b.text.buf[b.text.off[i]:b.text.off[i+1]]))
			}
		}
		return rows, text
	}
	r1, t1 := flat(x)
	r2, t2 := flat(fresh)
	if len(r1) != len(r2) || x.rows() != len(r1) {
		t.Fatalf("%d rows (%d counted), a fresh index %d", len(r1), x.rows(), len(r2))
	}
	for i := range r1 {
		if r1[i].it != r2[i].it || r1[i].size != r2[i].size || t1[i] != t2[i] {
			t.Fatalf("row %d: %s (subtree %d, %q), a fresh index %s (subtree %d, %q)", i, r1[i].it.Key(), r1[i].size, t1[i], r2[i].it.Key(), r2[i].size, t2[i])
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
	x := New()
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	x.Update(tr)
	if len(x.blocks) < 4 {
		t.Fatalf("only %d blocks", len(x.blocks))
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
		fresh := New()
		fresh.Update(tr)
		sameScan(t, x, fresh)
		if (kind == 3 || kind == 6) && (x.Derived != 1 || x.relaid != 1) {
			t.Fatalf("step %d: one bullet's text or note edited: %d entries derived, %d blocks laid out again (of %d)", step, x.Derived, x.relaid, len(x.blocks))
		}
		under := tr.Roots[rng.IntN(len(tr.Roots))]
		for _, q := range []Query{{Text: "zebra", Limit: 50}, {Text: "budget", Under: under, Limit: 9}, {Text: fmt.Sprint(step)}, {State: "open", Limit: 30}} {
			got, want := pages(t, x, tr, q), pages(t, fresh, tr, q)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, query %+v: %d hits, fresh index %d", step, q, len(got), len(want))
			}
		}
	}
}
