package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// BenchmarkReviewPath measures the review path against the write it
// reviews, through the tools (the layer an agent calls), on the generated
// outline of n records in the embedded store: server CPU (this process's)
// per call of
//
//   - a one-bullet insert_after and its dry run (30 of each);
//   - sort_children of 2,000 children: its dry run, the sort, its undo;
//   - move_node of a run of 5,001 siblings and its undo;
//   - a dry-run delete of a 10,001-bullet subtree, the delete and its undo;
//
// and the live heap after the workload. Targets (issue 38): a dry run ≤ 2×
// its write; undo ≤ 2× the write it undoes; the 10k dry-run delete ≤ 30 ms.
//
//	go test ./cmd/bulleted-mcp -run '^$' -bench ReviewPath -benchtime 1x
//	BULLETED_SCALE=1 … (10k and 100k); BULLETED_SCALE=2 … (and 249k)
func BenchmarkReviewPath(b *testing.B) {
	for _, n := range pdsHeapSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				reviewRows(b, n, func(seed int) *tools.Env { return scaleEnv(b, seed) })
			}
		})
	}
}

// BenchmarkReviewPathPDS is BenchmarkReviewPath's workload on the PDS
// backend, as `serve --pds` runs it (openBackend: the read cache, the
// budget ledger, the journal; the commit stream followed, as serve does by
// default), against the reference PDS seeded with the same generated
// outline: its CPU per call (this process's; the PDS's own is not
// counted) and its memory rows. Target (issue 38): RSS after the workload
// within 1.2× the embedded store's at the same size. Seeding the PDS takes
// about 12 s per 10,000 records.
//
//	BULLETED_SCALE=2 go test ./cmd/bulleted-mcp -run '^$' -bench 'ReviewPathPDS/n=249000$' -benchtime 1x
func BenchmarkReviewPathPDS(b *testing.B) {
	if testing.Short() {
		b.Skip("starts the reference PDS")
	}
	srv := pdstest.Start(b, pdstest.Options{})
	for _, n := range pdsHeapSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				reviewRows(b, n, func(seed int) *tools.Env {
					a, recs := seedPDS(b, srv, seed)
					env, _ := servedPDS(b, srv, a, recs)
					r, ok := env.Engine.Repo.(*pds.Repo)
					if !ok {
						b.Fatalf("the PDS backend is a %T", env.Engine.Repo)
					}
					// the workload writes about 100,000 points (the 10k delete
					// and its undo alone 60,000): more than a real PDS allows
					// in a day, which this reference PDS does not enforce
					if r.Budget != nil {
						r.Budget.Limit, r.Budget.DayLimit = 1<<30, 1<<30
					}
					r.Directory = pds.Directory(srv.PLCURL)
					fctx, stop := context.WithCancel(context.Background())
					followed := make(chan struct{})
					b.Cleanup(func() { stop(); <-followed })
					go func() {
						defer close(followed)
						r.Follow(fctx, func() { _, _ = env.Engine.Tree(fctx) }, func(error) {})
					}()
					return env
				})
			}
		})
	}
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reviewRows runs the review workload on the environment open gives for a
// seed of about that many records.
func reviewRows(b *testing.B, n int, open func(seed int) *tools.Env) {
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	// the lists below add 17,000 bullets: the largest size is seeded with
	// fewer, so that it is 249,000 records with them (the bound is 250,000)
	seed := n
	if n+18_000 > 249_000 {
		seed = 249_000 - 18_000
	}
	env := open(seed)
	env.GiveBack = debug.FreeOSMemory // as serve sets it
	rng := rand.New(rand.NewPCG(1, 2))
	mk := func(text string, kids int) string {
		ns := make([]intent.NewNode, kids)
		for i := range ns {
			ns[i] = intent.NewNode{Text: fmt.Sprintf("%s %08d", text, rng.IntN(1e8))}
		}
		out, err := env.Engine.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: text, Children: ns}}}, false)
		if err != nil {
			b.Fatal(err)
		}
		return out.Plan.Created[0].RKey
	}
	sortme, movefrom, moveto, delme := mk("sort me", 2000), mk("move from", 5001), mk("move to", 0), mk("delete me", 10_000)
	section := firstSection(b, env)
	debug.FreeOSMemory() // the setup's peak is not the workload's
	reviewMemory(b, env, "setup")
	// BULLETED_MEMLIMIT=MiB: a Go soft memory limit for the workload (the
	// experiment of docs/benchmarks.md, "Memory"; serve sets none)
	if mib, err := strconv.Atoi(os.Getenv("BULLETED_MEMLIMIT")); err == nil && mib > 0 {
		defer debug.SetMemoryLimit(debug.SetMemoryLimit(int64(mib) << 20))
	}

	call := func(name string, args map[string]any) time.Duration {
		raw, _ := json.Marshal(args)
		for env.Settling() {
			runtime.Gosched() // the last big write's give-back is not this call's
		}
		t0 := cpuTime()
		res, err := callTool(ctx, env, name, string(raw))
		d := cpuTime() - t0
		if err != nil || res.IsError {
			b.Fatalf("%s %s: %v %v", name, raw, err, res.Content)
		}
		return d
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	// the reads first, as an agent would: the outline, three searches
	call("read_outline", map[string]any{})
	for _, q := range []map[string]any{{"text": "budget", "state": "open"}, {"text": "review"}, {"tags": []string{"plan"}}} {
		call("search", q)
	}
	reviewMemory(b, env, "reads")
	rssRead := selfRSS()
	var write, dry time.Duration
	for i := range 30 {
		args := map[string]any{"parent": section, "position": "first", "text": fmt.Sprintf("review %d", i)}
		write += call("insert_after", args)
		args["dry_run"] = true
		dry += call("insert_after", args)
	}
	b.ReportMetric(ms(write/30), "insert-ms")
	b.ReportMetric(ms(dry/30), "insert-dry-ms")
	b.ReportMetric(float64(dry)/float64(write), "dry/insert")
	rssDry := selfRSS()

	sortDry := call("sort_children", map[string]any{"node": sortme, "by": "text", "dry_run": true})
	sort := call("sort_children", map[string]any{"node": sortme, "by": "text"})
	sortUndo := call("undo", map[string]any{})
	b.ReportMetric(ms(sort), "sort-ms")
	b.ReportMetric(float64(sortDry)/float64(sort), "sort-dry/sort")
	b.ReportMetric(float64(sortUndo)/float64(sort), "sort-undo/sort")

	tr, err := env.Engine.Tree(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var keys []string
	for it := range tr.Nodes.Get(movefrom).Children.Items() {
		keys = append(keys, it.Key())
	}
	move := call("move_node", map[string]any{"nodes": keys, "parent": moveto})
	moveUndo := call("undo", map[string]any{})
	b.ReportMetric(ms(move), "move5001-ms")
	b.ReportMetric(float64(moveUndo)/float64(move), "move-undo/move")

	delDry := call("delete_node", map[string]any{"node": delme, "children": "subtree", "dry_run": true})
	del := call("delete_node", map[string]any{"node": delme, "children": "subtree"})
	// BULLETED_UNDOPROFILE=file: a CPU profile of this undo alone
	var prof *os.File
	if path := os.Getenv("BULLETED_UNDOPROFILE"); path != "" {
		if prof, err = os.Create(path); err != nil {
			b.Fatal(err)
		}
		if err := pprof.StartCPUProfile(prof); err != nil {
			b.Fatal(err)
		}
	}
	delUndo := call("undo", map[string]any{})
	if prof != nil {
		pprof.StopCPUProfile()
		prof.Close()
	}
	b.ReportMetric(ms(delDry), "delete10k-dry-ms")
	b.ReportMetric(ms(del), "delete10k-ms")
	b.ReportMetric(float64(delUndo)/float64(del), "delete-undo/delete")

	for env.Settling() {
		runtime.Gosched() // the last give-back, in the background as in serve
	}
	rssEnd := selfRSS()
	reviewMemory(b, env, "end")
	mb := func(n int64) float64 { return float64(n) / (1 << 20) }
	b.ReportMetric(mb(rssRead), "rss-read-MB")
	b.ReportMetric(mb(rssDry), "rss-30dry-MB")
	b.ReportMetric(mb(rssEnd), "rss-end-MB")
	runtime.GC()
	b.ReportMetric(mb(liveHeap()), "heap-MB")
	b.Logf("n=%d: RSS after the reads %.0f MB, after 30 inserts and 30 dry runs %.0f MB, after the sort, move, delete and their undos %.0f MB (the whole test process: run one size alone, -bench 'ReviewPath/n=N$')", n, mb(rssRead), mb(rssDry), mb(rssEnd))
}

// selfRSS is this process's resident set (bytes), 0 when unknown.
func selfRSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	var size, res int64
	fmt.Sscan(string(b), &size, &res)
	return res * int64(os.Getpagesize())
}
