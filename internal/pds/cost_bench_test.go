package pds_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// BenchmarkPDSCost puts our cost on the reference PDS next to the
// network's own, same PDS, same HTTP client, interleaved in each iteration
// so that load on the machine falls on both alike:
//
//   - insert: a one-bullet insert through the engine (its tree brought
//     forward from the commit before, planned, committed) against a bare
//     applyWrites creating the same record, each first every other time
//     (heads/insert: the requests asking whether anybody else wrote, none
//     while our own last commit is trusted, pds.TrustOwn; and a bare
//     getLatestCommit, what one costs);
//   - insert-followed: the same pairs while the repository follows its
//     commit stream (serve's default; its commits verified against the
//     account's key, as serve does);
//   - cold: a new Repo's Snapshot (of the twin) from nothing (getRepo downloaded,
//     decoded, its MST loaded, the records listed) against the bare getRepo
//     download of the same repository (read to the end, nothing decoded).
//
// Reported: the median of each (ms) and our cost over the network's
// (ratio). About 10,000 records always; 100,000 with BULLETED_SCALE=1:
//
//	go test ./internal/pds -run '^$' -bench PDSCost -benchtime 15x
func BenchmarkPDSCost(b *testing.B) {
	sizes := []int{9_100} // bullets: about 10,000 records with their notes
	if os.Getenv("BULLETED_SCALE") != "" {
		sizes = append(sizes, 91_000)
	}
	ctx := context.Background()
	for _, n := range sizes {
		// the engine writes to one account; the bare requests go to its
		// twin, seeded alike (a bare write to the engine's own repository
		// would be another writer's commit, which its next call must read)
		a, twin := pdstest.NewAccount(b, srv), pdstest.NewAccount(b, srv)
		r, tr := pdstest.Login(b, srv, a, b.TempDir(), nil), pdstest.Login(b, srv, twin, b.TempDir(), nil)
		recs := seedGenerated(b, r, n)
		seedGenerated(b, tr, n)
		b.Run(fmt.Sprintf("records=%d", recs), func(b *testing.B) {
			e := outline.New(r)
			t, err := e.Tree(ctx)
			if err != nil {
				b.Fatal(err)
			}
			parent := t.Roots.At(0).Key()
			c := tr.Client()
			var ins, bareIns, bareHead, cold, bareCold []float64
			heads, diffs := r.Stats.Heads.Load(), r.Stats.Diffs.Load()
			var insDiffs int64
			var coldCPU, bareCPU time.Duration
			timed := func(into *[]float64, fn func()) {
				cpu := processCPU()
				start := time.Now()
				fn()
				*into = append(*into, float64(time.Since(start).Microseconds())/1000)
				switch into {
				case &cold:
					coldCPU += processCPU() - cpu
				case &bareCold:
					bareCPU += processCPU() - cpu
				}
			}
			// the bare write: the record the engine wrote first, under a key
			// of its own
			var tmpl *store.Write
			bareWrite := func(into *[]float64, i int) {
				v := maps.Clone(tmpl.Value)
				v["text"] = fmt.Sprint("bare ", i)
				body, _ := json.Marshal(map[string]any{"repo": twin.DID.String(), "writes": []any{map[string]any{
					"$type": "com.atproto.repo.applyWrites#create", "collection": lexicon.Node, "rkey": fmt.Sprintf("%sb%d", tmpl.RKey, i), "value": v}}})
				timed(into, func() { bare(b, c, http.MethodPost, "com.atproto.repo.applyWrites", nil, body) })
			}
			insert := func(into *[]float64, text string) {
				timed(into, func() {
					made, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
						return intent.Insert{Pos: outline.Position{Parent: parent, Where: "first"}, Nodes: []intent.NewNode{{Text: text}}}.Plan(p)
					})
					if err != nil {
						b.Fatal(err)
					}
					if tmpl == nil {
						tmpl = &made.Plan.Writes[0]
					}
				})
			}
			// ours and the bare write in turns, each first every other time:
			// neither always comes right after the previous iteration's reads
			pair := func(ours, bares *[]float64, i int, text string) {
				if i%2 == 0 || tmpl == nil {
					insert(ours, text)
					bareWrite(bares, i)
				} else {
					bareWrite(bares, i)
					insert(ours, text)
				}
			}
			for i := 0; b.Loop(); i++ {
				pair(&ins, &bareIns, i, fmt.Sprint("engine ", i))
				timed(&bareHead, func() {
					bare(b, c, http.MethodGet, "com.atproto.sync.getLatestCommit", map[string]string{"did": twin.DID.String()}, nil)
				})
				timed(&cold, func() {
					s, err := pds.New(c, twin.DID).Snapshot(ctx)
					if err != nil || len(s.Records) < recs {
						b.Fatalf("cold read: %v (%d records)", err, len(s.Records))
					}
				})
				timed(&bareCold, func() {
					if got := bare(b, c, http.MethodGet, "com.atproto.sync.getRepo", map[string]string{"did": twin.DID.String()}, nil); got < 1000 {
						b.Fatalf("getRepo: %d bytes", got)
					}
				})
			}
			b.StopTimer()
			headsPer := float64(r.Stats.Heads.Load()-heads) / float64(len(ins))
			insDiffs = r.Stats.Diffs.Load() - diffs
			// the same inserts while the repository follows its commit stream
			// (serve's default): while the stream is live no read asks the
			// PDS, so an insert is its applyWrites and this server's own work
			// (verified against the account's key, as serve does: without a
			// directory every commit of the stream is a gap, read instead)
			r.Directory = pds.Directory(srv.PLCURL)
			gaps := r.Stats.StreamGaps.Load()
			fctx, stop := context.WithCancel(ctx)
			defer stop()
			go r.Follow(fctx, func() {}, nil)
			for deadline := time.Now().Add(30 * time.Second); !r.Live(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) { // a bound for a stuck stream, not a speed check
					b.Fatal("the commit stream did not become live")
				}
			}
			var followed, bareFollowed []float64
			fheads, fdiffs := r.Stats.Heads.Load(), r.Stats.Diffs.Load()
			for i := range len(ins) {
				pair(&followed, &bareFollowed, len(ins)+i, fmt.Sprint("followed ", i))
			}
			stop()
			if g := r.Stats.StreamGaps.Load() - gaps; g > 0 {
				b.Logf("%d of the stream's commits were gaps (read instead): %s", g, pds.LastGap(r))
			}
			b.ReportMetric(float64(r.Stats.Heads.Load()-fheads)/float64(len(followed)), "heads/insert-followed")
			b.ReportMetric(headsPer, "heads/insert")
			b.ReportMetric(float64(insDiffs)/float64(len(ins)), "diffs/insert")
			b.ReportMetric(float64(r.Stats.Diffs.Load()-fdiffs)/float64(len(followed)), "diffs/insert-followed")
			med := func(xs []float64) float64 { slices.Sort(xs); return xs[len(xs)/2] }
			mi, mb, mc, mbc := med(ins), med(bareIns), med(cold), med(bareCold)
			b.ReportMetric(mi, "insert-ms")
			b.ReportMetric(mb, "bare-applyWrites-ms")
			b.ReportMetric(mi/mb, "insert-ratio")
			mf, mbf := med(followed), med(bareFollowed)
			b.ReportMetric(mf, "insert-followed-ms")
			b.ReportMetric(mbf, "bare-applyWrites-followed-ms")
			b.ReportMetric(mf/mbf, "insert-followed-ratio")
			b.ReportMetric(med(bareHead), "bare-getLatestCommit-ms")
			b.ReportMetric(mc, "cold-ms")
			b.ReportMetric(mbc, "bare-getRepo-ms")
			b.ReportMetric(mc/mbc, "cold-ratio")
			// this process's CPU time for one cold read, and for the bare
			// download (the reference PDS's is not counted)
			b.ReportMetric(float64(coldCPU.Microseconds())/1000/float64(len(cold)), "cold-cpu-ms")
			b.ReportMetric(float64(bareCPU.Microseconds())/1000/float64(len(cold)), "bare-getRepo-cpu-ms")
		})
	}
}

// processCPU is the CPU time (user and system) of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// bare sends one XRPC request with c (its session, its HTTP client) and
// reads the answer to the end, uncompressed (as a Repo reads a PDS on
// loopback); it returns the bytes read.
func bare(b *testing.B, c *atclient.APIClient, method, nsid string, params map[string]string, body []byte) int64 {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := atclient.NewAPIRequest(method, syntax.NSID(nsid), rd)
	for k, v := range params {
		req.QueryParams.Set(k, v)
	}
	if body != nil {
		req.Headers.Set("Content-Type", "application/json")
	}
	req.Headers.Set("Accept-Encoding", "identity")
	// bounded in time, not in size (a bare getRepo of 100k records is more
	// than the client's 16 MB bound for other responses)
	ctx, cancel := context.WithTimeout(pds.Unbounded(context.Background()), 5*time.Minute)
	defer cancel()
	resp, err := c.Do(ctx, req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("%s: %v %d", nsid, err, resp.StatusCode)
	}
	return n
}
