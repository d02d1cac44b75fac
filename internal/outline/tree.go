package outline

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// Item is a node or a mirror in the tree.
type Item struct {
	Rec      store.Record
	Children []*Item // in sibling order; never modified once the tree is built
	Note     *store.Record
	Detached string // why the item does not hang in the tree ("" if it does)

	did     syntax.DID // the repository, for the record's own URI
	sortKey string     // cached: the record's sortKey
	parent  *Item      // while building (Tree.Parent afterwards)
	pkey    string     // parent's record key when the parent field names a node of this repo
	pwhy    string     // why the parent field cannot hang here ("" if it can)
	// the validation problem, once Invalid ran ("" if valid): one pointer
	// where a sync.Once, a flag and the string took 32 bytes (an item is
	// 200 bytes, not 216; one a bullet)
	problem atomic.Pointer[string]
	Mirror  bool
	mark    uint8 // cycle detection state while building
	parsed  bool  // pkey and pwhy are set
}

// parentKey reads a parent field: the record key of a node of this
// repository, or why it cannot be one.
func (t *Tree) parentKey(p string) (key, why string) {
	if p == "" {
		return "", ""
	}
	// the common case, without the URI parser's regular expressions (a
	// third of building a 250,000-record tree): this repository's node
	// collection and a record key of the record-key alphabet
	if rest, ok := strings.CutPrefix(p, "at://"); ok {
		if rest, ok := strings.CutPrefix(rest, t.DID.String()); ok {
			if k, ok := strings.CutPrefix(rest, "/"+lexicon.Node+"/"); ok && plainKey(k) {
				return k, ""
			}
		}
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

// plainKey reports whether k is a record key (1–512 characters of
// A–Z a–z 0–9 . - _ : ~, not "." or "..").
func plainKey(k string) bool {
	if len(k) == 0 || len(k) > 512 || k == "." || k == ".." {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':' || c == '~') {
			return false
		}
	}
	return true
}

// item returns prev's item for the same record at the same CID, or nil.
func (t *Tree) item(r store.Record) *Item {
	if t == nil || r.CID == "" {
		return nil
	}
	m := &t.Nodes
	if r.Collection == lexicon.Mirror {
		m = &t.Mirrors
	}
	if old := m.Get(r.RKey); old != nil && old.Rec.CID == r.CID {
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
	if p := it.problem.Load(); p != nil {
		return *p
	}
	// two callers at once may both validate: the same answer, kept once
	problem := ""
	u := syntax.ATURI("at://" + it.did.String() + "/" + it.Rec.Collection + "/" + it.Rec.RKey)
	if err := validate.Default().Data(it.Rec.Value.Map(), it.Rec.Collection, &u); err != nil {
		problem = err.Error()
	}
	it.problem.CompareAndSwap(nil, &problem)
	return *it.problem.Load()
}

// carry gives it the validation result p of an earlier item of the same
// record at the same CID.
func (it *Item) carry(p string) { it.problem.CompareAndSwap(nil, &p) }

// checked reports whether Invalid already ran (its result can be reused).
func (it *Item) checked() (string, bool) {
	if p := it.problem.Load(); p != nil {
		return *p, true
	}
	return "", false
}

// Key is the item's record key.
func (it *Item) Key() string { return it.Rec.RKey }

// SortKey of the item.
func (it *Item) SortKey() string { return it.sortKey }

// Str returns a string field of the record.
func (it *Item) Str(f string) string { s, _ := it.Rec.Value.Text(f); return s }

// Tree is the forest of one snapshot. A tree is never modified once built:
// the tree of the next commit (Next) shares every item that did not change,
// so items know their parent by record key (Tree.Parent), not by pointer.
type Tree struct {
	DID      syntax.DID
	Commit   string
	Rev      string
	Roots    []*Item
	Nodes    Map[*Item] // by record key
	Mirrors  Map[*Item]
	Notes    Map[store.Record]
	Policies Map[store.Record]
	Outlines Map[store.Record]
	Comments []store.Record    // by record key
	Others   Map[store.Record] // other app.bulleted collections, by "collection/rkey"
	Detached []*Item
	Count    int // all app.bulleted records
}

// Parent is the node it hangs under (nil at the top level or when detached).
func (t *Tree) Parent(it *Item) *Item {
	if it.Detached != "" || it.pkey == "" {
		return nil
	}
	return t.Nodes.Get(it.pkey)
}

// ParentKey is the record key of the node it hangs under ("" at the top
// level or when detached).
func (it *Item) ParentKey() string {
	if it.Detached != "" {
		return ""
	}
	return it.pkey
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
// new and changed records are validated again. It reads every record: after
// a commit whose changes are known, Next costs only what changed.
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
	t := &Tree{DID: s.DID, Commit: s.Commit, Rev: s.Rev, Count: len(s.Records)}
	nodes, mirrors := make(map[string]*Item, nNodes), make(map[string]*Item, nMirrors)
	notes, policies, outlines, others := make(map[string]store.Record, nNotes), map[string]store.Record{}, map[string]store.Record{}, map[string]store.Record{}
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
					it.carry(p)
				}
				it.pkey, it.pwhy, it.parsed = old.pkey, old.pwhy, old.parsed
			} else {
				it.sortKey, _ = r.Value.Text("sortKey")
			}
			if it.Mirror {
				mirrors[r.RKey] = it
			} else {
				nodes[r.RKey] = it
			}
			items = append(items, it)
		case lexicon.Note:
			notes[r.RKey] = r
		case lexicon.CommentPolicy:
			policies[r.RKey] = r
		case lexicon.Outline:
			outlines[r.RKey] = r
		case lexicon.Comment:
			t.Comments = append(t.Comments, r)
		default:
			others[r.Collection+"/"+r.RKey] = r
		}
	}
	if !slices.IsSortedFunc(t.Comments, byKey) {
		slices.SortFunc(t.Comments, byKey)
	}
	kept := make([]store.Record, 0, len(notes))
	for rk, n := range notes {
		if it := nodes[rk]; it != nil {
			kept = append(kept, n)
			it.Note = &kept[len(kept)-1]
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
			if par := nodes[it.pkey]; par != nil {
				it.parent = par
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
		for p := it; p != nil; p = p.parent {
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
				p.Detached = cycleReason
			}
		}
	}
	for _, it := range items {
		if it.Detached != "" {
			it.parent = nil
			t.Detached = append(t.Detached, it)
			continue
		}
		if it.parent == nil {
			t.Roots = append(t.Roots, it)
		} else {
			it.parent.Children = append(it.parent.Children, it)
		}
	}
	sortItems(t.Roots)
	for _, it := range items {
		it.parent = nil
		sortItems(it.Children)
	}
	sortItems(t.Detached)
	t.Nodes, t.Mirrors = mapOf(nodes), mapOf(mirrors)
	t.Notes, t.Policies, t.Outlines, t.Others = mapOf(notes), mapOf(policies), mapOf(outlines), mapOf(others)
	return t
}

// cycleReason is the Detached reason of items in, or hanging below, a
// parent cycle.
const cycleReason = "part of a parent cycle"

func byKey(a, b store.Record) int { return strings.Compare(a.RKey, b.RKey) }

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
func (t *Tree) IsAncestor(a, b *Item) bool {
	for p := b; p != nil; p = t.Parent(p) {
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
			if it := t.Nodes.Get(u.RecordKey().String()); it != nil {
				return it, nil
			}
		case lexicon.Mirror:
			if it := t.Mirrors.Get(u.RecordKey().String()); it != nil {
				return it, nil
			}
		default:
			return nil, fail(ErrInvalidInput, "", "%s is not a node or mirror", ref)
		}
		ref = u.RecordKey().String()
	} else if it := t.Nodes.Get(ref); it != nil {
		return it, nil
	} else if it := t.Mirrors.Get(ref); it != nil {
		return it, nil
	}
	if !strings.HasPrefix(ref, "at://") {
		// an agent passed the bullet's text: say which bullets have it
		var keys []string
		for _, it := range t.Nodes.All() {
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

// Record returns the record at coll/rkey in the tree.
func (t *Tree) Record(coll, rkey string) (store.Record, bool) {
	switch coll {
	case lexicon.Node, lexicon.Mirror:
		m := &t.Nodes
		if coll == lexicon.Mirror {
			m = &t.Mirrors
		}
		if it := m.Get(rkey); it != nil {
			return it.Rec, true
		}
		return store.Record{}, false
	case lexicon.Note:
		return t.Notes.Lookup(rkey)
	case lexicon.CommentPolicy:
		return t.Policies.Lookup(rkey)
	case lexicon.Outline:
		return t.Outlines.Lookup(rkey)
	case lexicon.Comment:
		if i, ok := slices.BinarySearchFunc(t.Comments, rkey, func(r store.Record, k string) int { return strings.Compare(r.RKey, k) }); ok {
			return t.Comments[i], true
		}
		return store.Record{}, false
	}
	return t.Others.Lookup(coll + "/" + rkey)
}

// Records returns every record of the tree in (collection, record key)
// order: the snapshot it stands for.
func (t *Tree) Records() []store.Record {
	out := make([]store.Record, 0, t.Count)
	for _, it := range t.Nodes.All() {
		out = append(out, it.Rec)
	}
	for _, it := range t.Mirrors.All() {
		out = append(out, it.Rec)
	}
	for _, m := range []*Map[store.Record]{&t.Notes, &t.Policies, &t.Outlines, &t.Others} {
		for _, r := range m.All() {
			out = append(out, r)
		}
	}
	out = append(out, t.Comments...)
	slices.SortFunc(out, store.CompareRecords)
	return out
}

// Snapshot is the tree's records as a snapshot.
func (t *Tree) Snapshot() *store.Snapshot {
	return &store.Snapshot{DID: t.DID, Commit: t.Commit, Rev: t.Rev, Records: t.Records()}
}

// Describe is a canonical text of the tree's structure and records (every
// item in order with its parent, record CID, note and detached reason, then
// the other records): two trees of the same records describe the same,
// however they were built.
func (t *Tree) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s count=%d nodes=%d mirrors=%d notes=%d\n", t.DID, t.Commit, t.Rev, t.Count, t.Nodes.Len(), t.Mirrors.Len(), t.Notes.Len())
	var walk func(items []*Item, depth int, parent string)
	walk = func(items []*Item, depth int, parent string) {
		for _, it := range items {
			note := ""
			if it.Note != nil {
				note = it.Note.RKey + "@" + it.Note.CID + fmt.Sprint(it.Note.Value.Get("text"))
			}
			fmt.Fprintf(&b, "%*s%s parent=%q tree-parent=%q cid=%s sk=%q note=%q detached=%q text=%q\n", depth*2, "", itemID(it), parent,
				t.Parent(it).keyOrEmpty(), it.Rec.CID, it.sortKey, note, it.Detached, it.Str("text"))
			walk(it.Children, depth+1, it.Key())
		}
	}
	walk(t.Roots, 0, "")
	b.WriteString("detached:\n")
	walk(t.Detached, 1, "")
	for _, r := range t.Records() {
		fmt.Fprintf(&b, "%s/%s %s\n", r.Collection, r.RKey, r.CID)
	}
	return b.String()
}

func (it *Item) keyOrEmpty() string {
	if it == nil {
		return ""
	}
	return it.Key()
}
