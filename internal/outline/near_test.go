package outline_test

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// levenshtein is the plain full-table distance, to check EditWithin by.
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev = cur
	}
	return prev[len(b)]
}

// TestEditWithin: the banded distance is the full table's wherever that is
// within the limit, and limit+1 wherever it is over.
func TestEditWithin(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	const pool = "ab3"
	word := func() string {
		b := make([]byte, rng.IntN(7))
		for i := range b {
			b[i] = pool[rng.IntN(len(pool))]
		}
		return string(b)
	}
	for range 20_000 {
		a, b, limit := word(), word(), rng.IntN(4)
		want := min(levenshtein(a, b), limit+1)
		if got := outline.EditWithin(a, b, limit); got != want {
			t.Fatalf("EditWithin(%q, %q, %d) = %d, want %d", a, b, limit, got, want)
		}
	}
}

// TestResolveNearestKeys: a record key that does not exist is refused
// (node_missing) with the existing keys nearest it by edit distance: one
// character changed, dropped, added, two swapped, two changed; nearest
// first, at most five, and none for a key far from every one.
func TestResolveNearestKeys(t *testing.T) {
	tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Records: outlinegen.Generate(3000, 1)})
	var keys []string
	for r := range tr.Roots.Items() {
		keys = append(keys, r.Key())
	}
	k := keys[len(keys)/2]
	swap := k[:5] + string(k[6]) + string(k[5]) + k[7:]
	for _, ref := range []string{
		k[:7] + next(k[7]) + k[8:], // changed
		k[:7] + k[8:],              // dropped
		k[:7] + "x" + k[7:],        // added
		swap,                       // swapped
		k[:3] + next(k[3]) + k[4:9] + next(k[9]) + k[10:], // two changed
	} {
		if tr.Nodes.Get(ref) != nil {
			continue // (it happens to exist)
		}
		_, err := tr.Resolve(ref)
		var oe *outline.Error
		if !errors.As(err, &oe) || !errors.Is(err, outline.ErrNodeNotFound) {
			t.Fatalf("%s: %v", ref, err)
		}
		data, _ := oe.Data.(map[string]any)
		near, _ := data["nearest"].([]string)
		if !slices.Contains(near, k) || len(near) > 5 || !strings.Contains(oe.Msg, k) {
			t.Errorf("%s (from %s): nearest %v: %s", ref, k, near, oe.Msg)
			continue
		}
		if d := outline.EditWithin(ref, k, 2); near[0] != k && outline.EditWithin(ref, near[0], 2) > d {
			t.Errorf("%s: %v is not nearest first", ref, near)
		}
	}
	_, err := tr.Resolve("zzzzzzzzzzzzz")
	var oe *outline.Error
	if !errors.As(err, &oe) || oe.Data != nil || strings.Contains(oe.Msg, "nearest") {
		t.Errorf("a key far from every key: %v", err)
	}
}

func next(c byte) string {
	if c == 'z' {
		return "y"
	}
	return string(c + 1)
}

// BenchmarkResolveMissing: a missing key in a 250,000-bullet tree (one
// edit off, two edits off, none near).
func BenchmarkResolveMissing(b *testing.B) {
	tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Records: outlinegen.Generate(250_000, 1)})
	k := tr.Roots.At(0).Key()
	for _, ref := range []string{k[:12] + next(k[12]), k[:3] + next(k[3]) + k[4:9] + next(k[9]) + k[10:], "zzzzzzzzzzzzz"} {
		b.Run(ref, func(b *testing.B) {
			for b.Loop() {
				tr.Resolve(ref)
			}
		})
	}
}
