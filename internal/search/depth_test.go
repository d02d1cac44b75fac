package search

import (
	"errors"
	"slices"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// depthFixture: L (matching itself) with children c1, c2 (no match), c3;
// c1's child g1, g1's child gg1; c3's child g3; all but c2 say "item".
func depthFixture() *outline.Tree {
	recs := []store.Record{
		node("top", "", "a", "Top item", nil),
		node("L", "top", "a", "List item", nil),
		node("c1", "L", "a", "child item one", nil),
		node("g1", "c1", "a", "grandchild item", nil),
		node("gg1", "g1", "a", "great-grandchild item", nil),
		node("c2", "L", "b", "child two", nil),
		node("c3", "L", "c", "child item three", nil),
		node("g3", "c3", "a", "grandchild item three", nil),
		node("after", "top", "b", "after item", nil),
	}
	return outline.Build(&store.Snapshot{DID: did, Commit: "c1", Rev: "r1", Records: recs})
}

// searchers are the two ways a search is answered: the built index's
// scan, and the walk of a cold index (its lock held: a build under way).
func searchers(t *testing.T, tr *outline.Tree) map[string]*Index {
	t.Helper()
	built := New()
	built.Update(tr)
	cold := NewCache(0).For(tr.DID.String())
	cold.mu.Lock()
	t.Cleanup(func() { cold.mu.Unlock(); cold.Settle() })
	return map[string]*Index{"scan": built, "walk": cold}
}

// TestDepth: with Under and Depth, a search and Select find the bullets 1
// to Depth levels below Under, not Under, not deeper; a cursor continues
// with the same depth and is refused for another.
func TestDepth(t *testing.T) {
	t.Parallel()
	tr := depthFixture()
	L := tr.Nodes.Get("L")
	cases := []struct {
		depth int
		want  []string
	}{
		{0, []string{"L", "c1", "g1", "gg1", "c3", "g3"}},
		{1, []string{"c1", "c3"}},
		{2, []string{"c1", "g1", "c3", "g3"}},
		{3, []string{"c1", "g1", "gg1", "c3", "g3"}},
	}
	for name, x := range searchers(t, tr) {
		for _, c := range cases {
			q := Query{Text: "item", Under: L, Depth: c.depth}
			r, err := x.Search(tr, q)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(r); !slices.Equal(got, c.want) {
				t.Fatalf("%s depth %d: got %v, want %v", name, c.depth, got, c.want)
			}
			// one at a time, by cursor
			var paged []string
			for q.Limit = 1; ; {
				r, err := x.Search(tr, q)
				if err != nil {
					t.Fatalf("%s depth %d page %d: %v", name, c.depth, len(paged), err)
				}
				paged = append(paged, keys(r)...)
				if r.Cursor == "" {
					break
				}
				q.Cursor = r.Cursor
				if _, err := x.Search(tr, Query{Text: "item", Under: L, Depth: c.depth + 1, Cursor: r.Cursor}); !errors.Is(err, ErrCursor) {
					t.Fatalf("%s: a cursor of depth %d taken for depth %d: %v", name, c.depth, c.depth+1, err)
				}
			}
			if !slices.Equal(paged, c.want) {
				t.Fatalf("%s depth %d by pages of one: %v, want %v", name, c.depth, paged, c.want)
			}
		}
	}
	for _, c := range cases {
		var got []string
		if err := Select(tr, Query{Text: "item", Under: L, Depth: c.depth}, func(it *outline.Item) bool { got = append(got, it.Key()); return true }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("Select depth %d: got %v, want %v", c.depth, got, c.want)
		}
	}
	for _, q := range []Query{{Under: L, Depth: -1}, {Depth: 1}} {
		if _, err := New().Search(tr, q); !errors.Is(err, ErrQuery) {
			t.Fatalf("depth %d under %v: %v", q.Depth, q.Under != nil, err)
		}
		if err := Select(tr, q, func(*outline.Item) bool { return true }); !errors.Is(err, ErrQuery) {
			t.Fatalf("Select depth %d under %v: %v", q.Depth, q.Under != nil, err)
		}
	}
}

// TestDepthPathsAgree: on a generated outline, the scan, the walk and
// Select find the same bullets within every depth below several bullets,
// page by page, and each is within depth of Under.
func TestDepthPathsAgree(t *testing.T) {
	t.Parallel()
	tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Rev: "r1", Records: outlinegen.Generate(3000, 1)})
	xs := searchers(t, tr)
	var unders []*outline.Item
	for _, r := range tr.Roots.Slice(0, 3) {
		unders = append(unders, r)
		if r.Children.Len() > 0 {
			unders = append(unders, r.Children.At(0))
		}
	}
	levelOf := func(it, under *outline.Item) int {
		n := 0
		for ; it != nil && it != under; it = tr.Parent(it) {
			n++
		}
		if it == nil {
			return -1
		}
		return n
	}
	for _, u := range unders {
		for depth := 1; depth <= 3; depth++ {
			for _, text := range []string{"a", "e"} {
				q := Query{Text: text, Under: u, Depth: depth}
				var want []string
				Select(tr, q, func(it *outline.Item) bool {
					if l := levelOf(it, u); l < 1 || l > depth {
						t.Fatalf("Select: %s is %d levels below under, depth %d", it.Key(), l, depth)
					}
					want = append(want, it.Key())
					return true
				})
				for name, x := range xs {
					var got []string
					q := q
					q.Limit = 7
					for {
						r, err := x.Search(tr, q)
						if err != nil {
							t.Fatal(err)
						}
						got = append(got, keys(r)...)
						if r.Cursor == "" {
							break
						}
						q.Cursor = r.Cursor
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s under %s depth %d %q: %d hits, Select %d (the first %v, %v)", name, u.Key(), depth, text, len(got), len(want), got[:min(5, len(got))], want[:min(5, len(want))])
					}
				}
			}
		}
	}
}
