package outline_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// TestBuildAnyRecordOrder: a tree's maps by record key are sorted lists
// into its slab of items, sorted at build when the snapshot does not list
// records in key order. A snapshot in key order and the same records
// shuffled make the same tree, and every node and mirror is found by its
// key in both (and nothing else is): detached items (a parent in another
// repository, a missing parent, a cycle) and mirrors included.
func TestBuildAnyRecordOrder(t *testing.T) {
	did := outlinegen.DID
	recs := outlinegen.Generate(3000, 7)
	node := func(rk, parent, sk string) store.Record {
		v := map[string]any{"$type": lexicon.Node, "text": rk, "sortKey": sk, "createdAt": "2026-01-01T00:00:00Z"}
		if parent != "" {
			v["parent"] = parent
		}
		return store.Record{Collection: lexicon.Node, RKey: rk, CID: "c" + rk, Value: store.MustValue(v)}
	}
	recs = append(recs,
		node("zz-elsewhere", "at://did:plc:someoneelsesomeoneelseso/"+lexicon.Node+"/x", "a"),
		node("zz-orphan", "at://"+did+"/"+lexicon.Node+"/nothere", "a"),
		node("zz-cycle-a", "at://"+did+"/"+lexicon.Node+"/zz-cycle-b", "a"),
		node("zz-cycle-b", "at://"+did+"/"+lexicon.Node+"/zz-cycle-a", "a"),
		store.Record{Collection: lexicon.Mirror, RKey: "m2", CID: "cm2", Value: store.MustValue(map[string]any{"$type": lexicon.Mirror, "sortKey": "b"})},
		store.Record{Collection: lexicon.Mirror, RKey: "m1", CID: "cm1", Value: store.MustValue(map[string]any{"$type": lexicon.Mirror, "sortKey": "a"})},
	)
	sorted := slices.Clone(recs)
	slices.SortFunc(sorted, func(a, b store.Record) int {
		if a.Collection != b.Collection {
			if a.Collection < b.Collection {
				return -1
			}
			return 1
		}
		if a.RKey < b.RKey {
			return -1
		}
		return 1
	})
	shuffled := slices.Clone(recs)
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	a := outline.Build(&store.Snapshot{DID: syntax.DID(did), Records: sorted})
	b := outline.Build(&store.Snapshot{DID: syntax.DID(did), Records: shuffled})
	if a.Describe() != b.Describe() {
		t.Fatal("a shuffled snapshot makes another tree")
	}
	if a.Detached.Len() != 4 {
		t.Fatalf("%d detached, want 4 (another repository, a missing parent, a 2-cycle)", a.Detached.Len())
	}
	for _, tr := range []*outline.Tree{a, b} {
		for _, r := range recs {
			m := &tr.Nodes
			if r.Collection == lexicon.Mirror {
				m = &tr.Mirrors
			} else if r.Collection != lexicon.Node {
				continue
			}
			if it := m.Get(r.RKey); it == nil || it.Rec.CID != r.CID {
				t.Fatalf("%s %s not found by its key", r.Collection, r.RKey)
			}
			if it := m.Get(r.RKey + "~"); it != nil {
				t.Fatalf("%s~ found", r.RKey)
			}
		}
		if tr.Mirrors.Len() != 2 || tr.Nodes.Get("m1") != nil {
			t.Fatal("mirrors and nodes mixed up")
		}
	}
}
