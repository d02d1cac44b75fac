package pds

import (
	"context"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// TestHubMemberBehind: a hub member whose messages pile up past hubQueue
// (its goroutine stuck on one) drops those waiting and is read instead (one
// catch-up step in their place), and the commits they counted as on their
// way (heard: reads and writes wait for them) are no longer counted; a
// member that left drops what waits too.
func TestHubMemberBehind(t *testing.T) {
	h := NewHub("http://127.0.0.1:1")
	r := New(nil, syntax.DID("did:plc:hubmemberbehind"))
	conn, endConn := context.WithCancel(context.Background())
	mctx, cancel := context.WithCancel(context.Background())
	m := &hubMember{h: h, r: r, ctx: mctx, cancel: cancel, user: func() {}}
	m.changed = m.kick
	stuck, release := make(chan struct{}), make(chan struct{})
	m.enqueue(hubStep{conn: conn, run: func() { close(stuck); <-release }})
	<-stuck
	count := func() {
		r.mu.Lock()
		r.stream.incoming++
		r.stream.news++
		r.mu.Unlock()
	}
	ran := 0
	for range hubQueue + 1 {
		count() // as heard would, for a commit newer than the head known
		m.enqueue(hubStep{conn: conn, counted: true, run: func() { ran++ }})
	}
	m.mu.Lock()
	queued := len(m.queue)
	m.mu.Unlock()
	r.mu.Lock()
	incoming, news := r.stream.incoming, r.stream.news
	r.mu.Unlock()
	if queued != 1 || incoming != 0 || news != 0 {
		t.Fatalf("past the bound: %d queued (want the one catch-up), %d incoming and %d news counted (want 0)", queued, incoming, news)
	}
	// the catch-up is of a connection that ended meanwhile: skipped
	endConn()
	drained := make(chan struct{})
	m.enqueue(hubStep{run: func() { close(drained) }}) // (no connection: always runs, after the rest)
	close(release)
	<-drained
	if ran != 0 {
		t.Fatalf("%d dropped steps ran", ran)
	}
	if gaps := r.Stats.StreamGaps.Load(); gaps != 0 {
		t.Fatalf("the catch-up of an ended connection ran (%d gaps)", gaps)
	}

	// a member that left: what it is handed is dropped, its count undone
	m.stop()
	count()
	m.enqueue(hubStep{conn: context.Background(), counted: true, run: func() { ran++ }})
	r.mu.Lock()
	incoming, news = r.stream.incoming, r.stream.news
	r.mu.Unlock()
	if ran != 0 || incoming != 0 || news != 0 {
		t.Fatalf("after leaving: %d ran, %d incoming, %d news", ran, incoming, news)
	}
}

// TestHubJoinTwice: the same repository joined again (a user opened twice
// at once) stays followed through the hub; stopping the member it replaces
// does not clear what the new one set.
func TestHubJoinTwice(t *testing.T) {
	h := NewHub("http://127.0.0.1:1")
	r := New(nil, syntax.DID("did:plc:hubjointwice"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leave1 := h.Join(ctx, r, func() {})
	leave2 := h.Join(ctx, r, func() {})
	r.mu.Lock()
	following := r.stream.following
	r.mu.Unlock()
	if !following || r.stream.shared.Load() == nil {
		t.Fatalf("joined twice: following %v, shared %v (want the hub's)", following, r.stream.shared.Load() != nil)
	}
	leave1() // the replaced member's leave does nothing
	if r.stream.shared.Load() == nil {
		t.Fatal("the first join's leave ended the second's")
	}
	leave2()
	if r.stream.shared.Load() != nil {
		t.Fatal("left, still shared")
	}
}
