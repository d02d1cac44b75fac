package pds

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

func liveHeap() int64 {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// generatedCAR writes a CAR of an embedded repository holding a generated
// outline of n bullets, and returns its path and the repository's DID.
func generatedCAR(t *testing.T, n int) (string, *store.Local) {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ws := outlinegen.Writes(outlinegen.Generate(n, 1), l.DID().String())
	for len(ws) > 0 {
		k := min(len(ws), store.MaxBatch)
		if _, err := l.Apply(context.Background(), "", ws[:k]); err != nil {
			t.Fatal(err)
		}
		ws = ws[k:]
	}
	path := filepath.Join(t.TempDir(), "repo.car")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.ExportCAR(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return path, l
}

// TestSizeTracksHeap: a repository read from its CAR (as from the read
// cache) and an engine's tree over it take, on the heap, what Repo.Size and
// Tree.Size say together, within 0.7×–1.4×, at two sizes.
func TestSizeTracksHeap(t *testing.T) {
	sizes := []int{2000, 20000}
	if testing.Short() {
		sizes = []int{1000, 5000}
	}
	for _, n := range sizes {
		path, l := generatedCAR(t, n)
		r := New(nil, l.DID())
		r.Cache = path
		before := liveHeap()
		r.loadCache(context.Background())
		r.mu.Lock()
		c := r.car
		r.mu.Unlock()
		if c == nil {
			t.Fatal("the CAR was not loaded")
		}
		tree := outline.Build(c.snap)
		grown := liveHeap() - before
		rs, ts := r.Size(), tree.Size()
		ratio := float64(rs+ts) / float64(grown)
		t.Logf("%d records: heap grew %d bytes (%.0f a record); Repo.Size %d + Tree.Size %d = %.2f×", tree.Count, grown, float64(grown)/float64(tree.Count), rs, ts, ratio)
		if ratio < 0.7 || ratio > 1.4 {
			t.Errorf("%d records: Repo.Size+Tree.Size %d is %.2f× the heap's growth %d, want 0.7×–1.4×", tree.Count, rs+ts, ratio, grown)
		}
		runtime.KeepAlive(tree)
		runtime.KeepAlive(r)
	}
}
