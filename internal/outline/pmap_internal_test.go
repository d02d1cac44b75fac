package outline

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// TestMapModel applies random versions of changes to a persistent map with
// either base (a hash map; a sorted list) and checks every version, old
// ones too, against a plain map copied at each step: Get, Lookup, Len and
// All (each key once), across many flattenings.
func TestMapModel(t *testing.T) {
	type val struct{ k, v string }
	keyOf := func(v *val) string { return v.k }
	for _, sorted := range []bool{false, true} {
		t.Run(fmt.Sprintf("sorted=%v", sorted), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			key := func() string { return fmt.Sprintf("k%04d", rng.IntN(3000)) }
			model := map[string]*val{}
			var list []*val
			for range 1000 {
				k := key()
				if model[k] == nil {
					model[k] = &val{k, "0"}
				}
			}
			for _, v := range model {
				list = append(list, v)
			}
			var m Map[*val]
			if sorted {
				m = sortedMapOf(list, keyOf) // shuffled: sortedMapOf sorts
			} else {
				m = mapOf(maps.Clone(model))
			}
			type version struct {
				m     Map[*val]
				model map[string]*val
			}
			versions := []version{{m, maps.Clone(model)}}
			for step := range 400 {
				changes := map[string]slot[*val]{}
				for range 1 + rng.IntN(40) {
					k := key()
					if rng.IntN(3) == 0 {
						changes[k] = slot[*val]{}
						delete(model, k)
					} else {
						v := &val{k, fmt.Sprint(step)}
						changes[k] = slot[*val]{v: v, ok: true}
						model[k] = v
					}
				}
				m = m.with(changes)
				versions = append(versions, version{m, maps.Clone(model)})
			}
			for i, ver := range versions {
				if ver.m.Len() != len(ver.model) {
					t.Fatalf("version %d: Len %d, want %d", i, ver.m.Len(), len(ver.model))
				}
				seen := map[string]bool{}
				for k, v := range ver.m.All() {
					if seen[k] || ver.model[k] != v {
						t.Fatalf("version %d: All gave %s (again: %v), want %v", i, k, seen[k], ver.model[k])
					}
					seen[k] = true
				}
				if len(seen) != len(ver.model) {
					t.Fatalf("version %d: All gave %d keys, want %d", i, len(seen), len(ver.model))
				}
				for n := range 3000 {
					k := fmt.Sprintf("k%04d", n)
					v, ok := ver.m.Lookup(k)
					if want, had := ver.model[k]; ok != had || v != want || ver.m.Get(k) != want {
						t.Fatalf("version %d: Lookup(%s) = %v %v, want %v %v", i, k, v, ok, want, had)
					}
				}
			}
			if sorted && !slices.IsSortedFunc(m.sorted, func(a, b *val) int { return compareStrings(a.k, b.k) }) {
				t.Fatal("the last flattened base is out of order")
			}
		})
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestRebuildCarriesFromPrev: a rebuild finds the earlier tree's item of
// each unchanged record (walking its sorted lists beside the records, or
// searching when they come out of order, or when the earlier tree changed
// since its base), so validation is not run again; a changed record is
// not given the old result.
func TestRebuildCarriesFromPrev(t *testing.T) {
	did := "did:plc:carrytestcarrytestcarryte"
	var recs []store.Record
	for i := range 3000 {
		coll := lexicon.Node
		if i%10 == 0 {
			coll = lexicon.Mirror
		}
		v := map[string]any{"$type": coll, "text": "t", "sortKey": "a", "createdAt": "2026-01-01T00:00:00Z"}
		recs = append(recs, store.Record{Collection: coll, RKey: fmt.Sprintf("k%05d", i), CID: fmt.Sprintf("c%d", i), Value: store.MustValue(v)})
	}
	slices.SortFunc(recs, func(a, b store.Record) int {
		if c := compareStrings(a.Collection, b.Collection); c != 0 {
			return c
		}
		return compareStrings(a.RKey, b.RKey)
	})
	prev := Build(&store.Snapshot{DID: syntax.DID(did), Records: recs})
	for _, m := range []*Map[*Item]{&prev.Nodes, &prev.Mirrors} {
		for _, it := range m.All() {
			prev.Invalid(it)
		}
	}
	changed := slices.Clone(recs)
	for i := 0; i < len(changed); i += 7 {
		changed[i].CID += "x"
	}
	shuffled := slices.Clone(changed)
	rand.New(rand.NewPCG(5, 6)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	// an earlier tree with changes beside its base (Next-like versions)
	overlaid := *prev
	top := map[string]slot[*Item]{}
	for i := 1; i < len(recs); i += 50 {
		if recs[i].Collection == lexicon.Node {
			c := prev.Nodes.Get(recs[i].RKey).clone()
			top[recs[i].RKey] = slot[*Item]{v: c, ok: true}
		}
	}
	overlaid.Nodes = prev.Nodes.with(top)
	for name, c := range map[string]struct {
		recs []store.Record
		prev *Tree
	}{"in order": {changed, prev}, "shuffled": {shuffled, prev}, "overlaid": {changed, &overlaid}} {
		tr := Rebuild(&store.Snapshot{DID: syntax.DID(did), Records: c.recs}, c.prev)
		for i, r := range changed {
			m := &tr.Nodes
			if r.Collection == lexicon.Mirror {
				m = &tr.Mirrors
			}
			it := m.Get(r.RKey)
			if _, ok := it.checked(); ok != (i%7 != 0) {
				t.Fatalf("%s: %s carried %v, want %v", name, r.RKey, ok, i%7 != 0)
			}
		}
	}
}

// An item stays 136 bytes (issue #26: one a bullet; issue #38: its
// sortKey and parent key as places in its value, vspan; issue 41: its
// children a Kids of 16 bytes, where a slice took 24).
func TestItemSize(t *testing.T) {
	if n := unsafe.Sizeof(Item{}); n > 136 {
		t.Fatalf("an item is %d bytes, more than 136", n)
	}
}
