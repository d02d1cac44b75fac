package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// BenchmarkServeCost is an insert as the user meets it: an MCP client
// (mcp-go, in process, over serve's stdio) calls insert_after on `serve
// --pds` (the reference PDS; the budget ledger and the operations journal
// on disk, the ledger holding 1,000 writes of the hour before the first;
// the commit stream followed, serve's default), against a bare
// applyWrites creating the same record on a twin account seeded alike,
// interleaved (each first every other time), medians:
//
//   - records=10k, records=50k: the generated outline of about 10,000
//     (50,000) records, inserting first under its first section;
//   - list=50k: one parent with 50,000 children, inserting first among them;
//   - list=50k,middle: the same list, each insert after another child in
//     its middle (the 25,000th, the 25,002nd, …: a fresh gap each time, as
//     inserts spread over a list land; repeated inserts at one place also
//     respace a neighbour now and then to keep the keys short);
//   - then as many inserts "after another writer": the account's app
//     creates a record just before each (the nobody-else inserts come
//     first: a writer active in the last 30 s makes a write ask first).
//
// The inserts start once serve's followed commit stream has caught up
// and settled (2 s after it connects; until then a read says it asked the
// PDS, and a write asks for the head first): a session past its first
// seconds, as an agent's first write after its first read meets it.
//
// With BULLETED_SERVECOST_PROFILE=file, a CPU profile of the inserts.
//
// Reported: insert-ms, bare-ms, ratio (ours over bare), cpu-ms (this
// process's CPU per insert: serve and the client, the PDS not counted),
// points (the budget's points charged per insert: 3 for the one create;
// more when a write was refused and sent again, the refused one counted
// by the PDS), and the same with -other for the inserts after another
// writer.
//
//	go test ./cmd/bulleted-mcp -run '^$' -bench ServeCost -benchtime 15x
func BenchmarkServeCost(b *testing.B) {
	if testing.Short() {
		b.Skip("starts the reference PDS")
	}
	srv := pdstest.Start(b, pdstest.Options{})
	for _, shape := range []string{"records=10k", "records=50k", "list=50k", "list=50k,middle"} {
		b.Run(shape, func(b *testing.B) {
			var a, twin *pdstest.Account
			var place func(i int) map[string]any // nil: first under the first root
			switch shape {
			case "records=10k":
				a, _ = seedPDS(b, srv, 10_000)
				twin, _ = seedPDS(b, srv, 10_000)
			case "records=50k":
				a, _ = seedPDS(b, srv, 50_000)
				twin, _ = seedPDS(b, srv, 50_000)
			case "list=50k,middle":
				a, twin = seedList(b, srv, 50_000), seedList(b, srv, 50_000)
				place = func(i int) map[string]any {
					return map[string]any{"parent": "p", "after": fmt.Sprintf("3l%011d", 25_000+2*i)}
				}
			default:
				a, twin = seedList(b, srv, 50_000), seedList(b, srv, 50_000)
			}
			serveCost(b, srv, a, twin, place)
		})
	}
}

// seedList makes an account holding one parent ("p") with n children.
func seedList(b *testing.B, srv *pdstest.Server, n int) *pdstest.Account {
	b.Helper()
	ctx := context.Background()
	a, err := srv.CreateAccount(ctx, fmt.Sprintf("list%d", time.Now().UnixNano()%1e9))
	if err != nil {
		b.Fatal(err)
	}
	c, err := srv.Client(ctx, a)
	if err != nil {
		b.Fatal(err)
	}
	w := pds.New(c, a.DID)
	parent := "at://" + a.DID.String() + "/" + lexicon.Node + "/p"
	ws := []store.Write{{Op: store.Create, Collection: lexicon.Node, RKey: "p", Value: map[string]any{"$type": lexicon.Node, "text": "the long list", "sortKey": "m", "createdAt": "2026-12-06T00:00:00.000Z"}}}
	for i := range n {
		ws = append(ws, store.Write{Op: store.Create, Collection: lexicon.Node, RKey: fmt.Sprintf("3l%011d", i), Value: map[string]any{
			"$type": lexicon.Node, "text": fmt.Sprint("item ", i), "sortKey": fmt.Sprintf("m%07d", i), "parent": parent, "createdAt": "2026-12-06T00:00:00.000Z"}})
	}
	start := time.Now()
	for rest := ws; len(rest) > 0; {
		k := min(len(rest), store.MaxBatch)
		if _, err := w.Apply(ctx, "", rest[:k]); err != nil {
			b.Fatal(err)
		}
		rest = rest[k:]
	}
	b.Logf("seeded %d siblings in %v", n, time.Since(start).Round(time.Second))
	return a
}

func serveCost(b *testing.B, srv *pdstest.Server, a, twin *pdstest.Account, place func(i int) map[string]any) {
	ctx := context.Background()
	dir := b.TempDir()
	// the ledger holds 1,000 writes of the hour (another process's)
	l, err := budget.New(filepath.Join(dir, "budget-"+strings.ReplaceAll(a.DID.String(), ":", "_")+".json"))
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		r, err := l.Reserve(3)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Charge(fmt.Sprint("earlier/", i), 3); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	b.Setenv(pds.PasswordEnv, a.AppPassword)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	stderr := &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- run([]string{"serve", "--store", dir, "--pds", srv.URL, "--identifier", a.Handle, "--plc", srv.PLCURL}, inR, outW, stderr)
		outW.Close()
	}()
	defer func() {
		inW.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			b.Logf("serve did not end; stderr:\n%s", stderr)
		}
	}()
	c := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader(""))))
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "servecost", Version: "1"}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := c.Initialize(cctx, init); err != nil {
		b.Fatalf("initialize: %v; stderr:\n%s", err, stderr)
	}
	call := func(name string, args map[string]any) string {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		res, err := c.CallTool(ctx, req)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		var text strings.Builder
		for _, ct := range res.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				text.WriteString(tc.Text)
			}
		}
		if res.IsError {
			b.Fatalf("%s: %s", name, text.String())
		}
		return text.String()
	}
	app, err := srv.Client(ctx, a)
	if err != nil {
		b.Fatal(err)
	}
	// the parent to insert under (read by the app), and serve's first
	// read (cold)
	t, err := outline.New(pds.New(app, a.DID)).Tree(ctx)
	if err != nil {
		b.Fatal(err)
	}
	parent := t.Roots.At(0).Key()
	t = nil
	call("read_outline", map[string]any{"limit": 5})
	// the steady state: the followed stream has caught up and settled
	// (until then a read says it asked the PDS, and a write asks first)
	for settle := time.Now(); strings.Contains(call("read_outline", map[string]any{"limit": 1}), "has not caught up yet"); {
		if time.Since(settle) > time.Minute {
			b.Fatalf("the followed stream did not settle within a minute; stderr:\n%s", stderr)
		}
	}
	tc, err := srv.Client(ctx, twin)
	if err != nil {
		b.Fatal(err)
	}
	bare := func(i int) {
		body, _ := json.Marshal(map[string]any{"repo": twin.DID.String(), "writes": []any{map[string]any{
			"$type": "com.atproto.repo.applyWrites#create", "collection": lexicon.Node, "rkey": syntax.NewTIDNow(uint(i % 1024)).String(),
			"value": map[string]any{"$type": lexicon.Node, "text": fmt.Sprint("bare ", i), "sortKey": "a0", "createdAt": "2026-12-06T00:00:00.000Z"}}}})
		rawCall(b, tc, "com.atproto.repo.applyWrites", body)
	}
	other := func(i int) {
		if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": a.DID.String(), "collection": lexicon.Node,
			"record": map[string]any{"$type": lexicon.Node, "text": fmt.Sprint("from the app ", i), "sortKey": "zz", "createdAt": "2026-12-06T00:00:00.000Z"}}, nil); err != nil {
			b.Fatal(err)
		}
	}
	var ins, bares, insO, baresO []float64
	var cpu, cpuO time.Duration
	timed := func(into *[]float64, fn func()) time.Duration {
		c0 := processCPU()
		start := time.Now()
		fn()
		*into = append(*into, float64(time.Since(start).Microseconds())/1000)
		return processCPU() - c0
	}
	inserts := 0
	insert := func(into *[]float64, text string) time.Duration {
		args := map[string]any{"parent": parent, "position": "first", "text": text}
		if place != nil {
			args = map[string]any{"text": text}
			for k, v := range place(inserts) {
				args[k] = v
			}
		}
		inserts++
		return timed(into, func() { call("insert_after", args) })
	}
	if f := os.Getenv("BULLETED_SERVECOST_PROFILE"); f != "" {
		// the inserts' CPU alone (not the seeding): go tool pprof
		out, err := os.Create(f)
		if err != nil {
			b.Fatal(err)
		}
		pprof.StartCPUProfile(out)
		defer func() { pprof.StopCPUProfile(); out.Close() }()
	}
	// nobody else writes
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			cpu += insert(&ins, fmt.Sprint("ours ", i))
			timed(&bares, func() { bare(i) })
		} else {
			timed(&bares, func() { bare(i) })
			cpu += insert(&ins, fmt.Sprint("ours ", i))
		}
	}
	spent := l.Spent(budget.Window)
	// then right after another writer's commit, as many
	for i := range len(ins) {
		other(i)
		if i%2 == 0 {
			cpuO += insert(&insO, fmt.Sprint("after ", i))
			timed(&baresO, func() { bare(len(ins) + i) })
		} else {
			timed(&baresO, func() { bare(len(ins) + i) })
			cpuO += insert(&insO, fmt.Sprint("after ", i))
		}
	}
	b.StopTimer()
	med := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
	mi, mb, mo, mbo := med(ins), med(bares), med(insO), med(baresO)
	b.ReportMetric(mi, "insert-ms")
	b.ReportMetric(mb, "bare-ms")
	b.ReportMetric(mi/mb, "ratio")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(len(ins)), "cpu-ms")
	b.ReportMetric(mo, "insert-other-ms")
	b.ReportMetric(mbo, "bare-other-ms")
	b.ReportMetric(mo/mbo, "ratio-other")
	b.ReportMetric(float64(cpuO.Microseconds())/1000/float64(len(insO)), "cpu-other-ms")
	b.ReportMetric(float64(spent-3000)/float64(len(ins)), "points")
	b.ReportMetric(float64(l.Spent(budget.Window)-spent)/float64(len(insO)), "points-other")
}

// processCPU is the CPU time (user and system) of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// rawCall sends one XRPC POST with c and reads the answer to the end.
func rawCall(b *testing.B, c *atclient.APIClient, nsid string, body []byte) {
	req := atclient.NewAPIRequest(http.MethodPost, syntax.NSID(nsid), bytes.NewReader(body))
	req.Headers.Set("Content-Type", "application/json")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := c.Do(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)); err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %v %d", nsid, err, resp.StatusCode)
	}
}
