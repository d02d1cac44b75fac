package pds

import (
	"unsafe"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// Size estimates the bytes the repository keeps in memory besides what an
// engine's tree over it shares and counts itself (outline.Tree.Size: the
// records' values, CIDs, collections and record keys): the blocks kept
// as blocks (the commit, other apps' records), the MST's nodes' blocks
// and their lists of values, other apps' records' counts, the snapshot's
// list while it is kept, the recent changes. It walks the kept blocks and nodes once (a few
// milliseconds at 100,000 records). A hosted instance evicts users by it
// (internal/hosted); TestSizeTracksHeap holds the two sizes together
// within 0.7×–1.4× of the heap a read repository takes.
func (r *Repo) Size() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(unsafe.Sizeof(*r))
	if c := r.car; c != nil {
		for k, b := range c.blocks {
			// the map's slot, the block (its struct), its CID (the key)
			// and bytes
			n += slotBytes + blockBytes + int64(len(k)+cap(b.RawData()))
		}
		for _, nd := range c.nodes {
			// the slot, its two slice headers, the CID (the key), the
			// bytes (in the read's arena of values) and its values' list
			// (their bytes are the tree's)
			n += slotBytes + int64(unsafe.Sizeof(nd)) + cidKeyBytes + int64(len(nd.data)) +
				int64(cap(nd.vals))*int64(unsafe.Sizeof(store.Value{}))
		}
		// another app's record's slot and count (its key is the bytes of
		// the MST's CID of it; its block is counted above)
		n += int64(len(c.others)) * (slotBytes + 8)
		if c.snap != nil {
			n += snapSize(c.snap)
		}
	}
	if r.list != nil {
		n += snapSize(r.list)
	}
	for _, t := range r.history {
		n += int64(unsafe.Sizeof(t)) + int64(len(t.changes))*int64(unsafe.Sizeof(store.Record{}))
	}
	return n
}

const (
	// a Go map's slot with a string key header (and the table's spare room)
	slotBytes = 40
	// a CID's binary key (CIDv1, dag-cbor, sha2-256: 36 bytes, allocated
	// in 48)
	cidKeyBytes = 48
	// a block in an interface: the BasicBlock struct and its CID's header
	blockBytes = 64
)

// snapSize is a snapshot's list of records (their strings and values are
// the tree's).
func snapSize(s *store.Snapshot) int64 {
	return int64(unsafe.Sizeof(*s)) + int64(cap(s.Records))*int64(unsafe.Sizeof(store.Record{}))
}
