package outline

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Next returns the tree of the commit that made changes to t's snapshot
// (records created or updated with their value, deleted with a nil Value).
// It shares with t every item that did not change: the cost is the changed
// records, the sibling lists they leave and join, and the path from them to
// the top, not the size of the repository. t is not modified. Changes that
// alter which items are detached beyond the changed ones (a parent created
// for items that were missing it, a node deleted under which something still
// hangs, a parent cycle made or broken) are rare; for them the tree is built
// again from every record, which gives the same tree.
func (t *Tree) Next(commit, rev string, changes []store.Record) *Tree {
	if nt := t.next(commit, rev, changes); nt != nil {
		return nt
	}
	fullBuilds.Add(1)
	return Rebuild(&store.Snapshot{DID: t.DID, Commit: commit, Rev: rev, Records: applyChanges(t.Records(), changes)}, t)
}

// WriteChanges are the record changes writes make (without CIDs): what
// Next takes to preview a plan.
func WriteChanges(writes []store.Write) []store.Record {
	out := make([]store.Record, 0, len(writes))
	for _, w := range writes {
		r := store.Record{Collection: w.Collection, RKey: w.RKey}
		if w.Op != store.Delete {
			r.Value = w.Value
		}
		out = append(out, r)
	}
	return out
}

// fullBuilds counts the commits Next could not follow (tests).
var fullBuilds atomic.Int64

// applyChanges returns recs (sorted) with changes applied.
func applyChanges(recs []store.Record, changes []store.Record) []store.Record {
	for _, c := range changes {
		i, found := slices.BinarySearchFunc(recs, c, store.CompareRecords)
		switch {
		case c.Value == nil && found:
			recs = slices.Delete(recs, i, i+1)
		case c.Value == nil:
		case found:
			recs[i] = c
		default:
			recs = slices.Insert(recs, i, c)
		}
	}
	return recs
}

// container names a sibling list: a parent node's record key, or one of
// these two.
const (
	topLevel     = "\x00top"
	detachedList = "\x00detached"
)

// itemID names a node or a mirror (they may share a record key).
func itemID(it *Item) string {
	if it.Mirror {
		return "m/" + it.Rec.RKey
	}
	return "n/" + it.Rec.RKey
}

// containerOf is the sibling list it is in.
func containerOf(it *Item) string {
	switch {
	case it.Detached != "":
		return detachedList
	case it.pkey == "":
		return topLevel
	}
	return it.pkey
}

// siblingEdit is what happens to one sibling list.
type siblingEdit struct {
	remove map[string]bool // item IDs leaving (or replaced in) the list
	add    []*Item         // items joining it (or their new versions)
}

// next is Next without the fallback: nil when it cannot tell.
func (t *Tree) next(commit, rev string, changes []store.Record) *Tree {
	// the last change of each record wins
	last := make(map[string]int, len(changes))
	for i, c := range changes {
		last[c.Collection+"/"+c.RKey] = i
	}
	var (
		repl      = map[string]*Item{} // item ID → new version (nil: deleted)
		noteCh    = map[string]slot[store.Record]{}
		policyCh  = map[string]slot[store.Record]{}
		outlineCh = map[string]slot[store.Record]{}
		otherCh   = map[string]slot[store.Record]{}
		comments  = t.Comments
		commentCh = false
		created   []string // node keys created
	)
	old := func(id string) *Item {
		if id[0] == 'm' {
			return t.Mirrors.Get(id[2:])
		}
		return t.Nodes.Get(id[2:])
	}
	for i, c := range changes {
		if last[c.Collection+"/"+c.RKey] != i {
			continue
		}
		present := c.Value != nil
		switch c.Collection {
		case lexicon.Node, lexicon.Mirror:
			id := "m/" + c.RKey
			if c.Collection == lexicon.Node {
				id = "n/" + c.RKey
			}
			o := old(id)
			if o != nil && o.Detached == cycleReason {
				return nil
			}
			if !present {
				if o != nil {
					repl[id] = nil
				}
				continue
			}
			it := &Item{Rec: c, Mirror: c.Collection == lexicon.Mirror, did: t.DID}
			it.sortKey, _ = c.Value["sortKey"].(string)
			it.pkey, it.pwhy = t.parentKey(it.Str("parent"))
			it.parsed = true
			if o != nil {
				it.Children = o.Children
				if o.Rec.CID == c.CID && c.CID != "" {
					if p, ok := o.checked(); ok {
						it.check.Do(func() { it.problem = p; it.done.Store(true) })
					}
				}
			} else if !it.Mirror {
				created = append(created, c.RKey)
			}
			repl[id] = it
		case lexicon.Note:
			noteCh[c.RKey] = slot[store.Record]{c, present}
		case lexicon.CommentPolicy:
			policyCh[c.RKey] = slot[store.Record]{c, present}
		case lexicon.Outline:
			outlineCh[c.RKey] = slot[store.Record]{c, present}
		case lexicon.Comment:
			if !commentCh {
				comments, commentCh = slices.Clone(comments), true
			}
			i, found := slices.BinarySearchFunc(comments, c.RKey, func(r store.Record, k string) int { return strings.Compare(r.RKey, k) })
			switch {
			case !present && found:
				comments = slices.Delete(comments, i, i+1)
			case !present:
			case found:
				comments[i] = c
			default:
				comments = slices.Insert(comments, i, c)
			}
		default:
			otherCh[c.Collection+"/"+c.RKey] = slot[store.Record]{c, present}
		}
	}
	// a node whose note changed is a new version with its new note
	for rk := range noteCh {
		id := "n/" + rk
		if _, ok := repl[id]; ok {
			continue
		}
		if o := t.Nodes.Get(rk); o != nil {
			if o.Detached == cycleReason {
				return nil
			}
			repl[id] = o.clone()
		}
	}
	finalNode := func(key string) *Item {
		if it, ok := repl["n/"+key]; ok {
			return it
		}
		return t.Nodes.Get(key)
	}
	notes := t.Notes.with(noteCh)
	// where each new version hangs
	for _, it := range repl {
		if it == nil {
			continue
		}
		if !it.Mirror {
			if n, ok := notes.Lookup(it.Rec.RKey); ok {
				it.Note = &n
			} else {
				it.Note = nil
			}
		}
		if it.pwhy != "" {
			it.Detached = it.pwhy
		} else if it.pkey != "" && finalNode(it.pkey) == nil {
			it.Detached = "parent " + it.pkey + " does not exist"
		} else {
			it.Detached = ""
		}
	}
	// a created node may be the missing parent of detached items
	if len(created) > 0 && len(t.Detached) > 0 {
		for _, d := range t.Detached {
			if d.pwhy == "" && d.pkey != "" && slices.Contains(created, d.pkey) {
				if _, changed := repl[itemID(d)]; !changed {
					return nil
				}
			}
		}
	}
	// a parent cycle made by the new versions
	limit := t.Nodes.Len() + len(repl) + 1
	for _, it := range repl {
		if it == nil || it.Detached != "" || it.pkey == "" {
			continue
		}
		steps := 0
		for k := it.pkey; k != ""; {
			p := finalNode(k)
			if p == nil || p == it || p.Detached == cycleReason || steps > limit {
				return nil // a cycle; or a parent that vanished while walking
			}
			if p.Detached != "" {
				break
			}
			k = p.pkey
			steps++
		}
	}
	// sibling lists: every changed item leaves its old list and joins its
	// new one; a list that changes makes a new version of its parent, which
	// is changed in its own list, up to the top
	edits := map[string]*siblingEdit{}
	var work []string
	edit := func(c string) *siblingEdit {
		e := edits[c]
		if e == nil {
			e = &siblingEdit{remove: map[string]bool{}}
			edits[c] = e
			work = append(work, c)
		}
		return e
	}
	for id, it := range repl {
		if o := old(id); o != nil {
			edit(containerOf(o)).remove[id] = true
		}
		if it != nil {
			c := containerOf(it)
			edit(c).add = append(edit(c).add, it)
		}
	}
	for len(work) > 0 {
		c := work[len(work)-1]
		work = work[:len(work)-1]
		if c == topLevel || c == detachedList {
			continue
		}
		id := "n/" + c
		if _, ok := repl[id]; ok {
			continue // a new version already in its lists, or deleted (checked below)
		}
		o := t.Nodes.Get(c)
		if o == nil {
			continue // a parent created in this commit
		}
		nv := o.clone()
		repl[id] = nv
		pc := containerOf(o)
		e := edit(pc)
		e.remove[id] = true
		e.add = append(e.add, nv)
	}
	nt := &Tree{DID: t.DID, Commit: commit, Rev: rev, Roots: t.Roots, Detached: t.Detached, Comments: comments, Notes: notes}
	for c, e := range edits {
		var base []*Item
		switch c {
		case topLevel:
			base = t.Roots
		case detachedList:
			base = t.Detached
		default:
			if o := t.Nodes.Get(c); o != nil {
				base = o.Children
			}
		}
		list := make([]*Item, 0, len(base)+len(e.add))
		for _, it := range base {
			if !e.remove[itemID(it)] {
				list = append(list, it)
			}
		}
		sortItems(e.add)
		list = mergeSorted(list, e.add)
		switch c {
		case topLevel:
			nt.Roots = list
		case detachedList:
			nt.Detached = list
		default:
			p := repl["n/"+c]
			if p == nil {
				if len(list) > 0 {
					return nil // a node deleted while something still hangs under it
				}
				continue
			}
			p.Children = list
		}
	}
	// a deleted node must leave no children behind
	for id, it := range repl {
		if it != nil || id[0] != 'n' {
			continue
		}
		if e := edits[id[2:]]; e == nil {
			if o := t.Nodes.Get(id[2:]); o != nil && len(o.Children) > 0 {
				return nil
			}
		}
	}
	nodeCh, mirrorCh := map[string]slot[*Item]{}, map[string]slot[*Item]{}
	for id, it := range repl {
		if id[0] == 'm' {
			mirrorCh[id[2:]] = slot[*Item]{it, it != nil}
		} else {
			nodeCh[id[2:]] = slot[*Item]{it, it != nil}
		}
	}
	nt.Nodes, nt.Mirrors = t.Nodes.with(nodeCh), t.Mirrors.with(mirrorCh)
	nt.Policies, nt.Outlines, nt.Others = t.Policies.with(policyCh), t.Outlines.with(outlineCh), t.Others.with(otherCh)
	nt.Count = nt.Nodes.Len() + nt.Mirrors.Len() + nt.Notes.Len() + nt.Policies.Len() + nt.Outlines.Len() + nt.Others.Len() + len(nt.Comments)
	return nt
}

// mergeSorted merges two lists in sibling order.
func mergeSorted(a, b []*Item) []*Item {
	if len(b) == 0 {
		return a
	}
	out := make([]*Item, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if less(b[j], a[i]) {
			out = append(out, b[j])
			j++
		} else {
			out = append(out, a[i])
			i++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

// clone is a new version of it with the same record (its validation result
// carried over when known).
func (it *Item) clone() *Item {
	c := &Item{Rec: it.Rec, Mirror: it.Mirror, Children: it.Children, Note: it.Note, Detached: it.Detached,
		did: it.did, sortKey: it.sortKey, pkey: it.pkey, pwhy: it.pwhy, parsed: it.parsed}
	if p, ok := it.checked(); ok {
		c.check.Do(func() { c.problem = p; c.done.Store(true) })
	}
	return c
}
