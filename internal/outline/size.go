package outline

import (
	"unsafe"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// Sizes. A hosted instance keeps many users' engines and evicts them by
// what they hold (internal/hosted): Size estimates it from the kept tree
// and the kept plans, walking every record once (about 10 ms at 100,000
// records), so a caller measures again only when the tree changed. The
// estimate counts what the tree keeps alive, the records' values included
// (which a PDS repository's read cache shares: pds.Repo.Size counts only
// what it keeps besides). TestSizeTracksHeap holds it within
// 0.7×–1.4× of the heap an opened outline takes.

// Per-object overheads, in bytes.
const (
	// a persistent map's slot by record key (pmap.go): key header, value,
	// the table's spare room
	keySlotBytes = 40
)

// slotBytes is what one entry of m takes besides its value: a pointer in
// a sorted base, a hash map's slot otherwise (its key is the record's).
func (m *Map[V]) slotBytes() int64 {
	if m.keyOf != nil {
		return 8
	}
	return keySlotBytes + 8
}

// Size estimates the bytes the engine keeps: its current tree and its kept
// plans (0 before the first read).
func (e *Engine) Size() int64 {
	e.mu.Lock()
	t := e.cache
	e.mu.Unlock()
	return t.Size() + e.PlansSize()
}

// Kept is the tree the engine keeps (nil before the first read), without
// reading the repository.
func (e *Engine) Kept() *Tree {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cache
}

// PlansSize estimates the bytes of the dry runs' plans the engine keeps
// (their base trees are earlier versions of the kept one and share nearly
// all of it: not counted).
func (e *Engine) PlansSize() int64 {
	c := &e.plans
	c.mu.Lock()
	defer c.mu.Unlock()
	return int64(c.bytes)
}

// Size estimates the bytes the tree keeps alive: its items, their records
// (strings and decoded values), notes and the other records, the maps by
// record key and the lists of children. 0 for a nil tree.
func (t *Tree) Size() int64 {
	if t == nil {
		return 0
	}
	n := int64(unsafe.Sizeof(*t))
	itemSize := int64(unsafe.Sizeof(Item{}))
	for _, m := range []*Map[*Item]{&t.Nodes, &t.Mirrors} {
		for _, it := range m.All() {
			n += m.slotBytes() + itemSize
			n += recordSize(&it.Rec) - int64(unsafe.Sizeof(it.Rec)) // the struct is in the item
			n += it.Children.bytes()
			if it.Note != nil {
				// the note's record is kept once (the item points at it,
				// the Notes map holds a copy of its header)
				n += recordSize(it.Note)
			}
		}
	}
	for k, r := range t.Notes.All() {
		n += keySlotBytes + int64(len(k)) + int64(unsafe.Sizeof(r))
		if it := t.Nodes.Get(k); it == nil || it.Note == nil {
			n += recordSize(&r) - int64(unsafe.Sizeof(r))
		}
	}
	for _, m := range []*Map[store.Record]{&t.Policies, &t.Outlines, &t.Others} {
		for k, r := range m.All() {
			n += keySlotBytes + int64(len(k)) + recordSize(&r)
		}
	}
	for i := range t.Comments {
		n += recordSize(&t.Comments[i])
	}
	n += t.Roots.bytes() + t.Detached.bytes()
	return n
}

// recordSize estimates a record's bytes: its struct, its strings, its
// value (its encoding, one allocation).
func recordSize(r *store.Record) int64 {
	n := int64(unsafe.Sizeof(*r))
	// collection and record key: one allocation when read from a CAR key
	n += int64(len(r.Collection) + len(r.RKey) + len(r.CID))
	return n + allocBytes(r.Value.Len())
}

// allocBytes is what an allocation of n bytes takes: n rounded up to the
// allocator's size class (16 bytes apart up to 256, then coarser).
func allocBytes(n int) int64 {
	switch {
	case n == 0:
		return 0
	case n <= 256:
		return int64((n + 15) &^ 15)
	default:
		return int64(n + n/8)
	}
}
