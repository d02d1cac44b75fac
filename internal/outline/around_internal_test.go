package outline

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// aroundLinear is aroundOf for one top-level span as it was, looking at
// every sibling: the reference the binary search must agree with.
func aroundLinear(sibs []*Item, own map[string]bool, lo, hi string) []around {
	var out []around
	var before *Item
	for _, it := range sibs {
		if own[it.Rec.Collection+"/"+it.Key()] {
			continue
		}
		switch k := it.SortKey(); {
		case k < lo:
			before = it
		case k <= hi:
			out = append(out, around{Parent: "", Path: it.Rec.Collection + "/" + it.Key(), Key: k})
		}
	}
	if before != nil {
		out = append(out, around{Parent: "", Path: before.Rec.Collection + "/" + before.Key(), Key: before.SortKey()})
	}
	return out
}

// aroundOf finds the siblings a plan is placed among by binary search in
// the sibling list; it finds what a look at every sibling finds, with
// ties of sort keys, the plan's own items among the siblings (moved or
// updated in place) and spans at either end.
func TestAroundOfIsLinear(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 41))
	key := func() string { return string(rune('a' + rng.IntN(12))) }
	for round := range 2000 {
		n := rng.IntN(40)
		var sibs []*Item
		for i := range n {
			coll := lexicon.Node
			if rng.IntN(6) == 0 {
				coll = lexicon.Mirror
			}
			v, err := store.ValueOf(map[string]any{"sortKey": key()})
			if err != nil {
				t.Fatal(err)
			}
			it := &Item{Rec: store.Record{Collection: coll, RKey: fmt.Sprintf("k%03d", i), Value: v}, Mirror: coll == lexicon.Mirror}
			sk, _ := v.Text("sortKey")
			it.sk = spanOf(v, "", sk)
			sibs = append(sibs, it)
		}
		sortItems(sibs)
		var writes []store.Write
		own := map[string]bool{}
		for range 1 + rng.IntN(4) {
			w := store.Write{Op: store.Create, Collection: lexicon.Node, RKey: fmt.Sprintf("n%03d", rng.IntN(1000))}
			if len(sibs) > 0 && rng.IntN(3) == 0 { // one of the siblings, moved or updated
				it := sibs[rng.IntN(len(sibs))]
				w = store.Write{Op: store.Update, Collection: it.Rec.Collection, RKey: it.Key()}
			}
			w.Value = map[string]any{"sortKey": key()}
			writes = append(writes, w)
			own[w.Collection+"/"+w.RKey] = true
		}
		lo, hi := "", ""
		for i, w := range writes {
			k := w.Value["sortKey"].(string)
			if i == 0 || k < lo {
				lo = k
			}
			if i == 0 || k > hi {
				hi = k
			}
		}
		tr := &Tree{Roots: KidsOf(sibs)}
		got := aroundOf(tr, writes)
		want := aroundLinear(sibs, own, lo, hi)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: span %q–%q\n got  %v\n want %v", round, lo, hi, got, want)
		}
	}
}
