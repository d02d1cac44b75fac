package pds_test

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// TestFollowHub: one connection to the reference PDS's commit stream
// follows two repositories: each one's commit made straight to the PDS by
// another client rings that repository alone and is taken in from the
// stream (verified, no read), a third account nobody holds is ignored
// before its blocks are looked at, a repository that left hears nothing
// more, and one that joins later needs no connection of its own.
func TestFollowHub(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := pdstest.Start(t, pdstest.Options{})
	dir := pds.Directory(srv.PLCURL)
	type held struct {
		acct  *pdstest.Account
		r     *pds.Repo
		rings chan struct{}
		leave func()
	}
	hub := pds.NewHub(srv.URL)
	hub.Errs = func(err error) { t.Logf("hub: %v", err) }
	open := func(name string) *held {
		t.Helper()
		a, err := srv.CreateAccount(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c, did, err := pds.Login{PDS: srv.URL, Identifier: a.Handle, Password: a.AppPassword, Dir: t.TempDir()}.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := pds.New(c, did)
		r.Directory = dir
		return &held{acct: a, r: r, rings: make(chan struct{}, 64)}
	}
	join := func(h *held) {
		h.leave = hub.Join(ctx, h.r, func() { h.rings <- struct{}{} })
	}
	wait := func(h *held, what string) {
		t.Helper()
		select {
		case <-h.rings:
		case <-time.After(30 * time.Second): // a bound for a stuck stream, not a speed check
			t.Fatalf("%s: no ring", what)
		}
	}
	// quiet: h took in nothing since it was at rev (the stream is in
	// order: a commit read after another's tells that one was passed)
	quiet := func(h *held, rev, what string) {
		t.Helper()
		if got := pds.KeptRev(h.r); got != rev {
			t.Fatalf("%s: moved from %s to %s", what, rev, got)
		}
	}
	create := func(h *held, text string) string {
		t.Helper()
		app, err := srv.Client(ctx, h.acct)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Commit struct {
				Rev string `json:"rev"`
			} `json:"commit"`
		}
		if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": h.acct.DID.String(), "collection": "app.bulleted.node",
			"record": map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "z", "createdAt": "2026-12-04T10:00:00.000Z"}}, &out); err != nil {
			t.Fatal(err)
		}
		return out.Commit.Rev
	}
	// reached waits for h's kept repository to reach rev (a ring may be
	// for a commit already read: the stream can bring a commit made just
	// before the connection)
	reached := func(h *held, rev, what string) {
		t.Helper()
		for pds.KeptRev(h.r) < rev {
			wait(h, what)
		}
	}
	a, b, c := open("huba"), open("hubb"), open("hubc")
	create(a, "before") // something to read
	join(a)
	join(b)
	hubCtx, stopHub := context.WithCancel(ctx)
	ran := make(chan struct{})
	go func() { defer close(ran); hub.Run(hubCtx) }()
	wait(a, "a's catch-up")
	wait(b, "b's catch-up")
	bAt := pds.KeptRev(b.r)

	create(c, "nobody holds c")
	reached(a, create(a, "from a's app"), "a's commit")
	if got := a.r.Stats.Streamed.Load(); got != 1 {
		t.Fatalf("a took in %d commits from the stream, want 1 (last gap %q, kept %s, heard %s, gaps %d, CARs %d, diffs %d, heads %d, dispatched %d)", got, pds.LastGap(a.r), pds.KeptRev(a.r), pds.LastHeard(a.r), a.r.Stats.StreamGaps.Load(), a.r.Stats.CARs.Load(), a.r.Stats.Diffs.Load(), a.r.Stats.Heads.Load(), hub.Dispatched.Load())
	}
	quiet(b, bAt, "b, for a's and c's commits,")
	if hub.Ignored.Load() == 0 {
		t.Fatal("c's commit was not ignored")
	}
	aAt := pds.KeptRev(a.r)
	reached(b, create(b, "from b's app"), "b's commit")
	if got := b.r.Stats.Streamed.Load(); got != 1 {
		t.Fatalf("b took in %d commits from the stream, want 1", got)
	}
	quiet(a, aAt, "a, for b's commit,")

	// b leaves: its next commit is ignored; c joins on the same connection
	b.leave()
	join(c)
	wait(c, "c's catch-up")
	ignored := hub.Ignored.Load()
	bAt = pds.KeptRev(b.r)
	create(b, "b no longer held")
	reached(c, create(c, "from c's app"), "c's commit")
	quiet(b, bAt, "b after it left")
	if hub.Ignored.Load() <= ignored {
		t.Fatal("b's commit after it left was not ignored")
	}
	if got := c.r.Stats.Streamed.Load(); got != 1 {
		t.Fatalf("c took in %d commits from the stream, want 1", got)
	}
	if n := hub.Connections.Load(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
	s, err := c.r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Records) != 2 {
		t.Fatalf("c reads %d records, want 2", len(s.Records))
	}

	// live (settled after its catch-up), c's reads answer without a
	// request; the connection gone, they ask the PDS again
	for bound := time.Now().Add(30 * time.Second); !c.r.Live(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(bound) {
			t.Fatal("c is not live")
		}
	}
	asked := c.r.Stats.Diffs.Load() + c.r.Stats.Heads.Load() + c.r.Stats.CARs.Load()
	if _, err := c.r.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if n := c.r.Stats.Diffs.Load() + c.r.Stats.Heads.Load() + c.r.Stats.CARs.Load(); n != asked {
		t.Fatal("c's read asked the PDS while live")
	}
	stopHub()
	<-ran
	if c.r.Live() {
		t.Fatal("c is live without a connection")
	}
	diffs := c.r.Stats.Diffs.Load() + c.r.Stats.Heads.Load()
	if _, err := c.r.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if c.r.Stats.Diffs.Load()+c.r.Stats.Heads.Load() == diffs {
		t.Fatal("c's read without a connection did not ask the PDS")
	}
}

// TestFollowHubReconnects: the hub's connection killed, its members stop
// answering from the stream (reads ask the PDS); once it reconnects each
// member catches up on what it missed (an edit made while it was down)
// and takes in the next commit from the stream again.
func TestFollowHubReconnects(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := pdstest.Start(t, pdstest.Options{})
	u, _ := url.Parse(srv.URL)
	cut := newCutter(t, u.Host)
	hub := pds.NewHub("http://" + cut.ln.Addr().String())
	var mu sync.Mutex
	down := 0
	hub.Errs = func(err error) {
		if errors.Is(err, pds.ErrStreamDown) {
			mu.Lock()
			down++
			mu.Unlock()
		}
	}
	type member struct {
		acct *pdstest.Account
		r    *pds.Repo
	}
	var ms []member
	for _, name := range []string{"hubr1", "hubr2"} {
		a, err := srv.CreateAccount(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		c, did, err := pds.Login{PDS: srv.URL, Identifier: a.Handle, Password: a.AppPassword, Dir: t.TempDir()}.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := pds.New(c, did)
		r.Directory = pds.Directory(srv.PLCURL)
		hub.Join(ctx, r, func() {})
		ms = append(ms, member{a, r})
	}
	create := func(m member, text string) string {
		t.Helper()
		app, err := srv.Client(ctx, m.acct)
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Commit struct {
				Rev string `json:"rev"`
			} `json:"commit"`
		}
		if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": m.acct.DID.String(), "collection": "app.bulleted.node",
			"record": map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "z", "createdAt": "2026-12-04T10:00:00.000Z"}}, &out); err != nil {
			t.Fatal(err)
		}
		return out.Commit.Rev
	}
	go hub.Run(ctx)
	for _, m := range ms {
		until(t, "live", m.r.Live)
	}
	cut.down.Store(true)
	cut.cut()
	for _, m := range ms {
		until(t, "not live once killed", func() bool { return !m.r.Live() })
	}
	missed := create(ms[0], "while the stream is down")
	streamed := ms[1].r.Stats.Streamed.Load()
	cut.down.Store(false)
	for _, m := range ms {
		until(t, "live again", m.r.Live)
	}
	if got := pds.KeptRev(ms[0].r); got < missed {
		t.Fatalf("after the reconnection the first member is at %s, the edit made while down at %s", got, missed)
	}
	rev := create(ms[1], "after the reconnection")
	until(t, "taken in after the reconnection", func() bool { return pds.KeptRev(ms[1].r) >= rev })
	if ms[1].r.Stats.Streamed.Load() <= streamed {
		t.Fatal("the commit after the reconnection was not taken in from the stream")
	}
	mu.Lock()
	defer mu.Unlock()
	if down == 0 || hub.Connections.Load() < 2 {
		t.Fatalf("the killed connection was not said (%d) or not made again (%d connections)", down, hub.Connections.Load())
	}
}
