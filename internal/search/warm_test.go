package search

import (
	"slices"
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
	r := t1.Roots.At(1).Rec
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

// TestColdSearchWalks: a cache's index answers its first searches by
// walking the tree, without building the index or waiting for a build
// under way (the warm-up's: here the index's lock is held throughout),
// with the hits, cursors and notices of a built index; the index is built
// beside it, and the next searches use it.
func TestColdSearchWalks(t *testing.T) {
	t.Parallel()
	recs := outlinegen.Generate(3000, 1)
	tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Rev: "r000000001", Records: recs})
	built := New()
	built.Update(tr)
	queries := []Query{{Text: "budget", State: "open"}, {Text: "review", Limit: 7}, {Tags: []string{"plan"}}, {Text: "zzzz nothing"},
		{Layout: "heading"}, {Text: "a", Under: tr.Roots.At(1), Limit: 5}}
	cold := NewCache(0).For(outlinegen.DID)
	cold.mu.Lock() // a build under way that the cold searches must not wait for
	for _, q := range queries {
		for page := 0; page < 3; page++ {
			want, err := built.Search(tr, q)
			if err != nil {
				t.Fatal(err)
			}
			got, err := cold.Search(tr, q)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(keys(got), keys(want)) || got.Cursor != want.Cursor || !slices.Equal(got.Notices, want.Notices) {
				t.Fatalf("%+v page %d: cold %v %q %q, built %v %q %q", q, page, keys(got), got.Cursor, got.Notices, keys(want), want.Cursor, want.Notices)
			}
			if want.Cursor == "" {
				break
			}
			q.Cursor = want.Cursor
		}
	}
	if cold.tree != nil {
		t.Fatal("a cold search built the index on its own time")
	}
	cold.mu.Unlock()
	cold.Settle()
	if !cold.builtFor(tr) || cold.tree != tr || cold.Size() == 0 {
		t.Fatalf("the index was not built beside the cold searches (built %v, size %d)", cold.builtFor(tr), cold.Size())
	}
}
