package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
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
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	base := liveHeap()
	env, parent := servedEnv(b, n, true)
	read = liveHeap() - base
	for _, q := range []string{`{"text":"budget","state":"open"}`, `{"text":"review"}`, `{"tags":["plan"]}`} {
		if res, err := callTool(ctx, env, "search", q); err != nil || res.IsError {
			b.Fatalf("%v %+v", err, res)
		}
	}
	search = liveHeap() - base
	for i := range 40 {
		mustCall(b, env, "insert_after", fmt.Sprintf(`{"parent":%q,"position":"first","text":"mem %d"}`, parent, i))
	}
	tr, _ := env.Engine.Tree(ctx)
	var edit []string
	for _, r := range tr.Roots[1:] {
		for _, it := range outline.Subtree(r) {
			if len(edit) < 75 {
				edit = append(edit, it.Key())
			}
		}
	}
	for k := range 3 {
		var ops []string
		for j := range 25 {
			ops = append(ops, fmt.Sprintf(`{"tool":"insert_after","args":{"parent":%q,"position":"last","text":"batch %d %d"}}`, parent, k, j))
			ops = append(ops, fmt.Sprintf(`{"tool":"update_node","args":{"node":%q,"text":"edited %d %d"}}`, edit[k*25+j], k, j))
		}
		mustCall(b, env, "apply_batch", `{"ops":[`+strings.Join(ops, ",")+`]}`)
	}
	var md strings.Builder
	md.WriteString("# Imported\n")
	for i := range 100 {
		fmt.Fprintf(&md, "- item %d\n  - [ ] child %d\n", i, i)
	}
	mustCall(b, env, "import_outline", fmt.Sprintf(`{"content":%q}`, md.String()))
	writes = liveHeap() - base
	if f := os.Getenv("BULLETED_HEAPPROFILE"); f != "" {
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		pprof.Lookup("heap").WriteTo(out, 0)
		out.Close()
	}
	runtime.KeepAlive(env)
	return read, search, writes
}

func mustCall(b *testing.B, env *tools.Env, name, args string) {
	res, err := callTool(context.Background(), env, name, args)
	if err != nil || res.IsError {
		b.Fatalf("%s: %v %+v", name, err, res)
	}
}
