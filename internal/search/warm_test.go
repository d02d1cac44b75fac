package search

import (
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestWarmKeepsANewerIndex: a warm-up that read the tree before a commit,
// and reaches the index after a search brought it to that commit, leaves
// the index where the search left it (an Update would take it back, and
// the next search forward again).
func TestWarmKeepsANewerIndex(t *testing.T) {
	t.Parallel()
	recs := outlinegen.Generate(300, 1)
	t1 := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Rev: "r000000001", Records: recs})
	r := t1.Roots[1].Rec
	v := r.Value.Map()
	v["text"] = "changed"
	t2 := t1.Next("c2", "r000000002", []store.Record{{Collection: r.Collection, RKey: r.RKey, CID: "changed", Value: store.MustValue(v)}})
	x := New()
	if _, err := x.Search(t2, Query{Text: "changed"}); err != nil {
		t.Fatal(err)
	}
	x.Warm(t1)
	if x.tree != t2 {
		t.Fatalf("the index went back to commit %s", x.tree.Commit)
	}
	// a warm-up of the current tree, or of a newer one, does update
	y := New()
	y.Warm(t1)
	y.Warm(t2)
	if y.tree != t2 || y.Derived != 1 {
		t.Fatalf("warm-ups: index at %s, %d derived by the second", y.tree.Commit, y.Derived)
	}
}
