package pds

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
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

// TestHubCatchUpRetried: a member whose catch-up fails (the PDS answers an
// error) is said so and tried again, each wait twice the last, for as
// long as its connection lasts; once the connection ends it stops (failed
// before: one attempt, and the member's reads asked the PDS until the
// next connection).
func TestHubCatchUpRetried(t *testing.T) {
	var asked atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte(`{"error":"Unavailable","message":"not now"}`))
	}))
	defer srv.Close()
	defer func(w time.Duration) { catchUpRetry = w }(catchUpRetry)
	catchUpRetry = 5 * time.Millisecond
	h := NewHub(srv.URL)
	var mu sync.Mutex
	var said []string
	tries := make(chan struct{}, 100)
	h.Errs = func(err error) {
		mu.Lock()
		said = append(said, err.Error())
		mu.Unlock()
		tries <- struct{}{}
	}
	r := New(atclient.NewAPIClient(srv.URL), syntax.DID("did:plc:hubcatchupretried"))
	conn, endConn := context.WithCancel(context.Background())
	mctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := &hubMember{h: h, r: r, ctx: mctx, cancel: cancel, user: func() {}}
	m.changed = m.kick
	done := make(chan struct{})
	go func() { defer close(done); h.catchUp(conn, m) }()
	for i := range 3 {
		select {
		case <-tries:
		case <-time.After(30 * time.Second):
			endConn()
			<-done
			t.Fatalf("the failed catch-up was tried %d time(s) in 30 s", i)
		}
	}
	endConn()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(said) < 3 || !strings.Contains(said[0], "tried again in 5ms") || !strings.Contains(said[1], "tried again in 10ms") || !strings.Contains(said[2], "tried again in 20ms") {
		t.Fatalf("the failed catch-up was said %d time(s): %q", len(said), said)
	}
	if r.Live() {
		t.Fatal("a member whose catch-up failed is live")
	}
	if asked.Load() < 3 {
		t.Fatalf("the PDS was asked %d time(s)", asked.Load())
	}
}
