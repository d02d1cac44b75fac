package outline

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
	"github.com/bulleted-mcp/bulleted-mcp/store"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// Item is a node or a mirror in the tree.
type Item struct {
	Rec      store.Record
	Mirror   bool
	Parent   *Item // nil at the top level or when detached
	Children []*Item
	Note     *store.Record
	Detached string // why the item does not hang in the tree ("" if it does)

	did     syntax.DID  // the repository, for the record's own URI
	check   sync.Once   // validation runs on first use of Invalid
	problem string      // validation problem ("" if valid)
	done    atomic.Bool // problem is set
	sortKey string      // cached: the record's sortKey
	mark    uint8       // cycle detection state while building
	pkey    string      // parent's record key when the parent field names a node of this repo
	pwhy    string      // why the parent field cannot hang here ("" if it can)
	parsed  bool        // pkey and pwhy are set
}

// parentKey reads a parent field: the record key of a node of this
// repository, or why it cannot be one.
func (t *Tree) parentKey(p string) (key, why string) {
	if p == "" {
		return "", ""
	}
	u, err := syntax.ParseATURI(p)
	switch {
	case err != nil:
		return "", "parent is not a valid AT-URI"
	case u.Authority().String() != t.DID.String():
		return "", "parent is in another repository"
	case u.Collection().String() != lexicon.Node:
		return "", "parent is not an app.bulleted.node"
	}
	return u.RecordKey().String(), ""
}

// item returns prev's item for the same record at the same CID, or nil.
func (t *Tree) item(r store.Record) *Item {
	if t == nil || r.CID == "" {
		return nil
	}
	m := t.Nodes
	if r.Collection == lexicon.Mirror {
		m = t.Mirrors
	}
	if old := m[r.RKey]; old != nil && old.Rec.CID == r.CID {
		return old
	}
	return nil
}

// Invalid returns the record's validation problem ("" if it is valid).
// Invalid records are kept and flagged, never dropped. Validation runs on
// first use, so that reading a large repository validates what is shown
// and planned, not every record up front; a result is carried to the next
// tree while the record's CID is unchanged.
func (it *Item) Invalid() string {
	it.check.Do(func() {
		u := syntax.ATURI("at://" + it.did.String() + "/" + it.Rec.Collection + "/" + it.Rec.RKey)
		if err := validate.Default().Data(it.Rec.Value, it.Rec.Collection, &u); err != nil {
			it.problem = err.Error()
		}
		it.done.Store(true)
	})
	return it.problem
}

// checked reports whether Invalid already ran (its result can be reused).
func (it *Item) checked() (string, bool) {
	if it.done.Load() {
		return it.problem, true
	}
	return "", false
}

// Key is the item's record key.
func (it *Item) Key() string { return it.Rec.RKey }

// SortKey of the item.
func (it *Item) SortKey() string { return it.sortKey }

// Str returns a string field of the record.
func (it *Item) Str(f string) string { s, _ := it.Rec.Value[f].(string); return s }

// Tree is the forest built from one snapshot.
type Tree struct {
	DID      syntax.DID
	Commit   string
	Rev      string
	Roots    []*Item
	Nodes    map[string]*Item // by record key
	Mirrors  map[string]*Item
	Notes    map[string]store.Record
	Policies map[string]store.Record
	Outlines map[string]store.Record
	Comments []store.Record
	Detached []*Item
	Count    int // all app.bulleted records
	Snap     *store.Snapshot
}

func (t *Tree) uri(coll, rkey string) string {
	return "at://" + t.DID.String() + "/" + coll + "/" + rkey
}

// NodeURI is the AT-URI of a node of this repository.
func (t *Tree) NodeURI(rkey string) string { return t.uri(lexicon.Node, rkey) }

// Build makes the tree. Nothing is dropped: invalid records are flagged, and
// items whose parent is missing, in another repo, not a node, or part of a
// cycle are listed as detached.
func Build(s *store.Snapshot) *Tree { return Rebuild(s, nil) }

// Rebuild is Build reusing what prev (an earlier tree of the same repository,
// or nil) already knows about records whose CID is unchanged, so that only
// new and changed records are validated again.
func Rebuild(s *store.Snapshot, prev *Tree) *Tree {
	if prev != nil && prev.DID != s.DID {
		prev = nil
	}
	// size everything once: at 250,000 records growing maps and allocating
	// items one by one was most of a rebuild
	nNodes, nMirrors, nNotes := 0, 0, 0
	for i := range s.Records {
		switch s.Records[i].Collection {
		case lexicon.Node:
			nNodes++
		case lexicon.Mirror:
			nMirrors++
		case lexicon.Note:
			nNotes++
		}
	}
	t := &Tree{DID: s.DID, Commit: s.Commit, Rev: s.Rev, Nodes: make(map[string]*Item, nNodes), Mirrors: make(map[string]*Item, nMirrors),
		Notes: make(map[string]store.Record, nNotes), Policies: map[string]store.Record{}, Outlines: map[string]store.Record{}, Count: len(s.Records), Snap: s}
	slab := make([]Item, nNodes+nMirrors)
	items := make([]*Item, 0, len(slab))
	for _, r := range s.Records {
		switch r.Collection {
		case lexicon.Node, lexicon.Mirror:
			it := &slab[len(items)]
			it.Rec, it.Mirror = r, r.Collection == lexicon.Mirror
			it.did = t.DID
			if old := prev.item(r); old != nil {
				it.sortKey = old.sortKey
				if p, ok := old.checked(); ok {
					it.check.Do(func() { it.problem = p; it.done.Store(true) })
				}
				it.pkey, it.pwhy, it.parsed = old.pkey, old.pwhy, old.parsed
			} else {
				it.sortKey, _ = r.Value["sortKey"].(string)
			}
			if it.Mirror {
				t.Mirrors[r.RKey] = it
			} else {
				t.Nodes[r.RKey] = it
			}
			items = append(items, it)
		case lexicon.Note:
			t.Notes[r.RKey] = r
		case lexicon.CommentPolicy:
			t.Policies[r.RKey] = r
		case lexicon.Outline:
			t.Outlines[r.RKey] = r
		case lexicon.Comment:
			t.Comments = append(t.Comments, r)
		}
	}
	notes := make([]store.Record, 0, len(t.Notes))
	for rk, n := range t.Notes {
		if it := t.Nodes[rk]; it != nil {
			notes = append(notes, n)
			it.Note = &notes[len(notes)-1]
		}
	}
	// siblings share their parent: parse each distinct parent once
	type parsedParent struct{ key, why string }
	parents := map[string]parsedParent{}
	for _, it := range items {
		if !it.parsed {
			p := it.Str("parent")
			pp, ok := parents[p]
			if !ok {
				pp.key, pp.why = t.parentKey(p)
				parents[p] = pp
			}
			it.pkey, it.pwhy = pp.key, pp.why
			it.parsed = true
		}
		switch {
		case it.pwhy != "":
			it.Detached = it.pwhy
		case it.pkey == "":
		default:
			if par := t.Nodes[it.pkey]; par != nil {
				it.Parent = par
			} else {
				it.Detached = "parent " + it.pkey + " does not exist"
			}
		}
	}
	// cycles: each item is visited once; an upward walk that meets an item
	// of the walk itself (or one already known to loop) never reaches the
	// top, so the whole walk is part of, or hangs below, a parent cycle.
	const (
		visiting = 1
		rooted   = 2
		looping  = 3
	)
	var path []*Item
	for _, it := range items {
		path = path[:0]
		end := uint8(rooted)
		for p := it; p != nil; p = p.Parent {
			if p.mark == visiting {
				end = looping
				break
			}
			if p.mark != 0 {
				end = p.mark
				break
			}
			p.mark = visiting
			path = append(path, p)
		}
		for _, p := range path {
			p.mark = end
			if end == looping {
				p.Detached = "part of a parent cycle"
			}
		}
	}
	for _, it := range items {
		if it.Detached != "" {
			it.Parent = nil
			t.Detached = append(t.Detached, it)
			continue
		}
		if it.Parent == nil {
			t.Roots = append(t.Roots, it)
		} else {
			it.Parent.Children = append(it.Parent.Children, it)
		}
	}
	sortItems(t.Roots)
	for _, it := range items {
		sortItems(it.Children)
	}
	sortItems(t.Detached)
	return t
}

func sortItems(xs []*Item) {
	slices.SortFunc(xs, func(a, b *Item) int {
		if c := strings.Compare(a.sortKey, b.sortKey); c != 0 {
			return c
		}
		if c := strings.Compare(a.Rec.RKey, b.Rec.RKey); c != 0 {
			return c
		}
		switch {
		case a.Mirror == b.Mirror:
			return 0
		case !a.Mirror:
			return -1
		}
		return 1
	})
}

// less is sibling order: sortKey bytes, then record key, then nodes first.
func less(a, b *Item) bool {
	if ka, kb := a.SortKey(), b.SortKey(); ka != kb {
		return ka < kb
	}
	if a.Key() != b.Key() {
		return a.Key() < b.Key()
	}
	return !a.Mirror && b.Mirror
}

// ChildrenOf returns the sibling list under parent (nil: the top level).
func (t *Tree) ChildrenOf(parent *Item) []*Item {
	if parent == nil {
		return t.Roots
	}
	return parent.Children
}

// IsAncestor reports whether a is an ancestor of (or equal to) b.
func IsAncestor(a, b *Item) bool {
	for p := b; p != nil; p = p.Parent {
		if p == a {
			return true
		}
	}
	return false
}

// Subtree returns it and its descendants, parents before children.
func Subtree(it *Item) []*Item {
	out := []*Item{it}
	for i := 0; i < len(out); i++ {
		out = append(out, out[i].Children...)
	}
	return out
}

// Resolve turns a reference (record key or at:// URI) into a node or mirror
// of this repository.
func (t *Tree) Resolve(ref string) (*Item, error) {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return nil, fail(ErrInvalidInput, "", "empty node reference")
	}
	if strings.HasPrefix(ref, "at://") {
		u, err := syntax.ParseATURI(ref)
		if err != nil {
			return nil, fail(ErrInvalidInput, "pass a record key or at://DID/app.bulleted.node/RKEY", "%q is not a valid AT-URI", ref)
		}
		if u.Authority().String() != t.DID.String() {
			return nil, fail(ErrCrossRepo, "only bullets of "+t.DID.String()+" can be used here", "%s is in another repository", ref)
		}
		switch u.Collection().String() {
		case lexicon.Node:
			if it := t.Nodes[u.RecordKey().String()]; it != nil {
				return it, nil
			}
		case lexicon.Mirror:
			if it := t.Mirrors[u.RecordKey().String()]; it != nil {
				return it, nil
			}
		default:
			return nil, fail(ErrInvalidInput, "", "%s is not a node or mirror", ref)
		}
		ref = u.RecordKey().String()
	} else if it := t.Nodes[ref]; it != nil {
		return it, nil
	} else if it := t.Mirrors[ref]; it != nil {
		return it, nil
	}
	if !strings.HasPrefix(ref, "at://") {
		// an agent passed the bullet's text: say which bullets have it
		var keys []string
		for _, it := range t.Nodes {
			if strings.EqualFold(strings.TrimSpace(it.Str("text")), ref) {
				keys = append(keys, it.Key())
			}
		}
		if len(keys) > 0 {
			slices.Sort(keys)
			if len(keys) > 10 {
				keys = append(keys[:10], "…")
			}
			return nil, fail(ErrNodeNotFound, "pass one of those record keys", "no bullet with key '%s'; bullets whose text is '%s': %s", ref, ref, strings.Join(keys, ", "))
		}
	}
	return nil, fail(ErrNodeNotFound, "call read_outline or search to see the bullets and their record keys", "no bullet with record key %s in %s", ref, t.DID)
}

// Applied returns the snapshot with writes applied in memory (CIDs of changed
// records are left empty): the basis of previews and of batches whose later
// operations must see the earlier ones.
func Applied(s *store.Snapshot, writes []store.Write) *store.Snapshot {
	idx := map[string]int{}
	out := &store.Snapshot{DID: s.DID, Commit: s.Commit, Rev: s.Rev, Records: append([]store.Record(nil), s.Records...)}
	for i, r := range out.Records {
		idx[r.Collection+"/"+r.RKey] = i
	}
	for _, w := range writes {
		path := w.Collection + "/" + w.RKey
		switch w.Op {
		case store.Create, store.Update:
			rec := store.Record{Collection: w.Collection, RKey: w.RKey, Value: w.Value}
			if i, ok := idx[path]; ok {
				out.Records[i] = rec
			} else {
				idx[path] = len(out.Records)
				out.Records = append(out.Records, rec)
			}
		case store.Delete:
			if i, ok := idx[path]; ok {
				out.Records[i].Collection = "" // tombstone
			}
		}
	}
	live := out.Records[:0]
	for _, r := range out.Records {
		if r.Collection != "" {
			live = append(live, r)
		}
	}
	out.Records = live
	return out
}

// Record returns the record at coll/rkey in the tree's snapshot.
func (t *Tree) Record(coll, rkey string) (store.Record, bool) {
	switch coll {
	case lexicon.Node:
		if it := t.Nodes[rkey]; it != nil {
			return it.Rec, true
		}
		return store.Record{}, false
	case lexicon.Mirror:
		if it := t.Mirrors[rkey]; it != nil {
			return it.Rec, true
		}
		return store.Record{}, false
	case lexicon.Note:
		r, ok := t.Notes[rkey]
		return r, ok
	case lexicon.CommentPolicy:
		r, ok := t.Policies[rkey]
		return r, ok
	case lexicon.Outline:
		r, ok := t.Outlines[rkey]
		return r, ok
	}
	for _, r := range t.Comments {
		if r.Collection == coll && r.RKey == rkey {
			return r, true
		}
	}
	return store.Record{}, false
}
