package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// BenchmarkHeapEmbedded is, in process, the live heap of a served embedded
// store of n records at the rows of issue #26's table: after the first
// read, after the first search, and after 40 inserts, 3 batches and an
// import (reported as read-MB, search-MB, writes-MB, and the last per
// record as B/rec). The figure is the heap after a collection (HeapAlloc),
// what the engine, the store and the search index keep; the process's RSS
// is that plus the collector's room (GOGC) and the runtime. With
// BULLETED_HEAPPROFILE=file, a heap profile after the writes is written
// there (go tool pprof -sample_index=inuse_space).
//
//	BULLETED_SCALE=1 go test ./cmd/bulleted-mcp -run '^$' -bench HeapEmbedded -benchtime 1x
func BenchmarkHeapEmbedded(b *testing.B) {
	for _, n := range firstSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var read, search, writes int64
			for b.Loop() {
				read, search, writes = heapRows(b, n)
			}
			b.ReportMetric(float64(read)/(1<<20), "read-MB")
			b.ReportMetric(float64(search)/(1<<20), "search-MB")
			b.ReportMetric(float64(writes)/(1<<20), "writes-MB")
			b.ReportMetric(float64(writes)/float64(n), "B/rec")
		})
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func heapRows(b *testing.B, n int) (read, search, writes int64) {
	return heapRowsWith(b, func() (*tools.Env, string) { return servedEnv(b, n, true) })
}

func mustCall(b *testing.B, env *tools.Env, name, args string) {
	res, err := callTool(context.Background(), env, name, args)
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %+v", name, err, res)
	}
}

// reviewMemory is BenchmarkReviewPath's memory rows, called by reviewRows
// at "setup" (its seeding done and given back), at "reads" (after the
// first searches: the search index, built in the background beside them,
// is waited for, so that its build is not counted in the next calls' CPU)
// and at "end" (the workload done, the last give-back over): at setup the process's peak RSS is reset
// (/proc/self/clear_refs), so that peak-MB is the workload's peak, not the
// setup's; at the end it reports that peak, the anonymous and file-backed
// parts of the RSS, and the runtime's view of its memory (the live heap,
// the heap's free but unreturned pages, the collector's goal). With
// BULLETED_HEAPPROFILE=file, a heap profile after the workload is written
// there (go tool pprof -sample_index=inuse_space).
func reviewMemory(b *testing.B, env *tools.Env, at string) {
	switch at {
	case "reads":
		settleSearch(env)
	case "setup":
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			b.Logf("peak RSS not reset (%v): peak-MB includes the setup", err)
		}
	case "end":
		mb := func(n int64) float64 { return float64(n) / (1 << 20) }
		peak, anon, file := rssOf(os.Getpid(), "VmHWM:"), rssOf(os.Getpid(), "RssAnon:"), rssOf(os.Getpid(), "RssFile:")
		names := []string{"/memory/classes/total:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/objects:bytes",
			"/memory/classes/heap/unused:bytes", "/memory/classes/heap/free:bytes", "/gc/heap/goal:bytes"}
		s := make([]metrics.Sample, len(names))
		for i, n := range names {
			s[i].Name = n
		}
		metrics.Read(s)
		v := func(i int) float64 { return mb(int64(s[i].Value.Uint64())) }
		live := liveHeap() // the engine's tree and the search index kept alive below
		b.ReportMetric(mb(peak), "peak-MB")
		b.ReportMetric(mb(live), "live-MB")
		b.Logf("memory after the workload: peak RSS %.0f MB (since the setup), RSS anonymous %.0f MB + file %.0f MB; runtime: %.0f MB mapped less %.0f MB released: heap objects %.0f MB (live after a collection: %.0f MB), unused in spans %.0f MB, free %.0f MB; heap goal %.0f MB",
			mb(peak), mb(anon), mb(file), v(0), v(1), v(2), mb(live), v(3), v(4), v(5))
		if f := os.Getenv("BULLETED_HEAPPROFILE"); f != "" {
			runtime.GC()
			out, err := os.Create(f)
			if err != nil {
				b.Fatal(err)
			}
			pprof.Lookup("heap").WriteTo(out, 0)
			out.Close()
		}
		runtime.KeepAlive(env)
	}
}

// BenchmarkFirstSearchCold is the first search right after start, as serve
// runs it (issue 41): the embedded store opened, the tree built, the first
// read_outline answered, serve's warm-up started in the background (the
// load's memory given back, then tools.Env.WarmUp), and at once the first
// search, not waiting for the warm-up (first-ms, wall time; first-cpu-ms,
// this process's CPU during it, the warm-up's included); then, the warm-up
// over, the median of warm searches (warm-ms) and first-ms/warm-ms.
// Target: the first ≤ 10× a warm one.
//
//	BULLETED_SCALE=1 go test ./cmd/bulleted-mcp -run '^$' -bench FirstSearchCold -benchtime 1x
func BenchmarkFirstSearchCold(b *testing.B) {
	for _, n := range firstSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			ctx := context.Background()
			qs := []string{`{"text":"budget","state":"open"}`, `{"text":"review"}`, `{"tags":["plan"]}`}
			var firsts, warms []float64
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				l, err := store.OpenLocal(seedStore(b, n))
				if err != nil {
					b.Fatal(err)
				}
				e, err := newEngine(l, b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				env := &tools.Env{Engine: e}
				if _, err := e.Tree(ctx); err != nil {
					b.Fatal(err)
				}
				mustCall(b, env, "read_outline", `{}`)
				warmed := make(chan struct{})
				go func() { // as serve's
					defer close(warmed)
					debug.FreeOSMemory()
					env.WarmUp(ctx, io.Discard)
					debug.FreeOSMemory()
				}()
				start, c0 := time.Now(), cpuNow()
				mustCall(b, env, "search", qs[0])
				firsts = append(firsts, float64(time.Since(start).Microseconds())/1000)
				cpu += cpuNow() - c0
				<-warmed
				for i := range 9 {
					start := time.Now()
					mustCall(b, env, "search", qs[i%3])
					warms = append(warms, float64(time.Since(start).Microseconds())/1000)
				}
				l.Close()
				b.StartTimer()
			}
			slices.Sort(firsts)
			slices.Sort(warms)
			first, warm := firsts[len(firsts)/2], warms[len(warms)/2]
			b.ReportMetric(first, "first-ms")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(firsts)), "first-cpu-ms")
			b.ReportMetric(warm, "warm-ms")
			b.ReportMetric(first/warm, "first/warm")
		})
	}
}

// settleSearch waits for the search index's background build (a cold
// index's first searches walk the tree and build it beside them).
func settleSearch(env *tools.Env) {
	if env.Search == nil {
		return
	}
	if tr, err := env.Engine.Tree(context.Background()); err == nil {
		env.Search.For(tr.DID.String()).Settle()
	}
}
