package outline

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

const placeDID = "did:plc:placetest"

// placeTree is a tree whose top level holds siblings with the given
// sortKeys (record keys in list order, so the last is the newest).
func placeTree(keys []string) *Tree {
	recs := make([]store.Record, len(keys))
	for i, k := range keys {
		recs[i] = store.Record{Collection: lexicon.Node, RKey: fmt.Sprintf("k%06d", i), CID: fmt.Sprint("cid", i), Value: store.MustValue(map[string]any{
			"$type": lexicon.Node, "text": "t", "sortKey": k, "createdAt": "2026-01-01T00:00:00Z"})}
	}
	return Build(&store.Snapshot{DID: placeDID, Commit: "c0", Records: recs})
}

// TestPlaceLongLists: place reads the siblings near the gap alone, and
// what it plans keeps the list in order wherever it inserts: lists with
// room, crowded lists whose neighbours need a respacing, and runs of
// tied keys longer than the span it reads (the whole list is then
// respaced). The final list (respaced siblings, the new keys at the gap)
// must have every new key strictly between its neighbours and every
// respaced sibling still in its place.
func TestPlaceLongLists(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	spread, _ := order.Spread("", "", 400)
	crowded := make([]string, 400)
	for i := range crowded {
		crowded[i] = strings.Repeat("P", 22) + string("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[i/62]) + string("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[i%62])
	}
	tied := make([]string, 400)
	for i := range tied {
		tied[i] = "a0"
	}
	mixed := append(append(append([]string{}, spread[:100]...), tied[:150]...), spread[300:]...)
	e := New(nil)
	for name, keys := range map[string][]string{"spread": spread, "crowded": crowded, "tied": tied, "mixed": mixed} {
		tr := placeTree(keys)
		sibs := tr.Roots
		for range 60 {
			at, n := r.IntN(sibs.Len()+1), 1+r.IntN(3)
			p := e.newPlanner(context.Background(), tr, time.Now(), &keyList{clock: syntax.NewTIDClock(0)})
			got, err := p.place(sibs, at, n)
			if err != nil {
				t.Fatalf("%s at %d: %v", name, at, err)
			}
			final := make([]string, sibs.Len())
			for i, s := range sibs.All() {
				final[i] = s.SortKey()
			}
			respaced := map[int]bool{}
			for _, w := range p.writes {
				v := w.Value
				i := 0
				fmt.Sscanf(w.RKey, "k%06d", &i)
				final[i], respaced[i] = v["sortKey"].(string), true
			}
			type ent struct {
				key     string
				touched bool // new, or respaced
			}
			var seq []ent
			for i, k := range final {
				if i == at {
					for _, g := range got {
						seq = append(seq, ent{g, true})
					}
				}
				seq = append(seq, ent{k, respaced[i]})
			}
			if at == len(final) {
				for _, g := range got {
					seq = append(seq, ent{g, true})
				}
			}
			for i := 1; i < len(seq); i++ {
				a, b := seq[i-1], seq[i]
				if a.key > b.key || (a.key == b.key && (a.touched || b.touched)) {
					t.Fatalf("%s: %d new at %d (of %d): out of order at %d: %q then %q (%d respaced)", name, n, at, sibs.Len(), i, a.key, b.key, len(respaced))
				}
			}
			if name != "tied" && name != "mixed" && len(respaced) > order.Window {
				t.Fatalf("%s: %d new at %d rewrote %d siblings (more than a window of %d)", name, n, at, len(respaced), order.Window)
			}
		}
	}
}
