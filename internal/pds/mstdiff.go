package pds

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"weak"

	"github.com/bluesky-social/indigo/atproto/repo/mst"
	"github.com/bluesky-social/indigo/atproto/syntax"
	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// step is the difference between a kept repository's MST and a newer
// commit's, found without modifying the kept one: what apply does to it.
type step struct {
	commit cid.Cid
	rev    string
	cblock blocks.Block // the new commit's block
	root   cid.Cid      // the new MST's root node
	// the new tree's nodes that the kept one does not have (with their
	// records' values), and the kept nodes (CID keys) the new tree no
	// longer has
	added   []heldNode
	removed []string
	held    int // the change of the count of app.bulleted keys
	// the keys of the added and of the removed nodes: every key of the
	// repository whose entry moved, changed, came or went is in one of them
	newLeaves, oldLeaves map[string]cid.Cid
	refs                 map[string]int32     // another app's record's CID key → change of its count
	blocks               blockMap             // other apps' record blocks newly named
	recs                 map[string]carRecord // records decoded for the changes
	changes              []change             // app.bulleted keys changed, in key order
}

// change is one app.bulleted key whose value changed (an undefined CID:
// absent).
type change struct {
	key      string
	old, new cid.Cid
}

// diff finds the difference between c's tree and the one of f's commit. It
// walks the new tree only into the nodes c does not have (the new ones,
// whose blocks f must hold), noting the kept nodes they point to (the
// boundary); then the kept tree, skipping the boundary: what it walks is
// what the new tree no longer has. A key is created, updated or deleted by
// comparing the entries of the nodes found on each side; a key in a node
// both trees share did not change. The cost is the nodes that changed (the
// paths from each changed key to the root), not the size of the tree.
//
// A new node's record values come from the removed nodes (a key that did
// not change was in one of them), from f, or (a record whose bytes another
// unchanged key already names, which f need not bring) from a walk of the
// kept tree.
func (c *carRepo) diff(f *fetched, did syntax.DID) (*step, error) {
	commit, err := f.commit(did)
	if err != nil {
		return nil, err
	}
	st := &step{commit: f.root, rev: commit.Rev, cblock: own(f.rootBlk),
		newLeaves: map[string]cid.Cid{}, oldLeaves: map[string]cid.Cid{},
		refs: map[string]int32{}, blocks: blockMap{}, recs: map[string]carRecord{}}
	boundary := map[string]bool{}
	added := map[string]bool{}
	var fresh []*mst.Node // st.added's nodes, decoded
	var walkNew func(id cid.Cid) error
	walkNew = func(id cid.Cid) error {
		k := id.KeyString()
		if _, ok := c.nodes[k]; ok {
			boundary[k] = true
			return nil
		}
		if added[k] {
			return nil
		}
		n, data, err := f.node(k)
		if err != nil {
			return err
		}
		added[k] = true
		for _, e := range n.Entries {
			switch {
			case e.ChildCID != nil:
				if err := walkNew(*e.ChildCID); err != nil {
					return err
				}
			case e.IsValue():
				st.newLeaves[string(e.Key)] = *e.Value
			}
		}
		st.added = append(st.added, heldNode{k, keptNode{data: bytes.Clone(data)}}) // not the read's chunk
		fresh = append(fresh, n)
		return nil
	}
	if err := walkNew(commit.Data); err != nil {
		return nil, err
	}
	st.root = commit.Data
	old := map[string]store.Value{} // the removed nodes' records, by CID key
	var walkOld func(k string) error
	walkOld = func(k string) error {
		if boundary[k] {
			return nil
		}
		n, vals, err := c.node(k)
		if err != nil {
			return err
		}
		st.removed = append(st.removed, k)
		i := 0
		for _, e := range n.Entries {
			switch {
			case e.ChildCID != nil:
				if err := walkOld(e.ChildCID.KeyString()); err != nil {
					return err
				}
			case e.IsValue():
				st.oldLeaves[string(e.Key)] = *e.Value
				if v := valueAt(vals, i); !v.IsZero() {
					old[e.Value.KeyString()] = v
					st.held--
				}
				i++
			}
		}
		return nil
	}
	if err := walkOld(c.root.KeyString()); err != nil {
		return nil, err
	}

	// how many keys name each other app's record block, and the blocks
	// newly named
	for key, v := range st.newLeaves {
		if !strings.HasPrefix(key, store.Prefix) {
			st.refs[v.KeyString()]++
		}
	}
	for key, v := range st.oldLeaves {
		if !strings.HasPrefix(key, store.Prefix) {
			st.refs[v.KeyString()]--
		}
	}
	for k, d := range st.refs {
		if d > 0 && c.others[k] == 0 {
			blk, ok := f.block(k)
			if !ok {
				// bytes an app.bulleted key names too, which f need not
				// bring again
				v, held := old[k]
				if !held {
					v, held = c.find(k)
				}
				if id, err := cid.Cast([]byte(k)); err == nil && held {
					blk, err = blocks.NewBlockWithCid(v.CBOR(), id)
					ok = err == nil
				}
			}
			if !ok {
				return nil, fmt.Errorf("%w: record %s is missing", errIncomplete, cidOfKey(k))
			}
			st.blocks[k] = own(blk)
		}
	}
	// what changed
	for key, v := range st.newLeaves {
		was, had := st.oldLeaves[key]
		if had && was == v || !strings.HasPrefix(key, store.Prefix) {
			continue
		}
		st.changes = append(st.changes, change{key: key, old: was, new: v})
		vk := v.KeyString()
		if _, ok := st.recs[vk]; ok {
			continue
		}
		if ov, ok := old[vk]; ok {
			st.recs[vk] = carRecord{cid: cidText(vk), value: ov}
			continue
		}
		v, err := c.value(vk, f, nil)
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", key, err)
		}
		st.recs[vk] = carRecord{cid: cidText(vk), value: v}
	}
	for key, was := range st.oldLeaves {
		if _, ok := st.newLeaves[key]; !ok && strings.HasPrefix(key, store.Prefix) {
			st.changes = append(st.changes, change{key: key, old: was})
		}
	}
	slices.SortFunc(st.changes, func(a, b change) int { return strings.Compare(a.key, b.key) })
	// the new nodes' values
	for j, n := range fresh {
		values, _ := valueCount(n)
		i := 0
		for _, e := range n.Entries {
			if !e.IsValue() {
				continue
			}
			if bytes.HasPrefix(e.Key, appPrefix) {
				vk := e.Value.KeyString()
				v, ok := old[vk]
				if !ok {
					var err error
					if v, err = c.value(vk, f, st.recs); err != nil {
						return nil, fmt.Errorf("record %s: %w", e.Key, err)
					}
				}
				if st.added[j].vals == nil {
					st.added[j].vals = make([]store.Value, values)
				}
				st.added[j].vals[i] = v
				st.held++
			}
			i++
		}
	}
	return st, nil
}

// apply makes c the repository of st's commit.
func (c *carRepo) apply(st *step) {
	delete(c.blocks, c.commit.KeyString())
	c.blocks[st.commit.KeyString()] = st.cblock
	for _, k := range st.removed {
		delete(c.nodes, k)
	}
	for _, n := range st.added {
		c.nodes[n.key] = n.keptNode
	}
	c.held += st.held
	for k, d := range st.refs {
		if d == 0 {
			continue
		}
		refs := c.others[k]
		if refs+d <= 0 {
			delete(c.others, k)
			delete(c.blocks, k)
			continue
		}
		if refs == 0 {
			c.blocks[k] = st.blocks[k]
		}
		c.others[k] = refs + d
	}
	c.commit, c.rev, c.root, c.snap, c.given = st.commit, st.rev, st.root, nil, weak.Pointer[store.Snapshot]{}
}

// records are st's changes as Deltas reports them: created and updated
// records with their value, deleted ones without. c is the repository st
// applies to (before or after apply).
func (st *step) records(c *carRepo) []store.Record {
	out := make([]store.Record, 0, len(st.changes))
	for _, ch := range st.changes {
		out = append(out, st.record(c, ch.key, ch.new))
	}
	return out
}

// record is key with the value v (undefined: deleted): a changed key's,
// decoded by diff.
func (st *step) record(c *carRepo, key string, v cid.Cid) store.Record {
	coll, rkey, _ := strings.Cut(key, "/")
	r := store.Record{Collection: coll, RKey: rkey}
	if v.Defined() {
		vk := v.KeyString()
		if rec, ok := st.recs[vk]; ok {
			r.CID, r.Value = rec.cid, rec.value
		} else {
			r.CID = cidText(vk)
			r.Value, _ = c.find(vk) // not a change of st: never so far
		}
	}
	return r
}
