package store_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// reopened is a store of n nodes, opened again (as serve opens it), so
// that nothing but the snapshot is made yet.
func reopened(t *testing.T, n int) (*store.Local, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ws []store.Write
	for i := range n {
		ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: fmt.Sprintf("k%04d", i),
			Value: map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprint("node ", i), "sortKey": "a", "createdAt": "2025-01-01T00:00:00Z"}})
	}
	if _, err := l.Apply(context.Background(), "", ws); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err = store.OpenLocal(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// TestPrepareMakesTheFirstWriteCheap: after Prepare the first write makes
// no map of records by path (before, it made one of the whole repository:
// most of a first write at 250,000 records), and lands as it should.
// Not parallel: it counts the package's builds.
func TestPrepareMakesTheFirstWriteCheap(t *testing.T) {
	ctx := context.Background()
	l, dir := reopened(t, 50)
	if l.Prepared() {
		t.Fatal("prepared before Prepare")
	}
	if err := l.Prepare(ctx); err != nil {
		t.Fatal(err)
	}
	if !l.Prepared() {
		t.Fatal("not prepared after Prepare")
	}
	before := store.PathBuilds()
	if _, err := l.Apply(ctx, "", []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: "new",
		Value: map[string]any{"$type": "app.bulleted.node", "text": "new", "sortKey": "b", "createdAt": "2025-01-01T00:00:00Z"}}}); err != nil {
		t.Fatal(err)
	}
	if n := store.PathBuilds() - before; n != 0 {
		t.Fatalf("the first write after Prepare made %d map(s) of records by path", n)
	}
	checkRecords(t, dir, 51, "new")
}

// TestPrepareRacesWrites: writes (and a refused one) arriving while
// Prepare's build is under way wait for it instead of making a second one,
// and the records read back afterwards are exactly right. Run with -race.
// Not parallel: it sets the package's build hook.
func TestPrepareRacesWrites(t *testing.T) {
	ctx := context.Background()
	l, dir := reopened(t, 200)
	started, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	store.OnPathBuild(func() {
		if first.CompareAndSwap(false, true) { // Prepare's: blocked until released
			close(started)
			<-release
		}
	})
	defer store.OnPathBuild(nil)
	before := store.PathBuilds()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := l.Prepare(ctx); err != nil {
			t.Error(err)
		}
	}()
	<-started // Prepare's build is under way, blocked
	errs := make(chan error, 3)
	for i, w := range []store.Write{
		{Op: store.Create, Collection: "app.bulleted.node", RKey: "w1", Value: map[string]any{"$type": "app.bulleted.node", "text": "w1", "sortKey": "b", "createdAt": "2025-01-01T00:00:00Z"}},
		{Op: store.Delete, Collection: "app.bulleted.node", RKey: "k0007"},
		{Op: store.Create, Collection: "app.bulleted.node", RKey: "k0008", Value: map[string]any{"$type": "app.bulleted.node", "text": "exists", "sortKey": "b", "createdAt": "2025-01-01T00:00:00Z"}},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := l.Apply(ctx, "", []store.Write{w})
			if i == 2 {
				if err == nil {
					err = fmt.Errorf("a create of an existing record was accepted")
				} else {
					err = nil
				}
			}
			errs <- err
		}()
	}
	// reads go on while the build is under way (it holds no lock), and
	// while writes wait for it (they wait outside the lock): give the
	// writes time to reach the wait, then read. Before, a write held the
	// lock while it waited, and this read waited for the build it was
	// meant to run beside: a deadlock (CI, stop 32).
	time.Sleep(100 * time.Millisecond)
	read := make(chan error, 1)
	go func() { _, _, err := l.Head(ctx); read <- err }()
	select {
	case err := <-read:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(20 * time.Second):
		t.Error("a read waited for writes that wait for Prepare's build")
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := store.PathBuilds() - before; n != 1 {
		t.Fatalf("%d maps of records by path were made, want 1 (Prepare's, which the writes waited for)", n)
	}
	s, err := l.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Records) != 200 {
		t.Fatalf("%d records after +1 -1, want 200", len(s.Records))
	}
	checkRecords(t, dir, 200, "w1")
}

// checkRecords opens dir again and checks it holds n records, one of them
// at rkey.
func checkRecords(t *testing.T, dir string, n int, rkey string) {
	t.Helper()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range s.Records {
		found = found || r.RKey == rkey
	}
	if len(s.Records) != n || !found {
		t.Fatalf("read back: %d records (want %d), %s there: %v", len(s.Records), n, rkey, found)
	}
}
