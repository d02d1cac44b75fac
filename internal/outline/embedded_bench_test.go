package outline_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// seededStore is the embedded store of about n generated records that
// cmd/bulleted-mcp's scale benchmarks seed (the same directory, made here
// if they have not: minutes at 249k records).
func seededStore(b *testing.B, n int) string {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("bulleted-scale-records-v2-%d", n))
	if _, err := os.Stat(filepath.Join(dir, "HEAD")); err == nil {
		return dir
	}
	os.RemoveAll(dir)
	l, err := store.OpenLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ws := outlinegen.Writes(outlinegen.Generate(n*10/11, 1), l.DID().String())
	for len(ws) > 0 {
		k := min(len(ws), store.MaxBatch)
		if _, err := l.Apply(context.Background(), "", ws[:k]); err != nil {
			b.Fatal(err)
		}
		ws = ws[k:]
	}
	return dir
}

// BenchmarkDryRunDeleteSubtreeEmbedded: a dry-run delete of a 10,001-bullet
// subtree on serve's embedded store (store.Local), in outlines of 10k, 100k
// and 249k records, after a restart and serve's warm-up (the tree read and
// Local.Prepare, as tools.Env.Warm does): first-ms is the first call, the
// loop the later ones. (outlinegen.Memory, which BenchmarkDryRunDeleteSubtree
// uses, keeps no deltas: there the engine reads and rebuilds the whole
// outline on its first call after a write, which serve's stores do not.)
func BenchmarkDryRunDeleteSubtreeEmbedded(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 249_000} {
		if testing.Short() && n > 10_000 {
			continue
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { dryRunDeleteEmbedded(b, n) })
	}
}

func dryRunDeleteEmbedded(b *testing.B, n int) {
	ctx := context.Background()
	dir := b.TempDir()
	if out, err := exec.Command("cp", "-a", seededStore(b, n)+"/.", dir).CombinedOutput(); err != nil {
		b.Fatalf("cp: %v %s", err, out)
	}
	open := func() (*store.Local, *outline.Engine) {
		l, err := store.OpenLocal(dir)
		if err != nil {
			b.Fatal(err)
		}
		e, err := outline.Open(l, outline.Options{Operations: filepath.Join(dir, "ops")})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Tree(ctx); err != nil { // serve's warm-up
			b.Fatal(err)
		}
		if err := l.Prepare(ctx); err != nil {
			b.Fatal(err)
		}
		return l, e
	}
	l, e := open()
	tr, err := e.Tree(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if tr.Count+10_001 > 250_000 { // room for the subtree under the record bound: a section goes
		for r := range tr.Roots.Items() {
			if k := len(outline.Subtree(r)); k >= tr.Count+10_500-250_000 && k < 40_000 {
				if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Delete{Node: r.Key(), Children: "subtree"}).Plan(p) }); err != nil {
					b.Fatal(err)
				}
				break
			}
		}
	}
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
	l.Close()
	l, e = open() // a restart: the subtree is there from the start
	defer l.Close()
	tr, _ = e.Tree(ctx)
	records := tr.Count
	dry := func() {
		out, err := e.DoFunc(ctx, true, func(p *outline.Planner) error { return intent.Delete{Node: root, Children: "subtree"}.Plan(p) })
		if err != nil || len(out.Plan.Writes) != 10001 {
			b.Fatal(err)
		}
	}
	start := time.Now()
	dry()
	first := float64(time.Since(start).Microseconds()) / 1000
	b.ResetTimer()
	for b.Loop() {
		dry()
	}
	b.ReportMetric(first, "first-ms")
	b.ReportMetric(float64(records), "records")
}
