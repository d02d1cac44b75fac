package pds_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/pds"
	"github.com/bulleted-mcp/bulleted-mcp/store"
)

// seedGenerated writes a generated outline of about n bullets (and its
// notes) into r's repository with applyWrites batches of 200, and returns
// how many records it wrote.
func seedGenerated(tb testing.TB, r *pds.Repo, n int) int {
	tb.Helper()
	ctx := context.Background()
	did := r.DID().String()
	recs := outlinegen.Generate(n, 1)
	ws := make([]store.Write, 0, len(recs))
	for _, rec := range recs {
		v := map[string]any{}
		for k, x := range rec.Value {
			if s, ok := x.(string); ok {
				x = strings.ReplaceAll(s, "at://"+outlinegen.DID+"/", "at://"+did+"/")
			}
			v[k] = x
		}
		ws = append(ws, store.Write{Op: store.Create, Collection: rec.Collection, RKey: rec.RKey, Value: v})
	}
	start := time.Now()
	for rest := ws; len(rest) > 0; {
		k := min(len(rest), store.MaxBatch)
		if _, err := r.Apply(ctx, "", rest[:k]); err != nil {
			tb.Fatal(err)
		}
		rest = rest[k:]
	}
	tb.Logf("seeded %d records in %v", len(ws), time.Since(start).Round(time.Millisecond))
	return len(ws)
}

// insertSizes are the repository sizes of BenchmarkInsertPDS: 1k and 10k
// bullets always, 100k with BULLETED_SCALE=1 (seeding takes minutes).
func insertSizes() []int {
	if os.Getenv("BULLETED_SCALE") == "" {
		return []int{1_000, 10_000}
	}
	return []int{1_000, 10_000, 100_000}
}

// BenchmarkInsertPDS is a one-bullet insert through the engine on the PDS
// backend, on generated outlines: each operation reads the commit the
// previous one made (the engine's tree brought forward), plans, and commits
// with applyWrites. Its cost should not grow with the repository.
//
//	BULLETED_SCALE=1 go test ./pds -run '^$' -bench InsertPDS -benchtime 40x
func BenchmarkInsertPDS(b *testing.B) {
	ctx := context.Background()
	for _, n := range insertSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			r := newRepo(b)
			recs := seedGenerated(b, r, n)
			e := outline.New(r)
			t, err := e.Tree(ctx)
			if err != nil {
				b.Fatal(err)
			}
			parent := t.Roots[0].Key()
			insert := func(i int) {
				if _, err := e.Do(ctx, false, func(p *outline.Planner) error {
					return p.Insert(outline.Position{Parent: parent, Where: "first"}, []outline.NewNode{{Text: fmt.Sprint("bench ", i)}})
				}); err != nil {
					b.Fatal(err)
				}
			}
			insert(0) // the first read after a write
			cars, diffs, heads := r.Stats.CARs.Load(), r.Stats.Diffs.Load(), r.Stats.Heads.Load()
			i := 0
			b.ResetTimer()
			for b.Loop() {
				i++
				insert(i)
			}
			b.StopTimer()
			b.ReportMetric(float64(recs), "records")
			b.ReportMetric(float64(r.Stats.CARs.Load()-cars), "full-CARs")
			b.ReportMetric(float64(r.Stats.Diffs.Load()-diffs)/float64(i), "diffs/op")
			b.ReportMetric(float64(r.Stats.Heads.Load()-heads)/float64(i), "heads/op")
		})
	}
}
