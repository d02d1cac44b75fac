package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// BenchmarkHeapPDS is BenchmarkHeapEmbedded's rows for the PDS backend:
// the live heap of `serve --pds` (openBackend: pds.Repo with its read
// cache, budget ledger and journal, the engine over it) on the reference
// PDS, seeded with the same generated outline of about n records, after
// the first read (the tree and one read_outline, as serve answers it: the
// PDS backend does not warm the search index at start, unlike the embedded
// store, whose read row includes it), after the first searches, and after
// 40 inserts, 3 batches and an import. Not counted: the commit-stream
// follower (serve --follow), whose state is not started here. The PDS's
// seeding client is dropped before the base is taken.
//
// Sizes: about 10,000 records always; 100,000 with BULLETED_SCALE=1;
// 249,000 too with BULLETED_SCALE=2 (seeding: about 12 s per 10,000
// records). With BULLETED_HEAPPROFILE=file, a heap profile after the
// writes (compare with BenchmarkHeapEmbedded's: go tool pprof
// -sample_index=inuse_space -diff_base embedded.prof pds.prof).
//
//	BULLETED_SCALE=1 go test ./cmd/bulleted-mcp -run '^$' -bench 'Heap(PDS|Embedded)' -benchtime 1x
func BenchmarkHeapPDS(b *testing.B) {
	if testing.Short() {
		b.Skip("starts the reference PDS")
	}
	srv := pdstest.Start(b, pdstest.Options{})
	sizes := []int{10_000}
	switch os.Getenv("BULLETED_SCALE") {
	case "":
	case "2":
		sizes = append(sizes, 100_000, 249_000)
	default:
		sizes = append(sizes, 100_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			a, recs := seedPDS(b, srv, n)
			var read, search, writes int64
			for b.Loop() {
				read, search, writes = heapRowsWith(b, func() (*tools.Env, string) { return servedPDS(b, srv, a, recs) })
			}
			b.ReportMetric(float64(recs), "records")
			b.ReportMetric(float64(read)/(1<<20), "read-MB")
			b.ReportMetric(float64(search)/(1<<20), "search-MB")
			b.ReportMetric(float64(writes)/(1<<20), "writes-MB")
			b.ReportMetric(float64(writes)/float64(recs), "B/rec")
		})
	}
}

// seedPDS makes an account on srv holding the generated outline of about
// n records (as seedStore: outlinegen.Generate(n*10/11) bullets and their
// notes), written with applyWrites batches by a client dropped afterwards;
// it returns the account and the number of records.
func seedPDS(b *testing.B, srv *pdstest.Server, n int) (*pdstest.Account, int) {
	b.Helper()
	ctx := context.Background()
	a, err := srv.CreateAccount(ctx, fmt.Sprintf("heap%d", time.Now().UnixNano()%1e9))
	if err != nil {
		b.Fatal(err)
	}
	c, err := srv.Client(ctx, a)
	if err != nil {
		b.Fatal(err)
	}
	w := pds.New(c, a.DID)
	ws := outlinegen.Writes(outlinegen.Generate(n*10/11, 1), a.DID.String())
	start := time.Now()
	for rest := ws; len(rest) > 0; {
		k := min(len(rest), store.MaxBatch)
		if _, err := w.Apply(ctx, "", rest[:k]); err != nil {
			b.Fatal(err)
		}
		rest = rest[k:]
	}
	b.Logf("seeded %d records on the reference PDS in %v", len(ws), time.Since(start).Round(time.Second))
	return a, len(ws)
}

// servedPDS is, in process, `serve --pds` just after it answered its first
// read: the backend opened as serve opens it (app password, a fresh --store
// directory, so the first read is a cold getRepo), the tree built and one
// read_outline answered; and the first section's record key.
func servedPDS(b *testing.B, srv *pdstest.Server, a *pdstest.Account, recs int) (*tools.Env, string) {
	b.Helper()
	ctx := context.Background()
	b.Setenv(pds.PasswordEnv, a.AppPassword)
	url, ident, plc := srv.URL, a.Handle, srv.PLCURL
	be, err := openBackend(ctx, b.TempDir(), remoteFlags{pds: &url, identifier: &ident, plc: &plc})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(be.close)
	t, err := be.env.Engine.Tree(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if t.Count < recs*10/11-10 {
		b.Fatalf("the PDS backend read %d bullets of %d records", t.Count, recs)
	}
	if res, err := callTool(ctx, be.env, "read_outline", `{}`); err != nil || res.IsError {
		b.Fatalf("%v %+v", err, res)
	}
	return be.env, firstSection(b, be.env)
}

// heapRowsWith is heapRows over the environment open gives (opened after
// the base heap is taken): the live heap it adds after the first read,
// after three searches, and after 40 inserts, 3 batches and an import.
func heapRowsWith(b *testing.B, open func() (*tools.Env, string)) (read, search, writes int64) {
	b.StopTimer()
	defer b.StartTimer()
	ctx := context.Background()
	base := liveHeap()
	env, parent := open()
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
