package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	for _, n := range pdsHeapSizes() {
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
	settleSearch(env) // the index, built beside the first searches
	search = liveHeap() - base
	for i := range 40 {
		mustCall(b, env, "insert_after", fmt.Sprintf(`{"parent":%q,"position":"first","text":"mem %d"}`, parent, i))
	}
	tr, _ := env.Engine.Tree(ctx)
	var edit []string
	for _, r := range tr.Roots.From(1) {
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

// BenchmarkServeRSS is the resident memory of a `bulleted-mcp serve`
// process (stdio, defaults: the PDS backend follows the PDS's commit
// stream), on the embedded store and on the PDS backend (the reference
// PDS, a fresh --store directory: a cold getRepo), of the same generated
// outline of about n records: right after its first read_outline answer
// (RSS-read), after three searches (RSS-search), two seconds later
// (RSS-settled), after 40 inserts, 3 batches of 50 and an import
// (RSS-writes), and the peak. Sizes as BenchmarkHeapPDS's.
//
//	BULLETED_SCALE=1 go test ./cmd/bulleted-mcp -run '^$' -bench ServeRSS -benchtime 1x
func BenchmarkServeRSS(b *testing.B) {
	if testing.Short() {
		b.Skip("starts the reference PDS")
	}
	bin := filepath.Join(b.TempDir(), "bulleted-mcp")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("build: %v\n%s", err, out)
	}
	srv := pdstest.Start(b, pdstest.Options{})
	for _, n := range pdsHeapSizes() {
		b.Run(fmt.Sprintf("backend=embedded/n=%d", n), func(b *testing.B) {
			src := seedStore(b, n)
			for b.Loop() {
				// a copy: the rows' writes would grow the seed kept for
				// every benchmark
				b.StopTimer()
				dir := b.TempDir()
				if out, err := exec.Command("cp", "-a", src+"/.", dir).CombinedOutput(); err != nil {
					b.Fatalf("cp: %v %s", err, out)
				}
				b.StartTimer()
				rssRows(b, exec.Command(bin, "serve", "--store", dir))
			}
		})
		b.Run(fmt.Sprintf("backend=pds/n=%d", n), func(b *testing.B) {
			a, _ := seedPDS(b, srv, n)
			for b.Loop() {
				cmd := exec.Command(bin, "serve", "--store", b.TempDir(), "--pds", srv.URL, "--identifier", a.Handle, "--plc", srv.PLCURL)
				cmd.Env = append(os.Environ(), pds.PasswordEnv+"="+a.AppPassword)
				rssRows(b, cmd)
			}
		})
	}
}

// pdsHeapSizes: about 10,000 records; 100,000 with BULLETED_SCALE=1; and
// 249,000 with BULLETED_SCALE=2.
func pdsHeapSizes() []int {
	switch os.Getenv("BULLETED_SCALE") {
	case "":
		return []int{10_000}
	case "2":
		return []int{10_000, 100_000, 249_000}
	}
	return []int{10_000, 100_000}
}

// rssRows starts cmd (a serve over stdio), sends initialize, one
// read_outline and three searches, and reports its resident memory after
// the read, after the searches, two seconds later, and its peak.
func rssRows(b *testing.B, cmd *exec.Cmd) {
	b.StopTimer()
	defer b.StartTimer()
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { in.Close(); cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	// await reads answers until the one with id; a tool error fails
	await := func(id int) {
		deadline := time.Now().Add(3 * time.Minute)
		for sc.Scan() && time.Now().Before(deadline) {
			var msg struct {
				ID     int `json:"id"`
				Result struct {
					IsError bool `json:"isError"`
				} `json:"result"`
				Error json.RawMessage `json:"error"`
			}
			if json.Unmarshal(sc.Bytes(), &msg) == nil && msg.ID == id {
				if msg.Result.IsError || msg.Error != nil {
					b.Fatalf("call %d: %.300s", id, sc.Bytes())
				}
				return
			}
		}
		b.Fatalf("no answer to call %d; stderr:\n%s", id, stderr.String())
	}
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	await(1)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_outline","arguments":{}}}`)
	await(2)
	pid := cmd.Process.Pid
	read := rssOf(pid, "VmRSS:")
	for i, q := range []string{`{"text":"budget","state":"open"}`, `{"text":"review"}`, `{"tags":["plan"]}`} {
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"search","arguments":%s}}`+"\n", 3+i, q)
		await(3 + i)
	}
	search := rssOf(pid, "VmRSS:")
	time.Sleep(2 * time.Second)
	settled := rssOf(pid, "VmRSS:")
	// issue #26's last row: after 40 inserts, 3 batches and an import (at
	// the top level here: this client reads no record keys back)
	id := 6
	call := func(tool, args string) {
		fmt.Fprintf(in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s}}`+"\n", id, tool, args)
		await(id)
		id++
	}
	for i := range 40 {
		call("insert_after", fmt.Sprintf(`{"position":"first","text":"mem %d"}`, i))
	}
	for k := range 3 {
		var ops []string
		for j := range 50 {
			ops = append(ops, fmt.Sprintf(`{"tool":"insert_after","args":{"position":"last","text":"batch %d %d"}}`, k, j))
		}
		call("apply_batch", `{"ops":[`+strings.Join(ops, ",")+`]}`)
	}
	var md strings.Builder
	md.WriteString("# Imported\n")
	for i := range 100 {
		fmt.Fprintf(&md, "- item %d\n  - [ ] child %d\n", i, i)
	}
	call("import_outline", fmt.Sprintf(`{"content":%q}`, md.String()))
	writes, peak := rssOf(pid, "VmRSS:"), rssOf(pid, "VmHWM:")
	b.ReportMetric(float64(read)/(1<<20), "RSS-read-MB")
	b.ReportMetric(float64(search)/(1<<20), "RSS-search-MB")
	b.ReportMetric(float64(settled)/(1<<20), "RSS-settled-MB")
	b.ReportMetric(float64(writes)/(1<<20), "RSS-writes-MB")
	b.ReportMetric(float64(peak)/(1<<20), "peak-MB")
	// every run's rows (the metrics are the last run's): -benchtime Nx
	// measures N servers on one seeding
	b.Logf("RSS MB: read %.1f, search %.1f, settled %.1f, writes %.1f, peak %.1f",
		float64(read)/(1<<20), float64(search)/(1<<20), float64(settled)/(1<<20), float64(writes)/(1<<20), float64(peak)/(1<<20))
}
