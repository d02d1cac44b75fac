package pds

import (
	"unsafe"

	"github.com/bluesky-social/indigo/atproto/repo/mst"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// Size estimates the bytes the repository keeps in memory besides what an
// engine's tree over it shares and counts itself (outline.Tree.Size: the
// records' decoded values, CIDs, collections and record keys): the kept
// blocks, the decoded MST, the maps by CID, the snapshot's list, the
// recent changes. It walks the kept blocks and nodes once (a few
// milliseconds at 100,000 records). A hosted instance evicts users by it
// (internal/hosted); TestSizeTracksHeap holds the two sizes together
// within 0.7×–1.4× of the heap a read repository takes.
func (r *Repo) Size() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := int64(unsafe.Sizeof(*r))
	if c := r.car; c != nil {
		for k, b := range c.blocks {
			// the map's slot and key, the block (its struct, its CID's
			// string, its bytes)
			n += slotBytes + int64(len(k)) + blockBytes + int64(len(b.Cid().KeyString())+cap(b.RawData()))
		}
		for k, nd := range c.nodes {
			n += slotBytes + int64(len(k)) + nodeSize(nd)
		}
		// a record's slot, key and entry (its value's bytes and its CID's
		// text are the tree's)
		n += int64(len(c.recs)) * (slotBytes + cidKeyBytes + int64(unsafe.Sizeof(carRecord{})))
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
	// a CID's binary key (CIDv1, dag-cbor, sha2-256)
	cidKeyBytes = 36
	// a block in an interface: the BasicBlock struct and its CID's header
	blockBytes = 64
)

// nodeSize is an MST node's struct, its entries, their key suffixes and
// CIDs.
func nodeSize(nd *mst.Node) int64 {
	n := int64(unsafe.Sizeof(*nd)) + int64(cap(nd.Entries))*int64(unsafe.Sizeof(mst.NodeEntry{}))
	if nd.CID != nil {
		n += 16 + cidKeyBytes
	}
	for _, e := range nd.Entries {
		n += int64(cap(e.Key))
		if e.Value != nil {
			n += 16 + cidKeyBytes
		}
		if e.ChildCID != nil {
			n += 16 + cidKeyBytes
		}
	}
	return n
}

// snapSize is a snapshot's list of records (their strings and values are
// the tree's).
func snapSize(s *store.Snapshot) int64 {
	return int64(unsafe.Sizeof(*s)) + int64(cap(s.Records))*int64(unsafe.Sizeof(store.Record{}))
}
