package hosted

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// BenchmarkReopen10k: a call on an instance that does not hold the user's
// engine, for a user of 10,000 bullets (about 11,000 records, on the
// reference PDS) with one bullet written meanwhile by another client. One
// op is the user's open and first read (Server.acquire, Engine.Tree), as a
// call makes them:
//   - from=cache: the user was dropped (evicted), or another instance
//     shares this one's --store: the read cache on disk is loaded and
//     getRepo?since brings the one new bullet;
//   - from=pds: nothing on this instance's disk (an instance that never
//     served the user): the whole repository is read from the PDS.
func BenchmarkReopen10k(b *testing.B) {
	p := testPDS(b)
	e := newEnv(b)
	e.plc = p.PLCURL
	in := e.start(b, func(c *Config) { c.Memory = 1 << 30 })
	acct := newAccount(b, p, fmt.Sprintf("reopen%d", time.Now().UnixNano()%1e6))
	signIn(b, in, registerClient(b, in), acct, "")
	ctx := context.Background()
	c, err := p.Client(ctx, acct)
	if err != nil {
		b.Fatal(err)
	}
	writer := pds.New(c, acct.DID)
	ws := outlinegen.Writes(outlinegen.Generate(10000, 1), acct.DID.String())
	for rest := ws; len(rest) > 0; {
		k := min(len(rest), store.MaxBatch)
		if _, err := writer.Apply(ctx, "", rest[:k]); err != nil {
			b.Fatal(err)
		}
		rest = rest[k:]
	}
	did := acct.DID.String()
	cache := filepath.Join(in.cfg.DataDir, "users", strings.ReplaceAll(did, ":", "_"), "repo.car")
	uctx := context.WithValue(ctx, identityKey{}, principal{DID: did})
	read := func() int {
		env, done, err := in.envFor(uctx)
		if err != nil {
			b.Fatal(err)
		}
		defer done()
		t, err := env.Engine.Tree(uctx)
		if err != nil {
			b.Fatal(err)
		}
		return t.Count
	}
	n := read() // the first read: the whole repository, the cache written
	b.Logf("%d records; first (cold) read done; user measured %s", n, FormatBytes(in.Memory().Bytes))
	drop := func() {
		in.Server.mu.Lock()
		if u := in.users[did]; u != nil {
			in.drop(u)
		}
		in.Server.mu.Unlock()
	}
	written := 0
	for _, from := range []string{"cache", "pds"} {
		b.Run("from="+from, func(b *testing.B) {
			before := in.Memory()
			for b.Loop() {
				b.StopTimer()
				drop()
				if from == "pds" {
					if err := os.Remove(cache); err != nil {
						b.Fatal(err)
					}
				}
				written++
				if _, err := writer.Apply(ctx, "", outlinegen.Writes([]store.Record{{Collection: "app.bulleted.node", RKey: syntax.NewTIDNow(0).String(),
					Value: store.MustValue(map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprintf("meanwhile %d", written), "sortKey": "zz", "createdAt": "2026-01-01T00:00:00.000Z"})}}, did)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if got := read(); got != n+written {
					b.Fatalf("reopened: %d records, want %d", got, n+written)
				}
			}
			st := in.Memory()
			b.ReportMetric(float64(st.Reopens-before.Reopens), "reopens")
			if from == "cache" && st.Reopens == before.Reopens {
				b.Fatal("no reopen from the read cache")
			}
			if from == "pds" && st.Reopens != before.Reopens {
				b.Fatal("a reopen from a read cache that was removed")
			}
		})
	}
}

// The hosted simulation's seam: users are opened over simRepo, an
// in-memory repository decoded from a JSON file of a generated outline (the
// "disk", standing in for the read cache at users/<did>/repo.car and the
// PDS behind it), with the same Server.get/release/fit/Sweep as real users.
// What it replaces: the PDS (no network, no getRepo?since: a reopened user
// starts again from their outline class's file, their earlier writes
// forgotten), the read cache's CBOR/CAR decoding (JSON instead) and the
// Postgres operations journal (kept in memory by each engine).

// simRepo is a store.Repository and store.Deltas in memory.
type simRepo struct {
	mu     sync.Mutex
	did    syntax.DID
	base   []store.Record
	commit string
	n      int
	log    []simCommit
}

type simCommit struct {
	from, to string
	changes  []store.Record
}

func (r *simRepo) DID() syntax.DID { return r.did }
func (r *simRepo) rev() string     { return fmt.Sprintf("r%09d", r.n) }

func (r *simRepo) Head(context.Context) (string, string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.commit, r.rev(), nil
}

func (r *simRepo) Snapshot(context.Context) (*store.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	recs := r.base
	if len(r.log) > 0 {
		idx := map[string]int{}
		recs = slices.Clone(r.base)
		for i, x := range recs {
			idx[x.Collection+"/"+x.RKey] = i
		}
		for _, c := range r.log {
			for _, x := range c.changes {
				if i, ok := idx[x.Collection+"/"+x.RKey]; ok {
					recs[i] = x
				} else {
					idx[x.Collection+"/"+x.RKey] = len(recs)
					recs = append(recs, x)
				}
			}
		}
		recs = slices.DeleteFunc(recs, func(x store.Record) bool { return x.Value.IsZero() })
		slices.SortFunc(recs, store.CompareRecords)
	}
	return &store.Snapshot{DID: r.did, Commit: r.commit, Rev: r.rev(), Records: recs}, nil
}

func (r *simRepo) Changes(_ context.Context, since string) (string, string, []store.Record, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if since == r.commit {
		return r.commit, r.rev(), nil, true, nil
	}
	for i, c := range r.log {
		if c.from == since {
			var ch []store.Record
			for _, c := range r.log[i:] {
				ch = append(ch, c.changes...)
			}
			return r.commit, r.rev(), ch, true, nil
		}
	}
	return r.commit, r.rev(), nil, false, nil
}

func (r *simRepo) Apply(_ context.Context, swap string, writes []store.Write) (*store.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if swap != "" && swap != r.commit {
		return nil, store.ErrConflict
	}
	r.n++
	c := simCommit{from: r.commit, to: fmt.Sprintf("c%d", r.n)}
	for _, w := range writes {
		x := store.Record{Collection: w.Collection, RKey: w.RKey, CID: fmt.Sprintf("s%d-%s", r.n, w.RKey), Value: store.MustValue(w.Value)}
		if w.Op == store.Delete {
			x.Value = store.Value{}
		}
		c.changes = append(c.changes, x)
	}
	r.log = append(r.log, c)
	r.commit = c.to
	return &store.Result{Commit: r.commit, Rev: r.rev()}, nil
}

func (r *simRepo) size() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(cap(r.base)) * 88
}

// simClasses are the outline sizes of the simulation's users (bullets) and
// how many of every 20 users have each: most small, a few big.
var simClasses = []struct{ bullets, per20 int }{
	{1000, 6}, {2000, 4}, {3000, 2}, {10000, 4}, {30000, 3}, {100000, 1},
}

// BenchmarkHostedSim: 200 users (20 under -short) with 1k–100k-bullet
// outlines (simClasses) call one instance with a 2 GB budget (200 MB under
// -short), the Go runtime's soft limit set from it as serve does
// (GoMemoryLimit): calls from 4 clients at once, users picked with a Zipf
// skew (a few busy, most occasional), a mix of reads (60 %), searches
// (25 %) and inserts (15 %). Reported: p50/p99 call latency (all, and
// calls that opened no one), opens, reopens, evictions, the peaks of the
// users' measured bytes, the Go heap, the Go runtime's memory and the
// process's RSS (sampled while the calls run); it fails when RSS passes
// the budget. A benchmark only (go test ./... never runs it):
//
//	go test ./internal/hosted -run '^$' -bench BenchmarkHostedSim -benchtime=1x [-short]
func BenchmarkHostedSim(b *testing.B) {
	users, budget, calls := 200, int64(2e9), 2000
	if testing.Short() {
		users, budget, calls = 20, int64(200e6), 200
	}
	dir := b.TempDir()
	// the "disk": one JSON file per outline class, with a DID placeholder
	// the length of outlinegen.DID
	files := map[int]string{}
	for _, c := range simClasses {
		if testing.Short() && c.bullets > 10000 {
			continue
		}
		raw, err := json.Marshal(outlinegen.Generate(c.bullets, uint64(c.bullets)))
		if err != nil {
			b.Fatal(err)
		}
		files[c.bullets] = filepath.Join(dir, fmt.Sprintf("%d.json", c.bullets))
		if err := os.WriteFile(files[c.bullets], raw, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	var sizes []int
	for len(sizes) < users {
		for _, c := range simClasses {
			for range c.per20 {
				if len(sizes) < users {
					n := c.bullets
					if files[n] == "" {
						n = 10000 // -short: the biggest class kept
					}
					sizes = append(sizes, n)
				}
			}
		}
	}
	rng := rand.New(rand.NewPCG(26, 1))
	rng.Shuffle(len(sizes), func(i, j int) { sizes[i], sizes[j] = sizes[j], sizes[i] })
	dids := make([]string, users)
	total := 0
	for i := range dids {
		dids[i] = fmt.Sprintf("did:plc:simuser%017d", i)
		if len(dids[i]) != len(outlinegen.DID) {
			b.Fatal("a simulated DID must be as long as outlinegen.DID")
		}
		total += sizes[i]
	}
	b.Logf("%d users, %d bullets in all (%d of 100k, %d of 30k, %d of 10k), budget %s", users, total,
		countOf(sizes, 100000), countOf(sizes, 30000), countOf(sizes, 10000), FormatBytes(budget))

	var logMu sync.Mutex
	var logs []string
	in := newEnv(b).start(b, func(c *Config) {
		c.Memory, c.Idle = budget, 0
		c.Logf = func(f string, a ...any) { logMu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); logMu.Unlock() }
	})
	sizeOf := map[string]int{}
	for i, d := range dids {
		sizeOf[d] = sizes[i]
	}
	in.Server.open = func(ctx context.Context, did string) (*user, error) {
		raw, err := os.ReadFile(files[sizeOf[did]])
		if err != nil {
			return nil, err
		}
		raw = bytes.ReplaceAll(raw, []byte(outlinegen.DID), []byte(did))
		var recs []store.Record
		if err := json.Unmarshal(raw, &recs); err != nil {
			return nil, err
		}
		slices.SortFunc(recs, store.CompareRecords)
		r := &simRepo{did: syntax.DID(did), base: recs, commit: "c0"}
		u := &user{did: did, env: &tools.Env{Engine: outline.New(r), Search: in.search, Snapshots: in.snapshots}}
		u.sizing.repoSize = r.size
		return u, nil
	}
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	_, say := GoMemoryLimit(budget, os.Getenv) // as serve does
	b.Log(say)
	runtime.GC()
	debug.FreeOSMemory()

	read, _ := tools.Find("read_outline")
	search, _ := tools.Find("search")
	insert, _ := tools.Find("insert_after")
	zipf := rand.NewZipf(rand.New(rand.NewPCG(26, 2)), 1.1, 4, uint64(users-1))
	type job struct {
		did string
		op  int
	}
	jobs := make([]job, calls)
	for i := range jobs {
		jobs[i] = job{dids[zipf.Uint64()], rng.IntN(100)}
	}
	for b.Loop() {
		lat := make([]time.Duration, calls)
		reopened := make([]bool, calls)
		var peakUsers int64
		var mu sync.Mutex
		// the process's memory, sampled while the calls run (the setup's
		// generated outlines are not counted: the peak is reset first)
		os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		sampled := sampleMemory(20 * time.Millisecond)
		var wg sync.WaitGroup
		next := make(chan int)
		for range 4 {
			wg.Go(func() {
				for i := range next {
					j := jobs[i]
					ctx := context.WithValue(context.Background(), identityKey{}, principal{DID: j.did})
					opens := in.Memory().Opens
					start := time.Now()
					env, done, err := in.envFor(ctx)
					if err != nil {
						b.Error(err)
						continue
					}
					var t tools.Tool
					var args map[string]any
					switch {
					case j.op < 60:
						t, args = read, map[string]any{}
					case j.op < 85:
						t, args = search, map[string]any{"text": "review"}
					default:
						t, args = insert, map[string]any{"text": fmt.Sprintf("simulated %d", i)}
					}
					a, err := t.Check(tools.Args(args))
					if err != nil {
						b.Error(err)
						done()
						continue
					}
					res, err := t.Handle(ctx, env, a)
					done()
					lat[i] = time.Since(start)
					if err != nil || res.IsError {
						b.Errorf("%s: %v %v", t.Name, err, res)
					}
					st := in.Memory()
					mu.Lock()
					reopened[i] = st.Opens > opens
					peakUsers = max(peakUsers, st.Bytes)
					mu.Unlock()
				}
			})
		}
		for i := range jobs {
			next <- i
		}
		close(next)
		wg.Wait()
		mem := sampled()
		st := in.Memory()
		// what is live with the users still open, against their measure
		runtime.GC()
		var end runtime.MemStats
		runtime.ReadMemStats(&end)
		b.Logf("at the end, after a collection: live heap %s, the open users measured %s (%d users)", FormatBytes(int64(end.HeapAlloc)), FormatBytes(st.Bytes), st.Users)
		if f := os.Getenv("BULLETED_SIM_HEAP"); f != "" { // a heap profile of that moment
			if w, err := os.Create(f); err == nil {
				pprof.WriteHeapProfile(w)
				w.Close()
			}
		}
		all := slices.Clone(lat)
		slices.Sort(all)
		var warm []time.Duration
		for i, l := range lat {
			if !reopened[i] {
				warm = append(warm, l)
			}
		}
		slices.Sort(warm)
		pct := func(s []time.Duration, p float64) time.Duration {
			if len(s) == 0 {
				return 0
			}
			return s[min(len(s)-1, int(p*float64(len(s))))]
		}
		rss, hwm := procStatus("VmRSS"), max(procStatus("VmHWM"), mem.rss)
		peakHeap := mem.heap
		b.ReportMetric(float64(pct(all, 0.5).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(pct(all, 0.99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(pct(warm, 0.5).Microseconds())/1000, "warm-p50-ms")
		b.ReportMetric(float64(pct(warm, 0.99).Microseconds())/1000, "warm-p99-ms")
		b.ReportMetric(float64(st.Opens), "opens")
		b.ReportMetric(float64(st.Opens-int64(countDistinct(jobs, func(j job) string { return j.did }))), "reopens")
		b.ReportMetric(float64(st.EvictedSize), "evicted")
		b.ReportMetric(float64(peakUsers)/1e6, "peak-users-MB")
		b.ReportMetric(float64(peakHeap)/1e6, "peak-heap-MB")
		b.ReportMetric(float64(rss)/1e6, "rss-MB")
		b.ReportMetric(float64(hwm)/1e6, "rss-peak-MB")
		b.ReportMetric(float64(mem.goMem)/1e6, "peak-go-MB")
		b.ReportMetric(float64(mem.nonGo)/1e6, "non-go-MB")
		b.Logf("%d calls by %d users (%d distinct): p50 %v p99 %v (warm: p50 %v p99 %v, %d calls); opens %d (%d first, the rest reopens), evicted %d by size; users' bytes peak %s of a users' budget %s; Go heap peak %s, the Go runtime's memory peak %s (limit %s); RSS %s, peak %s, budget %s (outside the Go runtime: up to %s); oversize notices %d; reads that waited %v for the one before and went on beside it: %d",
			calls, users, countDistinct(jobs, func(j job) string { return j.did }), pct(all, 0.5), pct(all, 0.99), pct(warm, 0.5), pct(warm, 0.99), len(warm),
			st.Opens, countDistinct(jobs, func(j job) string { return j.did }), st.EvictedSize, FormatBytes(peakUsers), FormatBytes(st.Budget),
			FormatBytes(peakHeap), FormatBytes(mem.goMem), FormatBytes(debug.SetMemoryLimit(-1)), FormatBytes(rss), FormatBytes(hwm), FormatBytes(budget), FormatBytes(mem.nonGo), len(logs), loadWait, st.LoadsBeside)
		if hwm > budget {
			b.Errorf("RSS peaked at %s, over the budget %s", FormatBytes(hwm), FormatBytes(budget))
		}
		if peakUsers > st.Budget && st.Oversize == 0 {
			b.Errorf("the users' measured bytes peaked at %s, over their budget %s", FormatBytes(peakUsers), FormatBytes(st.Budget))
		}
	}
}

func countOf(s []int, v int) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

func countDistinct[T any](s []T, key func(T) string) int {
	seen := map[string]bool{}
	for _, x := range s {
		seen[key(x)] = true
	}
	return len(seen)
}

// memPeaks are the process's memory peaks while sampled.
type memPeaks struct {
	rss   int64 // resident set
	heap  int64 // Go heap objects, live and not yet collected
	goMem int64 // the Go runtime's memory, less what it returned to the OS (what its soft limit bounds)
	nonGo int64 // the resident set outside the Go runtime's memory (RSS − goMem), at its largest
}

// sampleMemory samples the process's memory every period until the returned
// function is called, which returns the peaks.
func sampleMemory(every time.Duration) func() memPeaks {
	var p memPeaks
	stop, done := make(chan struct{}), make(chan struct{})
	ms := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	take := func() {
		metrics.Read(ms)
		goMem := int64(ms[0].Value.Uint64() - ms[1].Value.Uint64())
		rss := procStatus("VmRSS")
		p.rss, p.heap, p.goMem = max(p.rss, rss), max(p.heap, int64(ms[2].Value.Uint64())), max(p.goMem, goMem)
		p.nonGo = max(p.nonGo, rss-goMem)
	}
	go func() {
		defer close(done)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			take()
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
	return func() memPeaks { close(stop); <-done; take(); return p }
}

// procStatus reads a "kB" figure of /proc/self/status, in bytes (0: none).
func procStatus(field string) int64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var n int64
			fmt.Sscanf(strings.TrimSpace(rest), "%d", &n)
			return n << 10
		}
	}
	return 0
}
