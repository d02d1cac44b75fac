package outline_test

import (
	"context"
	"runtime"
	"sync"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// onceRepo hands its snapshot out once and forgets it, so that after the
// engine's first read only the engine keeps the records.
type onceRepo struct {
	mu   sync.Mutex
	snap *store.Snapshot
}

func (r *onceRepo) DID() syntax.DID { return syntax.DID(outlinegen.DID) }
func (r *onceRepo) Head(context.Context) (string, string, error) {
	return "c0", "r0", nil
}
func (r *onceRepo) Snapshot(context.Context) (*store.Snapshot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.snap
	r.snap = nil
	return s, nil
}
func (r *onceRepo) Apply(context.Context, string, []store.Write) (*store.Result, error) {
	return nil, store.ErrRefused
}

func liveHeap() int64 {
	var m runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// TestSizeTracksHeap: Engine.Size of an opened generated outline is within
// 0.7×–1.4× of the heap it takes (the records generated, the tree built,
// everything else dropped), at two sizes.
func TestSizeTracksHeap(t *testing.T) {
	sizes := []int{5000, 50000}
	if testing.Short() {
		sizes = []int{2000, 10000}
	}
	for _, n := range sizes {
		before := liveHeap()
		recs := outlinegen.Generate(n, 1)
		repo := &onceRepo{snap: &store.Snapshot{DID: syntax.DID(outlinegen.DID), Commit: "c0", Rev: "r0", Records: recs}}
		recs = nil
		e := outline.New(repo)
		if _, err := e.Tree(context.Background()); err != nil {
			t.Fatal(err)
		}
		grown := liveHeap() - before
		est := e.Size()
		ratio := float64(est) / float64(grown)
		t.Logf("%d bullets: heap grew %d bytes (%.0f a record), Size says %d (%.2f×)", n, grown, float64(grown)/float64(e.Kept().Count), est, ratio)
		if ratio < 0.7 || ratio > 1.4 {
			t.Errorf("%d bullets: Size %d is %.2f× the heap's growth %d, want 0.7×–1.4×", n, est, ratio, grown)
		}
		runtime.KeepAlive(e)
	}
}
