package tools

import (
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// A kept tree costs what it does not share with the current tree: after
// one move (Next shares every other bullet) the moved bullet and the lists
// and ancestors it changed; after a build from every record, every bullet.
// So the default bound keeps a 20,000-bullet outline's earlier revision
// after a few moves, and drops a full copy of it.
func TestSnapshotBytes(t *testing.T) {
	recs := outlinegen.Generate(20_000, 1)
	snap := &store.Snapshot{DID: outlinegen.DID, Commit: "c0", Rev: "r0", Records: recs}
	t0 := outline.Build(snap)
	var leaf, from, to *outline.Item
	for _, it := range t0.Nodes.All() {
		if it.Children.Len() > 2000 {
			from = it
		}
	}
	leaf = from.Children.At(0)
	for it := range t0.Roots.Items() {
		if it != t0.Parent(from) {
			to = it
			break
		}
	}
	v := leaf.Rec.Value.Map()
	v["parent"] = t0.NodeURI(to.Key())
	t1 := t0.Next("c1", "r1", []store.Record{{Collection: lexicon.Node, RKey: leaf.Key(), CID: "moved", Value: store.MustValue(v)}})

	k := &snapshot{t: t0}
	k.compare(t1)
	if k.changed != 1 {
		t.Errorf("one move: %d changed", k.changed)
	}
	if k.bytes <= 8*int64(from.Children.Len()) || k.bytes > 100_000 {
		t.Errorf("one move in a level of %d: %d bytes", from.Children.Len(), k.bytes)
	}
	k.compare(t0)
	if k.changed != 0 || k.bytes != 0 {
		t.Errorf("the current tree itself: %d changed, %d bytes", k.changed, k.bytes)
	}
	full := outline.Build(snap)
	k.compare(full)
	if k.changed != 0 || k.bytes < int64(t0.Nodes.Len())*itemBytes || k.bytes <= DefaultSnapshotBytes {
		t.Errorf("a full copy: %d changed, %d bytes", k.changed, k.bytes)
	}

	s := &Snapshots{}
	s.keep(t0, t0)
	if got, n := s.get(outlinegen.DID, "r0", t1); got != t0 || n != 1 {
		t.Fatalf("kept after a move: %v %d", got != nil, n)
	}
	if got, _ := s.get(outlinegen.DID, "r0", full); got != nil {
		t.Fatal("a full copy was kept past the byte bound")
	}
}

// Drop forgets a repository's kept trees, and only its.
func TestSnapshotsDrop(t *testing.T) {
	a := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c0", Rev: "r0", Records: outlinegen.Generate(100, 1)})
	other := outline.Build(&store.Snapshot{DID: "did:plc:other", Commit: "c0", Rev: "r0"})
	s := &Snapshots{}
	s.keep(a, a)
	s.keep(other, other)
	s.Drop(outlinegen.DID)
	if got, _ := s.get(outlinegen.DID, "r0", a); got != nil {
		t.Error("a dropped repository's tree is still kept")
	}
	if got, _ := s.get("did:plc:other", "r0", other); got != other {
		t.Error("another repository's tree was dropped")
	}
}
