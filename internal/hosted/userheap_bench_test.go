package hosted

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// BenchmarkHostedUserHeap is the live heap one signed-in user adds to a
// hosted instance (issue #26: target at most 1 KB a record): a user of
// about n records on the reference PDS, signed in with OAuth, opened as a
// call opens them (Server.envFor, the whole repository read from the PDS,
// nothing on the instance's disk), one read_outline and one search
// answered. The figure is the heap after a collection, less the heap
// before the user's first call (HeapAlloc); also reported, what the
// instance's byte budget counts for the user (Memory().Bytes), and their
// ratio. The seeding client is dropped before the base is taken, and a
// first user (100 records) is opened before any is measured, so that what
// the process builds once for all is not counted as a user's.
//
// Sizes: about 10,000 records always, 100,000 too with BULLETED_SCALE=1
// (seeding: about 12 s per 10,000 records). With BULLETED_HEAPPROFILE=file,
// a heap profile of the last size after its search.
//
//	BULLETED_SCALE=1 go test ./internal/hosted -run '^$' -bench HostedUserHeap -benchtime 1x
func BenchmarkHostedUserHeap(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("BULLETED_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 4096 // fine enough to see a user's smaller parts
	}
	if os.Getenv("BULLETED_SCALE") != "" {
		sizes = append(sizes, 100_000)
	}
	p := testPDS(b)
	e := newEnv(b)
	e.plc = p.PLCURL
	in := e.start(b, func(c *Config) { c.Memory = 8 << 30 }) // no eviction while measured
	read, _ := tools.Find("read_outline")
	search, _ := tools.Find("search")
	ctx := context.Background()
	// call answers one tool call as user did
	call := func(b *testing.B, did string, t tools.Tool, args map[string]any) {
		uctx := context.WithValue(ctx, identityKey{}, principal{DID: did})
		env, done, err := in.envFor(uctx)
		if err != nil {
			b.Fatal(err)
		}
		defer done()
		a, err := t.Check(tools.Args(args))
		if err != nil {
			b.Fatal(err)
		}
		if res, err := t.Handle(uctx, env, a); err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", t.Name, err, res)
		}
	}
	// seed writes about n records to acct's repository
	seed := func(b *testing.B, acct *pdstest.Account, n int) int {
		c, err := p.Client(ctx, acct)
		if err != nil {
			b.Fatal(err)
		}
		w := pds.New(c, acct.DID)
		ws := outlinegen.Writes(outlinegen.Generate(n*10/11, 1), acct.DID.String())
		start := time.Now()
		for rest := ws; len(rest) > 0; {
			k := min(len(rest), store.MaxBatch)
			if _, err := w.Apply(ctx, "", rest[:k]); err != nil {
				b.Fatal(err)
			}
			rest = rest[k:]
		}
		b.Logf("seeded %d records in %v", len(ws), time.Since(start).Round(time.Second))
		return len(ws)
	}
	// a first user of 100 records, kept open: what the first call of the
	// process builds once for all (the schemas, the validator's regular
	// expressions, the tools' tables) is not counted as a user's
	warm := newAccount(b, p, fmt.Sprintf("uwarm%d", time.Now().UnixNano()%1e6))
	signIn(b, in, registerClient(b, in), warm, "")
	seed(b, warm, 100)
	call(b, warm.DID.String(), read, map[string]any{})
	call(b, warm.DID.String(), search, map[string]any{"text": "review"})
	for _, n := range sizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			acct := newAccount(b, p, fmt.Sprintf("uheap%d", time.Now().UnixNano()%1e6))
			signIn(b, in, registerClient(b, in), acct, "")
			recs := seed(b, acct, n)
			did := acct.DID.String()
			var live, measured int64
			for b.Loop() {
				b.StopTimer()
				in.Server.mu.Lock()
				if u := in.users[did]; u != nil {
					in.drop(u) // a second iteration starts from nothing again
				}
				in.Server.mu.Unlock()
				before := in.Memory().Bytes
				base := heapNow()
				call(b, did, read, map[string]any{})
				call(b, did, search, map[string]any{"text": "review"})
				live = heapNow() - base
				measured = in.Memory().Bytes - before
				in.Server.mu.Lock()
				open := in.users[did] != nil
				in.Server.mu.Unlock()
				if !open {
					b.Fatal("the user was not kept open")
				}
				if f := os.Getenv("BULLETED_HEAPPROFILE"); f != "" {
					if w, err := os.Create(f); err == nil {
						pprof.Lookup("heap").WriteTo(w, 0)
						w.Close()
					}
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(recs), "records")
			b.ReportMetric(float64(live)/(1<<20), "live-MB")
			b.ReportMetric(float64(live)/float64(recs), "live-B/rec")
			b.ReportMetric(float64(measured)/float64(recs), "measured-B/rec")
			b.ReportMetric(float64(measured)/float64(live), "measured/live")
		})
	}
}

// heapNow is the heap in use after a full collection.
func heapNow() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
