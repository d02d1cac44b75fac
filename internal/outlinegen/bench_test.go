package outlinegen_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
)

// benchBullets are the outline sizes of the benchmarks, in bullets: 1k,
// 10k, 100k, and about 249k records (Bullets249k); -short keeps those up to
// 10k. Each size reports its records, and the first call (whatever it
// builds on the way: an index, a path map) as first-ms on its own: the
// timed loop runs after it.
var benchBullets = []int{1_000, 10_000, 100_000, outlinegen.Bullets249k}

func benchSizes(b *testing.B, fn func(b *testing.B, n int)) {
	for _, n := range benchBullets {
		if testing.Short() && n > 10_000 {
			continue
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { fn(b, n) })
	}
}

// extras are metrics a benchmark reports after its loop (the first call
// of b.Loop clears those reported before it): defer x.report(b).
type extras map[string]float64

func (x extras) report(b *testing.B) {
	for k, v := range x {
		b.ReportMetric(v, k)
	}
}

// generate is outlinegen.Generate(n, 1), its record count kept in x.
func generate(x extras, n int) []store.Record {
	recs := outlinegen.Generate(n, 1)
	x["records"] = float64(len(recs))
	return recs
}

// first times fn, the first call, kept in x as first-ms.
func first(x extras, fn func()) {
	start := time.Now()
	fn()
	x["first-ms"] = float64(time.Since(start).Microseconds()) / 1000
}

// BenchmarkSearch: a text query on a warm index (first page of 20 hits;
// "budget" is in about one bullet in seven).
func BenchmarkSearch(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		xm := extras{}
		defer xm.report(b)
		tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c", Records: generate(xm, n)})
		x := search.New()
		q := search.Query{Text: "budget", State: "open", Limit: 20}
		first(xm, func() { // the index built, then searched
			x.Update(tr)
			if _, err := x.Search(tr, q); err != nil {
				b.Fatal(err)
			}
		})
		b.ResetTimer()
		for b.Loop() {
			if _, err := x.Search(tr, q); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSearchRare: a query matching almost nothing (a full scan).
func BenchmarkSearchRare(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		xm := extras{}
		defer xm.report(b)
		tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c", Records: generate(xm, n)})
		x := search.New()
		q := search.Query{Text: "no such words here", Limit: 20}
		first(xm, func() {
			x.Update(tr)
			if _, err := x.Search(tr, q); err != nil {
				b.Fatal(err)
			}
		})
		b.ResetTimer()
		for b.Loop() {
			if _, err := x.Search(tr, q); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReadPage: a warm read_outline page (500 rows, depth 3, text),
// and a page deep inside a 2,000-child level by cursor.
func BenchmarkReadPage(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		xm := extras{}
		defer xm.report(b)
		tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c", Records: generate(xm, n)})
		page := func() {
			v, err := view.Read(tr, nil, view.Options{Depth: 3, Limit: 500})
			if err != nil {
				b.Fatal(err)
			}
			v.Enrich(tr, nil)
			_ = v.Text(false)
		}
		first(xm, page)
		b.ResetTimer()
		for b.Loop() {
			page()
		}
	})
}

// BenchmarkPlanInsert: planning a one-bullet insert (dry run) on a warm
// engine.
func BenchmarkPlanInsert(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		xm := extras{}
		defer xm.report(b)
		e := outline.New(outlinegen.NewMemory(generate(xm, n)))
		ctx := context.Background()
		tr, _ := e.Tree(ctx)
		parent := tr.Roots.At(3).Key()
		plan := func() {
			if _, err := e.DoFunc(ctx, true, func(p *outline.Planner) error {
				return intent.Insert{Pos: outline.Position{Parent: parent}, Nodes: []intent.NewNode{{Text: "one"}}}.Plan(p)
			}); err != nil {
				b.Fatal(err)
			}
		}
		first(xm, plan) // after the tree's read: what the first write plans besides
		b.ResetTimer()
		for b.Loop() {
			plan()
		}
	})
}

// BenchmarkIndexUpdate: bringing the index to a commit that changed one
// bullet (the tree brought forward as the engine does, Tree.Next).
func BenchmarkIndexUpdate(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		xm := extras{}
		defer xm.report(b)
		recs := generate(xm, n)
		t1 := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Records: recs})
		r := t1.Roots.At(3).Children.At(0).Rec
		v := r.Value.Map()
		v["text"] = "changed budget review"
		t2 := t1.Next("c2", "c2", []store.Record{{Collection: r.Collection, RKey: r.RKey, CID: "changed", Value: store.MustValue(v)}})
		x := search.New()
		first(xm, func() { x.Update(t1) }) // the index built
		b.ResetTimer()
		i := 0
		for b.Loop() {
			if i%2 == 0 {
				x.Update(t2)
			} else {
				x.Update(t1)
			}
			i++
		}
	})
}

// BenchmarkRebuildOneChanged: the tree refresh after a commit that changed
// one bullet (what every write paid before incremental trees).
func BenchmarkRebuildOneChanged(b *testing.B) {
	benchSizes(b, func(b *testing.B, n int) {
		xm := extras{}
		defer xm.report(b)
		recs := generate(xm, n)
		tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c", Records: recs})
		b.ResetTimer()
		for b.Loop() {
			outline.Rebuild(&store.Snapshot{DID: outlinegen.DID, Commit: "d", Records: recs}, tr)
		}
	})
}

// BenchmarkDryRunDeleteSubtree: a dry-run delete of a fixed 10,001-bullet
// subtree inside outlines of growing size: its cost should follow the
// subtree, not the outline. The largest outline is 217,000 bullets, about
// 249,000 records with their notes and the subtree (under the 250,000
// bound); records reports the outline's before the subtree.
func BenchmarkDryRunDeleteSubtree(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 217_000} {
		if testing.Short() && n > 10_000 {
			continue
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { dryRunDeleteSubtree(b, n) })
	}
}

func dryRunDeleteSubtree(b *testing.B, n int) {
	xm := extras{}
	defer xm.report(b)
	{
		ctx := context.Background()
		e := outline.New(outlinegen.NewMemory(generate(xm, n)))
		out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "root"}}}.Plan(p)
		})
		if err != nil {
			b.Fatal(err)
		}
		root := out.Plan.Created[0].RKey
		for range 50 {
			ns := make([]intent.NewNode, 200)
			for j := range ns {
				ns[j] = intent.NewNode{Text: "leaf"}
			}
			if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
				return (intent.Insert{Pos: outline.Position{Parent: root}, Nodes: ns}).Plan(p)
			}); err != nil {
				b.Fatal(err)
			}
		}
		dry := func() {
			out, err := e.DoFunc(ctx, true, func(p *outline.Planner) error { return intent.Delete{Node: root, Children: "subtree"}.Plan(p) })
			if err != nil || len(out.Plan.Writes) != 10001 {
				b.Fatal(err)
			}
		}
		first(xm, dry)
		b.ResetTimer()
		for b.Loop() {
			dry()
		}
	}
}
