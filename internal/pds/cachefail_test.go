package pds_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestCacheWriteFailureSaid: a read cache that cannot be written (here its
// directory is a file) is said at once (Warn: serve's stderr) and in the
// next result (Notices), once while it keeps failing, and again after a
// write succeeded and failed anew.
func TestCacheWriteFailureSaid(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	blocker := filepath.Join(dir, "not-a-dir")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := g.login()
	r.Cache = filepath.Join(blocker, "repo.car")
	notes := &store.Notices{}
	var mu sync.Mutex
	var warned []string
	r.Notices, r.Warn = notes, func(msg string) { mu.Lock(); warned = append(warned, msg); mu.Unlock() }
	if _, err := r.Snapshot(ctx); err != nil { // a whole read: its cache is written
		t.Fatal(err)
	}
	said := notes.TakeNotices()
	if len(said) != 1 || !strings.Contains(said[0], "The read cache could not be written") || len(warned) != 1 || warned[0] != said[0] {
		t.Fatalf("a failed cache write: notices %q, stderr %q", said, warned)
	}
	for range 3 {
		g.edit(t, ctx)
		if _, err := r.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pds.SaveCache(r)
	if n := notes.TakeNotices(); len(n) != 0 || len(warned) != 1 {
		t.Fatalf("the same failure said again: %q, %d on stderr", n, len(warned))
	}
	// writable again, then not: said anew
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	pds.SaveCache(r)
	if _, err := os.Stat(r.Cache); err != nil {
		t.Fatalf("the cache was not written once it could be: %v", err)
	}
	os.RemoveAll(blocker)
	os.WriteFile(blocker, nil, 0o600)
	pds.SaveCache(r)
	if n := notes.TakeNotices(); len(n) != 1 || len(warned) != 2 {
		t.Fatalf("a new failure after a success: %q, %d on stderr", n, len(warned))
	}
}
