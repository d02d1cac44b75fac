package pds_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/indigo/events"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// followRig is a reference PDS, an account, the person's app (a second
// client writing straight to the PDS) and helpers to compare a followed
// repository with a fresh whole read.
type followRig struct {
	srv   *pdstest.Server
	acct  *pdstest.Account
	app   *atclient.APIClient
	login func() *pds.Repo
	rkeys []string // records the app created and not yet deleted
	rng   *mrand.Rand
	n     int
}

func newFollowRig(t *testing.T, ctx context.Context) *followRig {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	acct := pdstest.NewAccount(t, srv) // the package's reference PDS (TestMain)
	app, err := srv.Client(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rig := &followRig{srv: srv, acct: acct, app: app, rng: mrand.New(mrand.NewPCG(seed, 1))}
	dir := t.TempDir()
	rig.login = func() *pds.Repo {
		t.Helper()
		c, did, err := pds.Login{PDS: srv.URL, Identifier: acct.Handle, Password: acct.AppPassword, Dir: dir}.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := pds.New(c, did)
		r.Directory = pds.Directory(srv.PLCURL)
		return r
	}
	return rig
}

// edit makes one random edit as the app (create, update or delete of a
// bullet; a create when there is nothing to change) and returns the rev of
// its commit.
func (g *followRig) edit(t *testing.T, ctx context.Context) string {
	t.Helper()
	g.n++
	var out struct {
		Commit struct {
			Rev string `json:"rev"`
		} `json:"commit"`
	}
	did := g.acct.DID.String()
	rec := func() map[string]any {
		return map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprintf("edit %d by the app", g.n),
			"sortKey": fmt.Sprintf("k%04d", g.rng.IntN(10000)), "createdAt": "2026-12-04T10:00:00.000Z"}
	}
	op := g.rng.IntN(3)
	if len(g.rkeys) == 0 {
		op = 0
	}
	var err error
	switch op {
	case 0:
		rkey := syntax.NewTIDNow(uint(g.n % 1024)).String()
		err = g.app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": did, "collection": "app.bulleted.node", "rkey": rkey, "record": rec()}, &out)
		g.rkeys = append(g.rkeys, rkey)
	case 1:
		rkey := g.rkeys[g.rng.IntN(len(g.rkeys))]
		err = g.app.Post(ctx, "com.atproto.repo.putRecord", map[string]any{"repo": did, "collection": "app.bulleted.node", "rkey": rkey, "record": rec()}, &out)
	default:
		i := g.rng.IntN(len(g.rkeys))
		rkey := g.rkeys[i]
		g.rkeys = slices.Delete(g.rkeys, i, i+1)
		err = g.app.Post(ctx, "com.atproto.repo.deleteRecord", map[string]any{"repo": did, "collection": "app.bulleted.node", "rkey": rkey}, &out)
	}
	if err != nil {
		t.Fatal(err)
	}
	if out.Commit.Rev == "" {
		t.Fatal("the PDS did not say the commit's rev")
	}
	return out.Commit.Rev
}

// until waits for cond (a bound for a stuck stream, not a speed check).
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requests is every request r made to the PDS so far.
func requests(r *pds.Repo) int64 {
	return r.Stats.Heads.Load() + r.Stats.CARs.Load() + r.Stats.Diffs.Load() + r.Stats.ListPages.Load() + r.Stats.Writes.Load()
}

// sameAsFresh checks that s holds exactly the records a fresh whole read of
// the repository holds.
func (g *followRig) sameAsFresh(t *testing.T, ctx context.Context, s *store.Snapshot) {
	t.Helper()
	fresh, err := g.login().SnapshotCAR(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Commit != fresh.Commit {
		t.Fatalf("followed commit %s, the PDS's %s", s.Commit, fresh.Commit)
	}
	key := func(rs []store.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s/%s %s %v", r.Collection, r.RKey, r.CID, r.Value.Get("text")))
		}
		slices.Sort(out)
		return out
	}
	a, b := key(s.Records), key(fresh.Records)
	if !slices.Equal(a, b) {
		t.Fatalf("the followed repository differs from a fresh read:\nfollowed %d: %v\nfresh %d: %v", len(a), a, len(b), b)
	}
}

// readSameAsFresh reads r (as a call would), checks it against a fresh
// whole read, and returns what it read.
func (g *followRig) readSameAsFresh(t *testing.T, ctx context.Context, r *pds.Repo) *store.Snapshot {
	t.Helper()
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	g.sameAsFresh(t, ctx, s)
	return s
}

// followThenStop runs a follower with a read cache and a stream position in
// dir (its stream through streamHost, if set) while the app makes edits
// edits, waits until they are taken in, and stops it. The stopped follower
// is returned: its Cache and Cursor are the files a restart uses.
func (g *followRig) followThenStop(t *testing.T, ctx context.Context, dir, streamHost string, edits int) *pds.Repo {
	t.Helper()
	r := g.login()
	r.Cache, r.Cursor = filepath.Join(dir, "repo.car"), filepath.Join(dir, "stream.json")
	r.StreamHost = streamHost
	fctx, stop := context.WithCancel(ctx)
	_, done := follow(t, fctx, r)
	until(t, "live", r.Live)
	var rev string
	for range edits {
		rev = g.edit(t, ctx)
	}
	until(t, "taken in", func() bool { return pds.KeptRev(r) >= rev })
	stop()
	<-done
	return r
}

func follow(t *testing.T, ctx context.Context, r *pds.Repo) (errs func() []string, done <-chan struct{}) {
	var mu sync.Mutex
	var seen []string
	d := make(chan struct{})
	go func() {
		defer close(d)
		r.Follow(ctx, func() {}, func(err error) {
			mu.Lock()
			seen = append(seen, err.Error())
			mu.Unlock()
		})
	}()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}, d
}

// TestFollowTakesInCommits (a property test over random edits): while the
// app creates, updates and deletes bullets straight on the PDS, the followed
// repository takes each commit in from the stream, verified, and then
// equals a fresh whole read after every edit, with no request for the read.
func TestFollowTakesInCommits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	errs, _ := follow(t, ctx, r)
	until(t, "live", r.Live)
	const edits = 30
	for i := range edits {
		rev := g.edit(t, ctx)
		until(t, fmt.Sprintf("edit %d taken in", i), func() bool { return pds.KeptRev(r) >= rev })
		before := requests(r)
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if n := requests(r) - before; n != 0 {
			t.Fatalf("edit %d: a read while following made %d request(s), want 0", i, n)
		}
		g.sameAsFresh(t, ctx, s)
	}
	// every commit taken in from the stream; one gap (read instead, as
	// designed) was seen once in a loaded -race run and is tolerated, with
	// its reason logged for whoever looks next. A gap may also be no edit
	// of ours at all: the reference PDS's #sync for a new account, late on
	// a loaded machine (a clean-clone run saw 30 taken in and that gap)
	streamed, gaps := r.Stats.Streamed.Load(), r.Stats.StreamGaps.Load()
	if gaps > 0 {
		t.Logf("%d gap(s), the last: %s", gaps, pds.LastGap(r))
	}
	if streamed > edits || streamed+gaps < edits || gaps > 1 {
		t.Errorf("%d commits taken in from the stream and %d gaps, want %d taken in (said: %q; last gap: %s)", streamed, gaps, edits, errs(), pds.LastGap(r))
	}
}

// TestFollowChangesWithoutRequest: the engine's path (Changes since the
// commit it read) answers from the stream too, with exactly what changed.
func TestFollowChangesWithoutRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	follow(t, ctx, r)
	until(t, "live", r.Live)
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev := g.edit(t, ctx) // a create
	until(t, "taken in", func() bool { return pds.KeptRev(r) >= rev })
	before := requests(r)
	_, got, ch, ok, err := r.Changes(ctx, s.Commit)
	if err != nil || !ok {
		t.Fatalf("Changes: ok %v, %v", ok, err)
	}
	if n := requests(r) - before; n != 0 {
		t.Fatalf("Changes while following made %d request(s), want 0", n)
	}
	if got != rev || len(ch) != 1 || ch[0].RKey != g.rkeys[0] || ch[0].Value.Get("text") != "edit 1 by the app" {
		t.Fatalf("Changes: rev %s (want %s), %+v", got, rev, ch)
	}
}

// TestFollowOwnCommitKeepsNobodyWaiting: our own commit, known from its
// write's answer, arriving again on the stream is no news: nobody waits
// for it to be taken in, and a write planned meanwhile trusts the head
// known (before, the next write of a quick series asked the PDS, or
// waited for the stream, half the time).
func TestFollowOwnCommitKeepsNobodyWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	type dealt struct {
		rev                  string
		heard, waited, known bool
	}
	seen := make(chan dealt, 64)
	var since atomic.Value // the commit before ours
	since.Store("")
	pds.OnDealing(r, func(rev string, heard, waited bool) {
		// a write planned now: does it trust what is known?
		_, _, _, ok := r.KnownChanges(since.Load().(string))
		seen <- dealt{rev, heard, waited, ok}
	})
	follow(t, ctx, r)
	until(t, "live", r.Live)
	checked := 0
	for i := range 8 {
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		since.Store(s.Commit)
		res, err := r.Apply(ctx, s.Commit, []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: fmt.Sprintf("3lown%07d", i),
			Value: map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprint("ours ", i), "sortKey": "a0", "createdAt": "2026-12-06T00:00:00.000Z"}}})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.After(30 * time.Second) // a bound for a stuck stream, not a speed check
	dealt:
		for {
			var d dealt
			select {
			case d = <-seen:
			case <-deadline:
				t.Fatalf("write %d: its commit %s did not come on the stream within 30 s", i, res.Rev)
			}
			if d.rev != res.Rev {
				continue
			}
			if d.heard {
				// read off the connection before the write's answer came
				// back: news then, rightly waited for
				t.Logf("write %d: its commit arrived before its answer", i)
				break dealt
			}
			if d.waited {
				t.Fatalf("write %d: reads waited for our own commit %s, known from its answer, to be taken in again", i, res.Rev)
			}
			if !d.known {
				t.Fatalf("write %d: while our own commit %s was taken in again, a write planned on the commit before it did not trust the head known", i, res.Rev)
			}
			checked++
			break dealt
		}
		until(t, "taken in", func() bool { return pds.KeptRev(r) >= res.Rev })
	}
	if checked == 0 {
		t.Fatal("every commit arrived on the stream before its write's answer: nothing checked")
	}
	if !r.Live() {
		t.Fatal("not live after our own commits")
	}
}

// TestFollowGap: a commit lost from the stream makes the next one not
// follow; the repository is then read (one request), and is right.
func TestFollowGap(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	var lost atomic.Int64
	pds.DropStreamEvents(r, func(seq int64) bool { return lost.CompareAndSwap(0, seq) })
	follow(t, ctx, r)
	until(t, "live", r.Live)
	g.edit(t, ctx)        // lost
	rev := g.edit(t, ctx) // does not follow: a gap, read instead
	until(t, "caught up", func() bool { return pds.KeptRev(r) >= rev && r.Live() })
	if r.Stats.StreamGaps.Load() != 1 || r.Stats.Diffs.Load()+r.Stats.CARs.Load() < 2 {
		t.Fatalf("gaps %d, reads %d+%d: the gap was not read", r.Stats.StreamGaps.Load(), r.Stats.Diffs.Load(), r.Stats.CARs.Load())
	}
	rev = g.edit(t, ctx) // and the stream goes on from there
	until(t, "taken in", func() bool { return pds.KeptRev(r) >= rev })
	g.readSameAsFresh(t, ctx, r)
	if r.Stats.Streamed.Load() != 1 {
		t.Fatalf("%d commits taken in after the gap, want 1", r.Stats.Streamed.Load())
	}
}

// cutter forwards TCP connections to target and can cut them all.
type cutter struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	down  atomic.Bool // refuse new connections
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{ln: ln}
	t.Cleanup(func() { ln.Close(); c.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			if c.down.Load() {
				in.Close()
				continue
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns = append(c.conns, in, out)
			c.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return c
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.conns {
		x.Close()
	}
	c.conns = nil
}

// TestFollowKilledWebsocket: when the stream's connection is killed, reads
// ask the PDS again (never staler: an edit made meanwhile is read), and once
// it reconnects the repository is current and taken in from the stream.
func TestFollowKilledWebsocket(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	u, _ := url.Parse(g.srv.URL)
	cut := newCutter(t, u.Host)
	r.StreamHost = "http://" + cut.ln.Addr().String()
	errs, _ := follow(t, ctx, r)
	until(t, "live", r.Live)
	rev := g.edit(t, ctx)
	until(t, "taken in", func() bool { return pds.KeptRev(r) >= rev })

	cut.down.Store(true)
	cut.cut()
	until(t, "not live once killed", func() bool { return !r.Live() })
	rev = g.edit(t, ctx) // while the stream is down
	before := requests(r)
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if requests(r) == before {
		t.Fatal("a read while the stream is down made no request")
	}
	if s.Rev != rev {
		t.Fatalf("a read while the stream is down is at %s, the app's edit at %s: staler than without following", s.Rev, rev)
	}
	g.edit(t, ctx) // one more while down, left for the reconnection to find
	cut.down.Store(false)
	until(t, "live again", r.Live)
	rev = g.edit(t, ctx)
	until(t, "taken in after the reconnection", func() bool { return pds.KeptRev(r) >= rev })
	g.readSameAsFresh(t, ctx, r)
	down := 0
	for _, e := range errs() {
		if strings.Contains(e, "the commit stream is down") {
			down++
		}
	}
	if down == 0 {
		t.Fatalf("the killed connection was not said: %q", errs())
	}
}

// TestFollowRestartReplaysFromCursor: a Follow that stops keeps the
// stream's position with the cache; a new one (a restarted server) replays
// the commits made while it was down from the stream, with no repository
// read at all, and ends current.
func TestFollowRestartReplaysFromCursor(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	r1 := g.followThenStop(t, ctx, dir, "", 3)
	var rev string
	for range 3 {
		rev = g.edit(t, ctx) // while no server runs
	}
	r2 := g.login()
	r2.Cache, r2.Cursor = r1.Cache, r1.Cursor
	errs, _ := follow(t, ctx, r2)
	until(t, "replayed", func() bool { return pds.KeptRev(r2) >= rev && r2.Live() })
	if r2.Stats.CARs.Load() != 0 || r2.Stats.Diffs.Load() != 0 || r2.Stats.CacheLoads.Load() != 1 {
		t.Fatalf("a restart read the repository (CARs %d, diffs %d, cache loads %d): not replayed from the cursor; said %q",
			r2.Stats.CARs.Load(), r2.Stats.Diffs.Load(), r2.Stats.CacheLoads.Load(), errs())
	}
	if r2.Stats.Streamed.Load() != 3 {
		t.Fatalf("%d commits replayed, want 3", r2.Stats.Streamed.Load())
	}
	g.readSameAsFresh(t, ctx, r2)
}

// TestFollowRefusesUnverifiedCommits: commits that do not verify against
// the account's key (here: a directory that names another key) are not
// taken in; it is said, and the repository is read instead, and is right.
func TestFollowRefusesUnverifiedCommits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	key, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := identity.NewMockDirectory()
	dir.Insert(identity.Identity{DID: g.acct.DID, Keys: map[string]identity.VerificationMethod{
		"atproto": {Type: "Multikey", PublicKeyMultibase: pub.Multibase()}}})
	r.Directory = dir
	errs, _ := follow(t, ctx, r)
	until(t, "live", r.Live)
	rev := g.edit(t, ctx)
	until(t, "read instead", func() bool { return pds.KeptRev(r) >= rev })
	if r.Stats.Streamed.Load() != 0 {
		t.Fatal("a commit signed by another key was taken in")
	}
	said := false
	for _, e := range errs() {
		said = said || strings.Contains(e, "failed verification")
	}
	if !said {
		t.Fatalf("the failed verification was not said: %q", errs())
	}
	g.readSameAsFresh(t, ctx, r)
}

// TestFollowEngineReadsWithoutRequest: the engine's read after the app's
// edit costs one request without following and none while following; its
// own writes (swapCommit-guarded) go on as before, and the tree holds both.
func TestFollowEngineReadsWithoutRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	reads := func(r *pds.Repo, e *outline.Engine) int64 {
		t.Helper()
		rev := g.edit(t, ctx)
		until(t, "taken in", func() bool { return !r.Live() || pds.KeptRev(r) >= rev })
		before := requests(r)
		tr, err := e.Tree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Rev != rev {
			t.Fatalf("the engine reads %s after the app's edit %s", tr.Rev, rev)
		}
		return requests(r) - before
	}
	open := func(r *pds.Repo) *outline.Engine {
		e, err := outline.Open(r, outline.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "by the agent"}}}, false); err != nil {
			t.Fatal(err)
		}
		return e
	}
	r0 := g.login()
	without := reads(r0, open(r0))
	r := g.login()
	follow(t, ctx, r)
	until(t, "live", r.Live)
	e := open(r)
	with := reads(r, e)
	t.Logf("requests for a read after another client's edit: %d without following, %d following", without, with)
	// without following: getLatestCommit (the agent's own commit may be the
	// head) and getRepo?since for the app's blocks
	if without < 1 || with != 0 {
		t.Fatalf("requests for a read after another client's edit: %d without following (want ≥ 1), %d following (want 0)", without, with)
	}
	if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "again by the agent"}}}, false); err != nil {
		t.Fatal(err)
	}
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := g.readSameAsFresh(t, ctx, r)
	if tr.Commit != s.Commit || len(tr.Records()) != len(s.Records) {
		t.Fatalf("the engine's tree (%s, %d records) is not the followed repository (%s, %d)", tr.Commit, len(tr.Records()), s.Commit, len(s.Records))
	}
}

// BenchmarkFollowMemory is what following costs in memory: the live heap
// of a repository of about 10,000 records after a read and 20 edits by the
// app, read by a call each (not following) or taken in from the stream
// (following), and the goroutines following adds.
//
//	go test ./internal/pds -run '^$' -bench FollowMemory -benchtime 1x
func BenchmarkFollowMemory(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := pdstest.NewAccount(b, srv)
	seeded := pdstest.Login(b, srv, a, b.TempDir(), nil)
	recs := seedGenerated(b, seeded, 9_100)
	app, err := srv.Client(ctx, a)
	if err != nil {
		b.Fatal(err)
	}
	edit := func(i int) string {
		var out struct {
			Commit struct {
				Rev string `json:"rev"`
			} `json:"commit"`
		}
		if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": a.DID.String(), "collection": "app.bulleted.node",
			"record": map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprintf("app edit %d", i), "sortKey": "zz", "createdAt": "2026-12-04T10:00:00.000Z"}}, &out); err != nil {
			b.Fatal(err)
		}
		return out.Commit.Rev
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for b.Loop() {
		run := func(following bool) (uint64, int) {
			base, g0 := heap(), runtime.NumGoroutine()
			r := pdstest.Login(b, srv, a, b.TempDir(), nil)
			r.Directory = pds.Directory(srv.PLCURL)
			fctx, stop := context.WithCancel(ctx)
			defer stop()
			if following {
				go r.Follow(fctx, func() {}, nil)
				for !r.Live() {
					time.Sleep(5 * time.Millisecond)
				}
			} else if _, err := r.Snapshot(ctx); err != nil {
				b.Fatal(err)
			}
			for i := range 20 {
				rev := edit(i)
				if following {
					for pds.KeptRev(r) < rev {
						time.Sleep(2 * time.Millisecond)
					}
				}
				if _, err := r.Snapshot(ctx); err != nil {
					b.Fatal(err)
				}
			}
			used, g := heap()-base, runtime.NumGoroutine()-g0
			runtime.KeepAlive(r)
			return used, g
		}
		off, _ := run(false)
		on, g := run(true)
		b.ReportMetric(float64(recs), "records")
		b.ReportMetric(float64(off)/(1<<20), "MB-not-following")
		b.ReportMetric(float64(on)/(1<<20), "MB-following")
		b.ReportMetric((float64(on)-float64(off))/(1<<20), "MB-extra")
		b.ReportMetric(float64(g), "goroutines-extra")
	}
}

// TestFollowTooBigAndSyncAreGaps: a commit the stream says is too big for
// it, and a #sync of this repository, are read from the PDS instead (and a
// #sync that does not verify is said).
func TestFollowTooBigAndSyncAreGaps(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	pds.DropStreamEvents(r, func(seq int64) bool { return seq > 0 }) // the stream's own events are lost (the injected have none)
	follow(t, ctx, r)
	until(t, "live", r.Live)
	var said []string
	errs := func(err error) { said = append(said, err.Error()) }
	did := g.acct.DID.String()
	rev := g.edit(t, ctx)
	pds.InjectEvent(ctx, r, &events.XRPCStreamEvent{RepoCommit: &comatproto.SyncSubscribeRepos_Commit{Repo: did, Rev: rev, TooBig: true}}, errs)
	if pds.KeptRev(r) != rev || r.Stats.StreamGaps.Load() != 1 || !r.Live() {
		t.Fatalf("after a tooBig commit: kept %s (want %s), gaps %d, live %v", pds.KeptRev(r), rev, r.Stats.StreamGaps.Load(), r.Live())
	}
	rev = g.edit(t, ctx)
	pds.InjectEvent(ctx, r, &events.XRPCStreamEvent{RepoSync: &comatproto.SyncSubscribeRepos_Sync{Did: did, Rev: rev}}, errs)
	if pds.KeptRev(r) != rev || r.Stats.StreamGaps.Load() != 2 {
		t.Fatalf("after a #sync: kept %s (want %s), gaps %d", pds.KeptRev(r), rev, r.Stats.StreamGaps.Load())
	}
	if len(said) != 1 || !strings.Contains(said[0], "#sync") {
		t.Fatalf("a #sync without a verifiable commit was not said once: %q", said)
	}
	g.readSameAsFresh(t, ctx, r)
}

// TestFollowUnusablePosition: a kept position the PDS cannot replay from
// (here: one far past its stream) does not keep the follower from going
// live: it is said, and read instead.
func TestFollowUnusablePosition(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	r1 := g.followThenStop(t, ctx, dir, "", 1)
	raw, err := os.ReadFile(r1.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	var pos map[string]any
	if err := json.Unmarshal(raw, &pos); err != nil {
		t.Fatal(err)
	}
	pos["seq"] = 1_000_000_000
	raw, _ = json.Marshal(pos)
	if err := os.WriteFile(r1.Cursor, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	rev := g.edit(t, ctx) // while down
	r2 := g.login()
	r2.Cache, r2.Cursor = r1.Cache, r1.Cursor
	errs, _ := follow(t, ctx, r2)
	until(t, "live after an unusable position", func() bool { return r2.Live() && pds.KeptRev(r2) >= rev })
	if len(errs()) == 0 {
		t.Fatal("an unusable position was not said")
	}
	t.Logf("said: %q", errs())
	g.readSameAsFresh(t, ctx, r2)
}
