package pds

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"weak"

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
	// the blocks of the new tree's nodes that the kept one does not have,
	// and the kept nodes (CID keys) the new tree no longer has
	added   []heldNode
	removed []string
	// the keys of the added and of the removed nodes: every key of the
	// repository whose entry moved, changed, came or went is in one of them
	newLeaves, oldLeaves map[string]cid.Cid
	refs                 map[string]int32     // record CID key → change of its count
	blocks               blockMap             // record blocks newly named
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
		st.added = append(st.added, heldNode{k, bytes.Clone(data)}) // not the read's chunk
		return nil
	}
	if err := walkNew(commit.Data); err != nil {
		return nil, err
	}
	st.root = commit.Data
	var walkOld func(k string) error
	walkOld = func(k string) error {
		if boundary[k] {
			return nil
		}
		n, err := c.node(k)
		if err != nil {
			return err
		}
		st.removed = append(st.removed, k)
		for _, e := range n.Entries {
			switch {
			case e.ChildCID != nil:
				if err := walkOld(e.ChildCID.KeyString()); err != nil {
					return err
				}
			case e.IsValue():
				st.oldLeaves[string(e.Key)] = *e.Value
			}
		}
		return nil
	}
	if err := walkOld(c.root.KeyString()); err != nil {
		return nil, err
	}

	// how many keys name each record block, and the blocks newly named
	for _, v := range st.newLeaves {
		st.refs[v.KeyString()]++
	}
	for _, v := range st.oldLeaves {
		st.refs[v.KeyString()]--
	}
	for k, d := range st.refs {
		if d > 0 && c.recs[k].refs == 0 {
			blk, ok := f.block(k)
			if !ok {
				return nil, fmt.Errorf("%w: record %s is missing", errIncomplete, cidOfKey(k))
			}
			st.blocks[k] = own(blk)
		}
	}
	// what changed
	for key, v := range st.newLeaves {
		old, had := st.oldLeaves[key]
		if had && old == v || !strings.HasPrefix(key, store.Prefix) {
			continue
		}
		st.changes = append(st.changes, change{key: key, old: old, new: v})
		vk := v.KeyString()
		rec, err := c.record(vk, f, st.recs)
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", key, err)
		}
		st.recs[vk] = rec
	}
	for key, old := range st.oldLeaves {
		if _, ok := st.newLeaves[key]; !ok && strings.HasPrefix(key, store.Prefix) {
			st.changes = append(st.changes, change{key: key, old: old})
		}
	}
	slices.SortFunc(st.changes, func(a, b change) int { return strings.Compare(a.key, b.key) })
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
		c.nodes[n.key] = n.data
	}
	for k, d := range st.refs {
		if d == 0 {
			continue
		}
		rec := c.recs[k]
		if rec.refs+d <= 0 {
			if !rec.value.IsZero() {
				c.held--
			}
			delete(c.recs, k)
			delete(c.blocks, k)
			continue
		}
		if rec.refs == 0 {
			if d, ok := st.recs[k]; ok {
				rec.value = d.value // named by an app.bulleted key
				c.held++
			} else {
				c.blocks[k] = st.blocks[k]
			}
		}
		rec.refs += d
		c.recs[k] = rec
	}
	// a record kept as a block and now named by an app.bulleted key too
	for k, d := range st.recs {
		if rec, ok := c.recs[k]; ok && rec.value.IsZero() {
			rec.value = d.value
			c.recs[k] = rec
			c.held++
			delete(c.blocks, k)
		}
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

// record is key with the value v (undefined: deleted).
func (st *step) record(c *carRepo, key string, v cid.Cid) store.Record {
	coll, rkey, _ := strings.Cut(key, "/")
	r := store.Record{Collection: coll, RKey: rkey}
	if v.Defined() {
		vk := v.KeyString()
		if rec, ok := st.recs[vk]; ok {
			r.CID, r.Value = rec.cid, rec.value
		} else {
			r.CID, r.Value = cidText(vk), c.recs[vk].value
		}
	}
	return r
}
