package pds_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// gatedGetRepo holds every getRepo request until open is closed (or the
// request's context ends), counting them.
type gatedGetRepo struct {
	open     chan struct{}
	requests atomic.Int64
}

func (g *gatedGetRepo) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.Contains(req.URL.Path, "com.atproto.sync.getRepo") {
		g.requests.Add(1)
		select {
		case <-g.open:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return http.DefaultTransport.RoundTrip(req)
}

// waitFor waits (at most 20 s) for cond.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited 20 s for %s", what)
		}
	}
}

// Reads that come while a whole read is under way wait for it and share
// its snapshot: one download, not one each (at start, a client's first
// read and the commit stream's catch-up came together and doubled the
// memory of starting).
func TestWholeReadsShared(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	seedRepo := pdstest.Login(t, srv, a, t.TempDir(), nil)
	if _, err := outline.New(seedRepo).DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "one"}, {Text: "two", Children: []intent.NewNode{{Text: "three"}}}}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	g := &gatedGetRepo{open: make(chan struct{})}
	r := pdstest.Login(t, srv, a, t.TempDir(), &http.Client{Transport: g})
	var after atomic.Int64
	r.AfterWholeRead = func() { after.Add(1) }
	var wg sync.WaitGroup
	snaps := make([]*store.Snapshot, 3)
	errs := make([]error, 3)
	for i := range snaps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			snaps[i], errs[i] = r.Snapshot(ctx)
		}()
	}
	waitFor(t, "two reads to wait for the first", func() bool { return g.requests.Load() >= 1 && r.Stats.WholeWaits.Load() == 2 })
	close(g.open)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if snaps[i] != snaps[0] || len(snaps[i].Records) < 3 {
			t.Fatalf("read %d: a snapshot of its own (%p, %d records), not the shared one", i, snaps[i], len(snaps[i].Records))
		}
	}
	if n, cars := g.requests.Load(), r.Stats.CARs.Load(); n != 1 || cars != 1 {
		t.Fatalf("%d getRepo requests, %d whole reads: want one", n, cars)
	}
	// the hook that gives the read's garbage back ran once, for the whole
	// read; a read of what changed since does not call it
	if n := after.Load(); n != 1 {
		t.Fatalf("AfterWholeRead called %d times for one whole read", n)
	}
	if _, err := outline.New(seedRepo).DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "four"}}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	s, err := r.Snapshot(ctx)
	if err != nil || len(s.Records) != len(snaps[0].Records)+1 {
		t.Fatalf("a read after another client's insert: %v", err)
	}
	if n, diffs := after.Load(), r.Stats.Diffs.Load(); n != 1 || diffs != 1 {
		t.Fatalf("after a read of what changed (%d since reads): AfterWholeRead called %d times", diffs, n)
	}
}

// A waiter does not inherit a failure that was the first reader's own
// (its call ended): it reads itself.
func TestWholeReadLeaderCancelled(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	g := &gatedGetRepo{open: make(chan struct{})}
	r := pdstest.Login(t, srv, a, t.TempDir(), &http.Client{Transport: g})
	lctx, cancel := context.WithCancel(ctx)
	lead := make(chan error, 1)
	go func() { _, err := r.Snapshot(lctx); lead <- err }()
	waitFor(t, "the first read's request", func() bool { return g.requests.Load() == 1 })
	wait := make(chan error, 1)
	go func() { _, err := r.Snapshot(ctx); wait <- err }()
	waitFor(t, "the second read to wait", func() bool { return r.Stats.WholeWaits.Load() == 1 })
	cancel()
	if err := <-lead; !errors.Is(err, context.Canceled) {
		t.Fatalf("the cancelled read: %v", err)
	}
	waitFor(t, "the waiter's own request", func() bool { return g.requests.Load() == 2 })
	close(g.open)
	if err := <-wait; err != nil {
		t.Fatalf("the waiter: %v", err)
	}
}
