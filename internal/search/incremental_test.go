package search

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
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
	var seed []outline.NewNode
	for i := range 30 {
		n := outline.NewNode{Text: fmt.Sprintf("section %d budget", i)}
		for j := range 20 {
			n.Children = append(n.Children, outline.NewNode{Text: fmt.Sprintf("item %d.%d review", i, j), Note: "budget note"})
		}
		seed = append(seed, n)
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return p.Insert(outline.Position{}, seed) }); err != nil {
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
				return p.Insert(outline.Position{Parent: par}, []outline.NewNode{{Text: fmt.Sprint("new budget ", step)}})
			}
		case 1:
			a, b := pick(), pick()
			fn = func(p *outline.Planner) error { return p.Move([]string{a}, outline.Position{Parent: b}) }
		case 2:
			a := pick()
			txt := fmt.Sprint("edited review ", step)
			fn = func(p *outline.Planner) error { return p.Edit(a, outline.Edit{Text: &txt}) }
		case 3:
			a := pick()
			fn = func(p *outline.Planner) error { return p.DeleteNode(a, "lift") }
		case 4:
			a := pick()
			note := fmt.Sprint("budget note ", step)
			fn = func(p *outline.Planner) error { return p.Edit(a, outline.Edit{Note: &note}) }
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
		if !reflect.DeepEqual(x.order, fresh.order) || !reflect.DeepEqual(x.end, fresh.end) {
			t.Fatalf("step %d: the scan differs from a fresh index's", step)
		}
		under := tr.Roots[rng.IntN(len(tr.Roots))]
		for _, q := range []Query{{Text: "budget", Limit: 7}, {Text: "review", Limit: 5}, {Text: "budget", Under: under, Limit: 3}, {Text: fmt.Sprint(step)}} {
			got, want := pages(t, x, tr, q), pages(t, fresh, tr, q)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("step %d, query %+v: %d hits, fresh index %d", step, q, len(got), len(want))
			}
		}
	}
}
