package search

import (
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// TestEntryMapKeys: a TID key is kept as its integer and found again by
// it, and the sweep gives the same key back; keys that are not such TIDs
// (other record keys, a TID whose first character sets the top bit, the
// all-zero TID) are kept by their string; no two keys share an entry.
func TestEntryMapKeys(t *testing.T) {
	m := newEntryMap(0)
	clock := syntax.NewTIDClock(0)
	keys := []string{"self", "2222222222222", "c222222222222", "j7zzzzzzzzzzz", "3abc", "bzzzzzzzzzzzz", "2222222222223"}
	for range 50 {
		keys = append(keys, clock.Next().String())
	}
	es := map[string]*entry{}
	for _, k := range keys {
		es[k] = &entry{cid: k}
		m.set(k, es[k])
	}
	if m.len() != len(keys) {
		t.Fatalf("%d entries for %d keys", m.len(), len(keys))
	}
	if len(m.tids) < 50 {
		t.Fatalf("only %d of the TID keys kept as integers", len(m.tids))
	}
	for _, k := range keys {
		if m.get(k) != es[k] {
			t.Fatalf("key %q: got %v", k, m.get(k))
		}
	}
	seen := map[string]bool{}
	m.sweep(func(k string) bool { seen[k] = true; return k != keys[10] })
	for _, k := range keys {
		if !seen[k] {
			t.Fatalf("the sweep did not give key %q back", k)
		}
	}
	if m.get(keys[10]) != nil || m.len() != len(keys)-1 {
		t.Fatal("the sweep did not delete the key it was told to")
	}
}
