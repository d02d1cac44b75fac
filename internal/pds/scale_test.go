package pds_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
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
		for k, x := range rec.Value.Map() {
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
// bullets always, 100k and 226k (about 249,000 records with their notes; the
// app bounds a repository at 250,000) with BULLETED_SCALE=1 (seeding takes
// minutes).
func insertSizes() []int {
	if os.Getenv("BULLETED_SCALE") == "" {
		return []int{1_000, 10_000}
	}
	return []int{1_000, 10_000, 100_000, 226_000}
}

// BenchmarkInsertPDS measures, on generated outlines on the reference PDS:
//
//   - insert: a one-bullet insert through the engine; each operation reads
//     the commit the previous one made (the engine's tree brought forward),
//     plans, and commits with applyWrites;
//   - read-after-other: the engine's tree after another client of the same
//     account changed one bullet's text (its write is not timed).
//
// Neither should cost more with a larger repository.
//
//	BULLETED_SCALE=1 go test ./internal/pds -run '^$' -bench InsertPDS -benchtime 60x
func BenchmarkInsertPDS(b *testing.B) {
	ctx := context.Background()
	for _, n := range insertSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			a := pdstest.NewAccount(b, srv)
			r := pdstest.Login(b, srv, a, b.TempDir(), nil)
			other := pdstest.Login(b, srv, a, b.TempDir(), nil)
			recs := seedGenerated(b, r, n)
			e := outline.New(r)
			t, err := e.Tree(ctx)
			if err != nil {
				b.Fatal(err)
			}
			parent := t.Roots.At(0).Key()
			insert := func(i int) {
				if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
					return intent.Insert{Pos: outline.Position{Parent: parent, Where: "first"}, Nodes: []intent.NewNode{{Text: fmt.Sprint("bench ", i)}}}.Plan(p)
				}); err != nil {
					b.Fatal(err)
				}
			}
			insert(0) // the first read after a write
			measure := func(b *testing.B, op func(i int)) {
				cars, diffs, heads := r.Stats.CARs.Load(), r.Stats.Diffs.Load(), r.Stats.Heads.Load()
				self, pds := cpuTimes()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					op(i)
				}
				b.StopTimer()
				self2, pds2 := cpuTimes()
				// CPU time of this process (the client, the other client's
				// writes included) and of the reference PDS (child
				// processes): less sensitive than the wall clock to other
				// load on the machine
				b.ReportMetric(float64(self2-self)/float64(time.Millisecond)/float64(b.N), "client-cpu-ms/op")
				b.ReportMetric(float64(pds2-pds)/float64(time.Millisecond)/float64(b.N), "pds-cpu-ms/op")
				b.ReportMetric(float64(recs), "records")
				b.ReportMetric(float64(r.Stats.CARs.Load()-cars), "full-CARs")
				b.ReportMetric(float64(r.Stats.Diffs.Load()-diffs)/float64(b.N), "diffs/op")
				b.ReportMetric(float64(r.Stats.Heads.Load()-heads)/float64(b.N), "heads/op")
			}
			b.Run("insert", func(b *testing.B) {
				measure(b, func(i int) { insert(i + 1) })
			})
			edited := t.Roots.At(1).Rec
			b.Run("read-after-other", func(b *testing.B) {
				measure(b, func(i int) {
					b.StopTimer()
					v := map[string]any{}
					for k, x := range edited.Value.Map() {
						v[k] = x
					}
					v["text"] = fmt.Sprint("edited by another client ", i)
					if _, err := other.Apply(ctx, "", []store.Write{{Op: store.Update, Collection: edited.Collection, RKey: edited.RKey, Value: v}}); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					t, err := e.Tree(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if t.Nodes.Get(edited.RKey).Str("text") != v["text"] {
						b.Fatal("the edit is not in the tree")
					}
				})
			})
		})
	}
}

// cpuTimes is the CPU time (user and system) this process and its child
// processes (the reference PDS) have used (Linux).
func cpuTimes() (self, children time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := strconv.Itoa(os.Getpid())
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime stime (fields 14 and 15)
		i := strings.LastIndexByte(string(raw), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(raw[i+1:]))
		if len(f) < 13 || f[1] != me {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		children += time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
	}
	return self, children
}
