package main

import (
	"context"
	"fmt"
	"runtime"
	"testing"

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
