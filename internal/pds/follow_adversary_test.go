package pds_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/indigo/events"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// An adversarial second read of following (issue 27): the promise is that
// following only makes reads cheaper, never staler and never wrong.

// byPath is a snapshot's app.bulleted records by path, as "CID text".
func byPath(rs []store.Record) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		out[r.Collection+"/"+r.RKey] = fmt.Sprintf("%s %v", r.CID, r.Value.Get("text"))
	}
	return out
}

// caughtUp waits until r's kept repository is at the PDS's head.
func (g *followRig) caughtUp(t *testing.T, ctx context.Context, r *pds.Repo) {
	t.Helper()
	_, rev, err := g.login().Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	until(t, "caught up with the PDS's head "+rev, func() bool { return pds.KeptRev(r) >= rev })
}

// node is a bullet record.
func node(text string) map[string]any {
	return map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "k", "createdAt": "2026-12-04T10:00:00.000Z"}
}

// TestFollowInterleavedWriters: the engine's own commits (swapCommit on the
// head it knows, so pending ones on top of the kept repository), the app's
// commits straight to the PDS, and a reader following Changes from commit to
// commit, all at once and quickly, while following. After each burst the
// followed repository equals a fresh read, and what the reader composed from
// Changes does too.
func TestFollowInterleavedWriters(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	errs, _ := follow(t, ctx, r)
	until(t, "live", r.Live)
	s0, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen, since := byPath(s0.Records), s0.Commit
	var seenMu sync.Mutex
	for round := range 4 {
		var wg sync.WaitGroup
		var appMu sync.Mutex
		wg.Go(func() { // the app
			for range 12 {
				appMu.Lock()
				g.edit(t, ctx)
				appMu.Unlock()
			}
		})
		wg.Go(func() { // the engine: its own commits, swapped on what it read
			for i := 0; i < 12; i++ {
				s, err := r.Snapshot(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				rkey := syntax.NewTIDNow(uint(700 + round)).String()
				_, err = r.Apply(ctx, s.Commit, []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: rkey, Value: node(fmt.Sprintf("engine %d.%d", round, i))}})
				if errors.Is(err, store.ErrConflict) {
					continue // the app got there first: read and try again
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
		wg.Go(func() { // a reader following Changes
			for range 40 {
				seenMu.Lock()
				c, _, ch, ok, err := r.Changes(ctx, since)
				if err != nil {
					seenMu.Unlock()
					t.Error(err)
					return
				}
				if !ok {
					s, err := r.Snapshot(ctx)
					if err != nil {
						seenMu.Unlock()
						t.Error(err)
						return
					}
					seen, since = byPath(s.Records), s.Commit
				} else {
					for _, rec := range ch {
						k := rec.Collection + "/" + rec.RKey
						if rec.Value.IsZero() {
							delete(seen, k)
						} else {
							seen[k] = fmt.Sprintf("%s %v", rec.CID, rec.Value.Get("text"))
						}
					}
					since = c
				}
				seenMu.Unlock()
			}
		})
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
		g.composedIsKept(t, ctx, r, fmt.Sprintf("round %d", round), seen, &since)
	}
	t.Logf("streamed %d, gaps %d, said %q", r.Stats.Streamed.Load(), r.Stats.StreamGaps.Load(), errs())
}

// TestFollowJetstreamOtherCollection: Jetstream is filtered to the
// app.bulleted collections, so a commit of another collection of the same
// repository (the person posting on Bluesky) rings no bell. The bullets are
// the same, but the kept commit is no longer the head: the engine's next
// write, swapped on it, must still go through (a read after the conflict
// asks the PDS) rather than conflict until the retries run out.
func TestFollowJetstreamOtherCollection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	js := newFakeJetstream(t)
	r := g.login()
	r.Jetstream = js.URL
	follow(t, ctx, r)
	until(t, "live", r.Live)
	e, err := outline.Open(r, outline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Tree(ctx); err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := g.app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": g.acct.DID.String(), "collection": "app.bsky.feed.post",
		"record": map[string]any{"$type": "app.bsky.feed.post", "text": "hello", "createdAt": "2026-12-04T10:00:00.000Z"}}, &out); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "after the person's post"}}}, false); err != nil {
		t.Fatalf("a write after a commit Jetstream does not announce: %v (writes %d)", err, r.Stats.Writes.Load())
	}
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.sameAsFresh(t, ctx, s)
}

// gate holds the requests whose path contains hold while armed.
type gate struct {
	hold  string
	armed atomic.Bool
	held  chan struct{} // a request is held
	open  chan struct{} // closed: held requests go on
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.armed.Load() && strings.Contains(req.URL.Path, g.hold) {
		select {
		case g.held <- struct{}{}:
		default:
		}
		// held past the request's cancellation: as an answer already on
		// its way when the caller gave up
		<-g.open
		req = req.WithContext(context.WithoutCancel(req.Context()))
	}
	return http.DefaultTransport.RoundTrip(req)
}

// TestFollowStuckReplayReadOutlivesConnection: a replay from the kept
// position that does not get there is read instead after replayWait (in a
// goroutine of its own); if the connection ends while that read's answer is
// on its way, the stream is down and must stay so: reads ask the PDS again
// (an edit made meanwhile is read), not answer from the kept repository as
// if live.
func TestFollowStuckReplayReadOutlivesConnection(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	u, _ := url.Parse(g.srv.URL)
	cut := newCutter(t, u.Host)
	r1 := g.followThenStop(t, ctx, dir, "http://"+cut.ln.Addr().String(), 1)
	missed := g.edit(t, ctx) // while down: the replay has this to bring

	gt := &gate{hold: "com.atproto.sync.getRepo", held: make(chan struct{}, 1), open: make(chan struct{})}
	r2 := pdstest.Login(t, g.srv, g.acct, t.TempDir(), &http.Client{Transport: gt, Timeout: time.Minute})
	r2.Directory = pds.Directory(g.srv.PLCURL)
	r2.Cache, r2.Cursor = r1.Cache, r1.Cursor
	r2.StreamHost = r1.StreamHost
	pds.DropStreamEvents(r2, func(seq int64) bool { return true }) // the replay brings nothing
	gt.armed.Store(true)
	errs, _ := follow(t, ctx, r2)
	select { // the stuck replay is read instead (after 10 s), and that read is held
	case <-gt.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("the stuck replay was not read instead; said %q", errs())
	}
	if said := errs(); len(said) != 1 || !strings.Contains(said[0], "did not reach") {
		t.Fatalf("not a replay from the kept position: said %q", errs())
	}
	cut.down.Store(true)
	cut.cut()
	until(t, "the connection's end said", func() bool {
		for _, e := range errs() {
			if strings.Contains(e, "the commit stream is down") {
				return true
			}
		}
		return false
	})
	gt.armed.Store(false)
	close(gt.open) // the read completes after the connection ended
	until(t, "the read done", func() bool { return pds.KeptRev(r2) >= missed })
	if r2.Live() {
		t.Fatal("live with the stream's connection down")
	}
	rev := g.edit(t, ctx)
	s, err := r2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Rev != rev {
		t.Fatalf("a read with the stream down is at %s, the app's edit at %s: staler than without following", s.Rev, rev)
	}
}

// TestFollowAwkwardCommits: commits that stress the difference taken from
// the stream: a batch of store.MaxBatch creates by the engine, then its
// deletion in one batch; a record deleted and created again with the same
// value (its block and MST nodes restored, not new); a record of another
// collection (app.bsky.feed.post) in the same repository. After each, the
// followed repository equals a fresh read, and a reader following Changes
// from the start composes the same records.
func TestFollowAwkwardCommits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	errs, _ := follow(t, ctx, r)
	until(t, "live", r.Live)
	s0, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen, since := byPath(s0.Records), s0.Commit
	did := g.acct.DID.String()
	check := func(what string) {
		t.Helper()
		g.composedIsKept(t, ctx, r, what, seen, &since)
		t.Logf("%s: streamed %d, gaps %d", what, r.Stats.Streamed.Load(), r.Stats.StreamGaps.Load())
	}
	// a batch of the largest size, by the engine (swapped on its read)
	var batch []store.Write
	for i := range store.MaxBatch {
		batch = append(batch, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: syntax.NewTIDNow(uint(i)).String(), Value: node(fmt.Sprintf("batch %d", i))})
	}
	res, err := r.Apply(ctx, s0.Commit, batch)
	if err != nil {
		t.Fatal(err)
	}
	check("a batch of 200 creates")
	// deleted and created again, same value, by the app
	post := func(method string, body map[string]any) {
		t.Helper()
		var out map[string]any
		if err := g.app.Post(ctx, syntax.NSID(method), body, &out); err != nil {
			t.Fatal(err)
		}
	}
	rkey := batch[7].RKey
	post("com.atproto.repo.deleteRecord", map[string]any{"repo": did, "collection": "app.bulleted.node", "rkey": rkey})
	check("a delete")
	post("com.atproto.repo.createRecord", map[string]any{"repo": did, "collection": "app.bulleted.node", "rkey": rkey, "record": batch[7].Value})
	check("the same record created again")
	post("com.atproto.repo.putRecord", map[string]any{"repo": did, "collection": "app.bulleted.node", "rkey": rkey, "record": node("changed")})
	post("com.atproto.repo.putRecord", map[string]any{"repo": did, "collection": "app.bulleted.node", "rkey": rkey, "record": batch[7].Value})
	check("changed and changed back")
	// another collection of the same repository
	post("com.atproto.repo.createRecord", map[string]any{"repo": did, "collection": "app.bsky.feed.post",
		"record": map[string]any{"$type": "app.bsky.feed.post", "text": "hello", "createdAt": "2026-12-04T10:00:00.000Z"}})
	check("a post")
	// the engine deletes the batch in one commit, swapped on the head
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var del []store.Write
	for _, w := range batch {
		del = append(del, store.Write{Op: store.Delete, Collection: w.Collection, RKey: w.RKey})
	}
	if _, err := r.Apply(ctx, s.Commit, del); err != nil {
		t.Fatalf("deleting the batch swapped on %s (the batch's commit %s): %v", s.Commit, res.Commit, err)
	}
	check("the batch deleted")
	if n := r.Stats.StreamGaps.Load(); n != 0 {
		t.Logf("gaps: %d (read instead), said %q", n, errs())
	}
}

// TestFollowReplayCrossesOwnCommits: the engine's own commits, some not yet
// heard from the stream when Follow stops, more made while it is stopped
// (with the app's edits between them); a restarted Follow replays from the
// kept position while the engine reads and writes at the same time. The
// repository ends equal to a fresh read.
func TestFollowReplayCrossesOwnCommits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	r1 := g.login()
	r1.Cache, r1.Cursor = filepath.Join(dir, "repo.car"), filepath.Join(dir, "stream.json")
	own := func(r *pds.Repo, text string) {
		t.Helper()
		for {
			s, err := r.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Apply(ctx, s.Commit, []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: syntax.NewTIDNow(900).String(), Value: node(text)}})
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	ctx1, stop := context.WithCancel(ctx)
	_, done := follow(t, ctx1, r1)
	until(t, "live", r1.Live)
	for i := range 5 {
		g.edit(t, ctx)
		own(r1, fmt.Sprintf("own %d", i))
	}
	stop() // some of our own commits not heard yet
	<-done
	for i := range 5 {
		g.edit(t, ctx)
		own(r1, fmt.Sprintf("own while stopped %d", i))
	}
	r2 := g.login()
	r2.Cache, r2.Cursor = r1.Cache, r1.Cursor
	errs, _ := follow(t, ctx, r2)
	for i := range 5 { // while it replays
		own(r2, fmt.Sprintf("own while replaying %d", i))
		g.edit(t, ctx)
	}
	until(t, "live", r2.Live)
	g.caughtUp(t, ctx, r2)
	s, err := r2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.sameAsFresh(t, ctx, s)
	t.Logf("streamed %d, gaps %d, reads %d+%d, said %q", r2.Stats.Streamed.Load(), r2.Stats.StreamGaps.Load(), r2.Stats.Diffs.Load(), r2.Stats.CARs.Load(), errs())
}

// TestFollowAccountReactivated: a #account event of this repository that
// says it is inactive makes reads ask the PDS (which says what is wrong);
// one that says it is active again makes the stream live again, with the
// kept repository read up to date, rather than leave reads asking until the
// connection happens to end.
func TestFollowAccountReactivated(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	follow(t, ctx, r)
	until(t, "live", r.Live)
	did := g.acct.DID.String()
	noErr := func(err error) { t.Errorf("said: %v", err) }
	pds.InjectEvent(ctx, r, &events.XRPCStreamEvent{RepoAccount: &comatproto.SyncSubscribeRepos_Account{Did: did, Active: false}}, noErr)
	if r.Live() {
		t.Fatal("live after #account inactive")
	}
	rev := g.edit(t, ctx) // taken in, or read
	pds.InjectEvent(ctx, r, &events.XRPCStreamEvent{RepoAccount: &comatproto.SyncSubscribeRepos_Account{Did: did, Active: true}}, noErr)
	until(t, "live again after #account active", r.Live)
	g.caughtUp(t, ctx, r)
	before := requests(r)
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := requests(r) - before; n != 0 || s.Rev < rev {
		t.Fatalf("a read after reactivation made %d request(s) and is at %s (the edit %s)", n, s.Rev, rev)
	}
	g.sameAsFresh(t, ctx, s)
}

// TestFollowListOnly: a repository read by listRecords (no CAR kept) is
// never answered from the stream: each read asks the PDS, and is current.
func TestFollowListOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	r.ListOnly = true
	errs, _ := follow(t, ctx, r)
	until(t, "connected", func() bool { return r.Stats.ListPages.Load() > 0 })
	for i := range 5 {
		rev := g.edit(t, ctx)
		before := requests(r)
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if requests(r) == before || s.Rev != rev {
			t.Fatalf("edit %d: a listRecords read made no request or is at %s, not %s", i, s.Rev, rev)
		}
		g.sameAsFresh(t, ctx, s)
		if _, _, _, ok, _ := r.Changes(ctx, s.Commit); ok {
			t.Fatal("Changes answered for a listRecords repository")
		}
	}
	t.Logf("list pages %d, gaps %d, said %q", r.Stats.ListPages.Load(), r.Stats.StreamGaps.Load(), errs())
}

// TestFollowTwoProcessesShareCache: two servers on one data directory
// follow at once, each writing the cache file and the stream's position
// (with their own commits and the app's interleaved); a third started
// after both stop resumes from whatever pair of files they left, and is
// right.
func TestFollowTwoProcessesShareCache(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	open := func() *pds.Repo {
		r := g.login()
		r.Cache, r.Cursor = filepath.Join(dir, "repo.car"), filepath.Join(dir, "stream.json")
		return r
	}
	ctx1, stop := context.WithCancel(ctx)
	a, b := open(), open()
	_, doneA := follow(t, ctx1, a)
	_, doneB := follow(t, ctx1, b)
	until(t, "live", func() bool { return a.Live() && b.Live() })
	for i := range 30 {
		g.edit(t, ctx)
		r := a
		if i%2 == 1 {
			r = b
		}
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// many blocks each, so that the cache is written often
		var ws []store.Write
		for j := range 20 {
			ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: syntax.NewTIDNow(uint(j)).String(), Value: node(fmt.Sprintf("by %d.%d", i, j))})
		}
		if _, err := r.Apply(ctx, s.Commit, ws); err != nil && !errors.Is(err, store.ErrConflict) {
			t.Fatal(err)
		}
	}
	g.caughtUp(t, ctx, a)
	g.caughtUp(t, ctx, b)
	stop()
	<-doneA
	<-doneB
	g.edit(t, ctx)
	c := open()
	ctx3, stop3 := context.WithCancel(ctx)
	errs, done := follow(t, ctx3, c)
	defer func() { stop3(); <-done }() // its last writes before the directory goes
	until(t, "live", c.Live)
	g.caughtUp(t, ctx, c)
	s, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.sameAsFresh(t, ctx, s)
	t.Logf("the third: streamed %d, reads %d+%d, cache loads %d, said %q", c.Stats.Streamed.Load(), c.Stats.Diffs.Load(), c.Stats.CARs.Load(), c.Stats.CacheLoads.Load(), errs())
}

// answerGate holds the answer to the first request whose path contains
// hold (made, answered by the PDS, then held) while armed.
type answerGate struct {
	hold  string
	armed atomic.Bool
	held  chan struct{}
	open  chan struct{}
}

func (g *answerGate) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if strings.Contains(req.URL.Path, g.hold) && g.armed.CompareAndSwap(true, false) {
		g.held <- struct{}{}
		<-g.open
	}
	return resp, err
}

// TestFollowReplayOvertakenByRead: a restarted server replays the stream
// from the kept position, and the client's first call reads the repository
// meanwhile, past the commit the replay was to reach: the replay then
// brings only commits already in. The stream is live once the replay has
// passed them, not after replayWait with a "stuck replay" said.
func TestFollowReplayOvertakenByRead(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	r1 := g.followThenStop(t, ctx, dir, "", 1)
	g.edit(t, ctx) // while down: the replay's target

	gt := &answerGate{hold: "com.atproto.sync.getLatestCommit", held: make(chan struct{}, 1), open: make(chan struct{})}
	gt.armed.Store(true)
	r2 := pdstest.Login(t, g.srv, g.acct, t.TempDir(), &http.Client{Transport: gt, Timeout: time.Minute})
	r2.Directory = pds.Directory(g.srv.PLCURL)
	r2.Cache, r2.Cursor = r1.Cache, r1.Cursor
	errs, _ := follow(t, ctx, r2)
	select { // the replay's head, answered and held
	case <-gt.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("no replay: said %q", errs())
	}
	last := g.edit(t, ctx)
	if _, err := r2.Snapshot(ctx); err != nil { // the client's first call
		t.Fatal(err)
	}
	if pds.KeptRev(r2) != last {
		t.Fatalf("the call read %s, not %s", pds.KeptRev(r2), last)
	}
	close(gt.open)
	start := time.Now()
	until(t, "live", r2.Live)
	for _, e := range errs() {
		if strings.Contains(e, "did not reach") {
			t.Fatalf("live after %v, with a stuck replay said: %q", time.Since(start).Round(time.Millisecond), errs())
		}
	}
	s, err := r2.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.sameAsFresh(t, ctx, s)
}

// TestFollowCutsInABurst: the app edits without pause while the stream's
// connection is killed twice; while it is down a read is at least at the
// app's last edit (never staler), and once it is back the repository
// follows again and ends equal to a fresh read.
func TestFollowCutsInABurst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	u, _ := url.Parse(g.srv.URL)
	cut := newCutter(t, u.Host)
	r.StreamHost = "http://" + cut.ln.Addr().String()
	follow(t, ctx, r)
	until(t, "live", r.Live)
	var last atomic.Value
	last.Store("")
	burst, stopBurst := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for burst.Err() == nil {
			last.Store(g.edit(t, ctx))
		}
	})
	for range 2 {
		time.Sleep(300 * time.Millisecond)
		cut.down.Store(true)
		cut.cut()
		until(t, "not live once killed", func() bool { return !r.Live() })
		want := last.Load().(string)
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Rev < want {
			t.Fatalf("a read with the stream down is at %s, the app's last edit at %s", s.Rev, want)
		}
		cut.down.Store(false)
		until(t, "live again", r.Live)
	}
	time.Sleep(300 * time.Millisecond)
	stopBurst()
	wg.Wait()
	g.caughtUp(t, ctx, r)
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.sameAsFresh(t, ctx, s)
	t.Logf("%d edits; streamed %d, gaps %d", g.n, r.Stats.Streamed.Load(), r.Stats.StreamGaps.Load())
}

// TestFollowEngineAmidTheAppsBurst: the engine inserts while the app edits
// without pause; every insert lands (conflicts re-planned on a current
// read), and the engine's tree ends equal to a fresh read.
func TestFollowEngineAmidTheAppsBurst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	follow(t, ctx, r)
	until(t, "live", r.Live)
	e, err := outline.Open(r, outline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	burst, stopBurst := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { // a quick person: an edit every 100 ms (without pause, the
		// engine's read-plan-write loses every race, following or not)
		for burst.Err() == nil {
			g.edit(t, ctx)
			time.Sleep(100 * time.Millisecond)
		}
	})
	for i := range 10 {
		if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: fmt.Sprintf("agent %d", i)}}}, false); err != nil {
			stopBurst()
			wg.Wait()
			t.Fatalf("insert %d amid the app's edits: %v", i, err)
		}
	}
	stopBurst()
	wg.Wait()
	g.caughtUp(t, ctx, r)
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.sameAsFresh(t, ctx, s)
	if tr.Commit != s.Commit || len(tr.Records()) != len(s.Records) {
		t.Fatalf("the engine's tree (%s, %d records) is not the repository (%s, %d)", tr.Commit, len(tr.Records()), s.Commit, len(s.Records))
	}
	t.Logf("%d app edits; streamed %d, gaps %d, writes %d", g.n, r.Stats.Streamed.Load(), r.Stats.StreamGaps.Load(), r.Stats.Writes.Load())
}

// TestFollowJetstreamAccountReactivated: Jetstream's account events, as
// the PDS stream's: inactive makes reads ask, active again makes the
// stream live again.
func TestFollowJetstreamAccountReactivated(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	js := newFakeJetstream(t)
	r := g.login()
	r.Jetstream = js.URL
	follow(t, ctx, r)
	until(t, "live", r.Live)
	did := g.acct.DID.String()
	js.send <- map[string]any{"did": did, "time_us": time.Now().UnixMicro(), "kind": "account", "account": map[string]any{"active": false, "did": did}}
	until(t, "not live after account inactive", func() bool { return !r.Live() })
	js.send <- map[string]any{"did": did, "time_us": time.Now().UnixMicro(), "kind": "account", "account": map[string]any{"active": true, "did": did}}
	until(t, "live after account active", r.Live)
}

// composedIsKept checks, once r has caught up, that r reads as a fresh whole
// read does, and that what Changes gives since *since, folded into seen
// (path → "CID text"), is that repository; *since moves on to it.
func (g *followRig) composedIsKept(t *testing.T, ctx context.Context, r *pds.Repo, what string, seen map[string]string, since *string) {
	t.Helper()
	g.caughtUp(t, ctx, r)
	s := g.readSameAsFresh(t, ctx, r)
	c, _, ch, ok, err := r.Changes(ctx, *since)
	if err != nil || !ok {
		t.Fatalf("%s: Changes since %s: ok %v, %v", what, *since, ok, err)
	}
	for _, rec := range ch {
		k := rec.Collection + "/" + rec.RKey
		if rec.Value.IsZero() {
			delete(seen, k)
		} else {
			seen[k] = fmt.Sprintf("%s %v", rec.CID, rec.Value.Get("text"))
		}
	}
	*since = c
	if c != s.Commit || !maps.Equal(seen, byPath(s.Records)) {
		t.Fatalf("%s: what Changes composed (at %s) is not the repository (at %s):\ncomposed %v\nkept     %v", what, c, s.Commit, seen, byPath(s.Records))
	}
}
