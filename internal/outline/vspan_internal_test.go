package outline

import (
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestSpanOf: an item's cached texts are where they lie in its own value:
// a text read in place from it; the same text read from another value
// (the parent key cached for the siblings sharing a parent field) found in
// the text of this value that holds it; a text in neither is marked and
// read again from the record.
func TestSpanOf(t *testing.T) {
	parent := "at://did:plc:abc/app.bulleted.node/3kparent22222"
	v, err := store.ValueOf(map[string]any{"text": "a", "sortKey": "m", "parent": parent})
	if err != nil {
		t.Fatal(err)
	}
	w, err := store.ValueOf(map[string]any{"text": "b", "sortKey": "n", "parent": parent})
	if err != nil {
		t.Fatal(err)
	}
	it := &Item{Rec: store.Record{Value: v}, parsed: true}
	sk, _ := v.Text("sortKey")
	it.sk = spanOf(v, "", sk)
	if it.SortKey() != "m" || it.sk.n == noSpan {
		t.Fatalf("in place: %q %+v", it.SortKey(), it.sk)
	}
	// the key read from w's parent field, kept for v: v's own bytes
	pw, _ := w.Text("parent")
	key := pw[strings.LastIndexByte(pw, '/')+1:]
	pv, _ := v.Text("parent")
	it.pk = spanOf(v, pv, key)
	if it.pk.n == noSpan || it.pkey() != "3kparent22222" {
		t.Fatalf("from another value: %q %+v", it.pkey(), it.pk)
	}
	if got, _ := it.pk.in(v); got != key || strings.Contains(v.At(0, v.Len()), got) == false {
		t.Fatal("the span is not v's own")
	}
	// in neither: marked, read again
	it.sk = spanOf(v, "", strings.Clone("m"))
	if it.sk.n != noSpan || it.SortKey() != "m" {
		t.Fatalf("elsewhere: %q %+v", it.SortKey(), it.sk)
	}
	it.pk = spanOf(v, "", strings.Clone(key))
	if it.pk.n != noSpan || it.pkey() != "3kparent22222" {
		t.Fatalf("elsewhere: %q %+v", it.pkey(), it.pk)
	}
}

// TestRebuildSameCIDOtherBytes: a record whose CID is the old one's but
// whose bytes are not (a PDS's listRecords names a CID it does not prove)
// is read from its own bytes: no span of the old value is kept for it (it
// sliced past the new value's end: a panic).
func TestRebuildSameCIDOtherBytes(t *testing.T) {
	long, err := store.ValueOf(map[string]any{"$type": "app.bulleted.node", "text": strings.Repeat("long text ", 20), "sortKey": "zz", "createdAt": "2026-01-01T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	short, err := store.ValueOf(map[string]any{"$type": "app.bulleted.node", "text": "s", "sortKey": "a", "createdAt": "2026-01-01T00:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	did := "did:plc:abcdefghijklmnopqrstuvwx"
	snap := func(v store.Value) *store.Snapshot {
		s := &store.Snapshot{Commit: "c", Rev: "r", Records: []store.Record{{Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2", CID: "bafysame", Value: v}}}
		s.DID = syntax.DID(did)
		return s
	}
	t1 := Build(snap(long))
	t2 := Rebuild(snap(short), t1)
	it := t2.Nodes.Get("3kaaaaaaaaaa2")
	if it == nil || it.SortKey() != "a" {
		t.Fatalf("read %v", it)
	}
}
