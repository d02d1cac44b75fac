package outline

import (
	"fmt"
	"math"
	"slices"
	"sort"
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
	Children Kids // in sibling order; never modified once the tree is built
	Note     *store.Record
	Detached string // why the item does not hang in the tree ("" if it does)

	// cached, as where they lie in the record's value (vspan: 8 bytes where
	// a string header took 16): the record's sortKey, and the parent's
	// record key when the parent field names a node of this repo
	sk, pk vspan
	// the validation problem, once Invalid ran ("" if valid): one pointer
	// where a sync.Once, a flag and the string took 32 bytes
	problem atomic.Pointer[string]
	Mirror  bool
	mark    uint8 // cycle detection state while building
	parsed  bool  // pkey and pbad are set
	// the parent field cannot hang here (Tree.parentWhy says why: it is
	// read again from the record, rare, rather than kept in every item).
	// An item is 136 bytes (it was 216 with the reason, the repository's
	// DID and a parent pointer used only while building, 160 with its
	// sortKey and parent key as strings, 144 with its children a slice).
	pbad bool
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

// prevItems finds an earlier tree's items for a rebuild's records, which
// come in key order: a walk along prev's sorted lists beside them rather
// than a search by halves per record (a third of a rebuild at 249,000).
type prevItems struct {
	t      *Tree
	at     [2]int // next index in prev's mirrors' and nodes' sorted lists
	lastKy [2]string
}

func (p *prevItems) item(r store.Record) *Item {
	if p.t == nil || r.CID == "" {
		return nil
	}
	m, w := &p.t.Nodes, 1
	if r.Collection == lexicon.Mirror {
		m, w = &p.t.Mirrors, 0
	}
	if m.keyOf == nil || len(m.top) > 0 && hasKey(m.top, r.RKey) || r.RKey < p.lastKy[w] {
		return p.t.item(r) // changed since the base, or out of order
	}
	p.lastKy[w] = r.RKey
	list := m.sorted
	i := p.at[w]
	for i < len(list) && list[i].Rec.RKey < r.RKey {
		i++
	}
	p.at[w] = i
	if i < len(list) && list[i].Rec.RKey == r.RKey && list[i].Rec.CID == r.CID {
		return list[i]
	}
	return nil
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// Invalid returns the validation problem of its record ("" if it is valid).
// Invalid records are kept and flagged, never dropped. Validation runs on
// first use, so that reading a large repository validates what is shown
// and planned, not every record up front; a result is carried to the next
// tree while the record's CID is unchanged.
func (t *Tree) Invalid(it *Item) string {
	if p := it.problem.Load(); p != nil {
		return *p
	}
	// two callers at once may both validate: the same answer, kept once
	problem := ""
	u := syntax.ATURI(t.uri(it.Rec.Collection, it.Rec.RKey))
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
func (it *Item) SortKey() string {
	if s, ok := it.sk.in(it.Rec.Value); ok {
		return s
	}
	s, _ := it.Rec.Value.Text("sortKey")
	return s
}

// pkey is the parent's record key when the parent field names a node of
// this repository ("" otherwise, or before it was parsed).
func (it *Item) pkey() string {
	if s, ok := it.pk.in(it.Rec.Value); ok {
		return s
	}
	// not a part of the value (never so far): the key is the parent
	// field's last segment, as parentKey read it
	if !it.parsed || it.pbad {
		return ""
	}
	p := it.Str("parent")
	return p[strings.LastIndexByte(p, '/')+1:]
}

// vspan is a text an item caches as where it lies in its record's value
// (store.Value.Span); n is noSpan when it is not a part of it.
type vspan struct {
	off uint32
	n   uint16
}

const noSpan = math.MaxUint16

// spanOf is where sub lies in v: read in place from v, or, when it was
// read from another value, where the same text lies in within (a text of
// v that holds it, like the parent field holds the parent's key).
func spanOf(v store.Value, within, sub string) vspan {
	if len(sub) >= noSpan {
		return vspan{n: noSpan}
	}
	if off, ok := v.Span(sub); ok && uint64(off) <= math.MaxUint32 {
		return vspan{uint32(off), uint16(len(sub))}
	}
	if i := strings.LastIndex(within, sub); i >= 0 {
		if off, ok := v.Span(within); ok && uint64(off+i) <= math.MaxUint32 {
			return vspan{uint32(off + i), uint16(len(sub))}
		}
	}
	return vspan{n: noSpan}
}

// in is the text sp names in v.
// (A span that does not fit in v is not taken: never so far, as spans are
// kept only with the bytes they were found in.)
func (sp vspan) in(v store.Value) (string, bool) {
	if sp.n == noSpan || int(sp.off)+int(sp.n) > v.Len() {
		return "", false
	}
	return v.At(int(sp.off), int(sp.n)), true
}

// Str returns a string field of the record.
func (it *Item) Str(f string) string { s, _ := it.Rec.Value.Text(f); return s }

// Tree is the forest of one snapshot. A tree is never modified once built:
// the tree of the next commit (Next) shares every item that did not change,
// so items know their parent by record key (Tree.Parent), not by pointer.
type Tree struct {
	DID      syntax.DID
	Commit   string
	Rev      string
	Roots    Kids
	Nodes    Map[*Item] // by record key
	Mirrors  Map[*Item]
	Notes    Map[store.Record]
	Policies Map[store.Record]
	Outlines Map[store.Record]
	Comments []store.Record    // by record key
	Others   Map[store.Record] // other app.bulleted collections, by "collection/rkey"
	Detached Kids
	Count    int // all app.bulleted records
}

// Parent is the node it hangs under (nil at the top level or when detached).
func (t *Tree) Parent(it *Item) *Item {
	k := it.pkey()
	if it.Detached != "" || k == "" {
		return nil
	}
	return t.Nodes.Get(k)
}

// ParentKey is the record key of the node it hangs under ("" at the top
// level or when detached).
func (it *Item) ParentKey() string {
	if it.Detached != "" {
		return ""
	}
	return it.pkey()
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
	notes, policies, outlines, others := make(map[string]store.Record, nNotes), map[string]store.Record{}, map[string]store.Record{}, map[string]store.Record{}
	// one slab of items: the mirrors, then the nodes, each by record key
	// (as a repository lists them; sorted here otherwise), so that the
	// maps by key are lists of pointers into it (pmap.go) and an item's
	// place in the slab is its index while building
	slab := make([]Item, nNodes+nMirrors)
	mirrorSlab, nodeSlab := slab[:nMirrors:nMirrors], slab[nMirrors:]
	olds := &prevItems{t: prev}
	fill := func(it *Item, r store.Record) {
		it.Rec, it.Mirror = r, r.Collection == lexicon.Mirror
		if old := olds.item(r); old != nil && old.Rec.Value.Equal(r.Value) {
			// the same bytes (not only the same CID: a PDS's listRecords
			// names a CID it does not prove), so the same places in them
			// (Equal is one pointer comparison when they are shared)
			it.sk = old.sk
			if p, ok := old.checked(); ok {
				it.carry(p)
			}
			it.pk, it.pbad, it.parsed = old.pk, old.pbad, old.parsed
		} else {
			sk, _ := r.Value.Text("sortKey")
			it.sk = spanOf(r.Value, "", sk)
		}
	}
	nm, nn := 0, 0
	for _, r := range s.Records {
		switch r.Collection {
		case lexicon.Node:
			fill(&nodeSlab[nn], r)
			nn++
		case lexicon.Mirror:
			fill(&mirrorSlab[nm], r)
			nm++
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
	for _, part := range [][]Item{mirrorSlab, nodeSlab} {
		if sortedByKey(part) {
			continue
		}
		// not in key order (no repository lists them so): filled again
		recs := make([]store.Record, len(part))
		for i := range part {
			recs[i] = part[i].Rec
			part[i] = Item{}
		}
		slices.SortFunc(recs, byKey)
		for i, r := range recs {
			fill(&part[i], r)
		}
	}
	if !slices.IsSortedFunc(t.Comments, byKey) {
		slices.SortFunc(t.Comments, byKey)
	}
	// node finds a node's index in the slab (-1: there is none)
	node := func(k string) int {
		i := sort.Search(len(nodeSlab), func(i int) bool { return nodeSlab[i].Rec.RKey >= k })
		if i < len(nodeSlab) && nodeSlab[i].Rec.RKey == k {
			return nMirrors + i
		}
		return -1
	}
	kept := make([]store.Record, 0, len(notes))
	for rk, n := range notes {
		if i := node(rk); i >= 0 {
			kept = append(kept, n)
			slab[i].Note = &kept[len(kept)-1]
		}
	}
	// siblings share their parent: parse and find each distinct parent
	// once. up[i] is the index of item i's parent (-1: none) while building.
	type parsedParent struct {
		key string
		bad bool
		at  int
	}
	parents := map[string]parsedParent{}
	up := make([]int32, len(slab))
	for i := range slab {
		it := &slab[i]
		up[i] = -1
		p := it.Str("parent")
		pp, ok := parents[p]
		if !ok {
			if it.parsed {
				pp.key, pp.bad = it.pkey(), it.pbad
			} else {
				var why string
				pp.key, why = t.parentKey(p)
				pp.bad = why != ""
			}
			pp.at = -1
			if pp.key != "" && !pp.bad {
				pp.at = node(pp.key)
			}
			parents[p] = pp
		}
		it.pk, it.pbad, it.parsed = spanOf(it.Rec.Value, p, pp.key), pp.bad, true
		switch {
		case it.pbad:
			it.Detached = t.parentWhy(it)
		case pp.key == "":
		case pp.at >= 0:
			up[i] = int32(pp.at)
		default:
			it.Detached = "parent " + pp.key + " does not exist"
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
	var path []int32
	for i := range slab {
		path = path[:0]
		end := uint8(rooted)
		for p := int32(i); p >= 0; p = up[p] {
			if slab[p].mark == visiting {
				end = looping
				break
			}
			if slab[p].mark != 0 {
				end = slab[p].mark
				break
			}
			slab[p].mark = visiting
			path = append(path, p)
		}
		for _, p := range path {
			slab[p].mark = end
			if end == looping {
				slab[p].Detached = cycleReason
			}
		}
	}
	// the children lists: one array for all, each parent's part of it
	// sized first (counts, then where each part ends)
	ends := make([]int32, len(slab))
	var roots, detached []*Item
	for i := range slab {
		if slab[i].Detached == "" && up[i] >= 0 {
			ends[up[i]]++
		}
	}
	off := int32(0)
	for i, c := range ends {
		ends[i] = off // where the part starts, until it is filled
		off += c
	}
	all := make([]*Item, off)
	for i := range slab {
		it := &slab[i]
		switch {
		case it.Detached != "":
			detached = append(detached, it)
		case up[i] < 0:
			roots = append(roots, it)
		default:
			p := up[i]
			all[ends[p]] = it
			ends[p]++
		}
	}
	start := int32(0) // each part ends where the next starts
	for i := range slab {
		if ends[i] > start {
			part := all[start:ends[i]:ends[i]]
			sortItems(part)
			slab[i].Children = KidsOf(part)
			start = ends[i]
		}
	}
	sortItems(roots)
	sortItems(detached)
	t.Roots, t.Detached = KidsOf(roots), KidsOf(detached)
	t.Nodes, t.Mirrors = sortedMapOf(pointers(nodeSlab), itemKey), sortedMapOf(pointers(mirrorSlab), itemKey)
	t.Notes, t.Policies, t.Outlines, t.Others = mapOf(notes), mapOf(policies), mapOf(outlines), mapOf(others)
	return t
}

// parentWhy is why the parent field of it cannot hang here ("" if it can).
func (t *Tree) parentWhy(it *Item) string {
	_, why := t.parentKey(it.Str("parent"))
	return why
}

func itemKey(it *Item) string { return it.Rec.RKey }

// sortedByKey reports whether part is in record key order, each key once.
func sortedByKey(part []Item) bool {
	for i := 1; i < len(part); i++ {
		if part[i-1].Rec.RKey >= part[i].Rec.RKey {
			return false
		}
	}
	return true
}

// pointers are pointers to each item of slab, in its order.
func pointers(slab []Item) []*Item {
	out := make([]*Item, len(slab))
	for i := range slab {
		out[i] = &slab[i]
	}
	return out
}

// cycleReason is the Detached reason of items in, or hanging below, a
// parent cycle.
const cycleReason = "part of a parent cycle"

func byKey(a, b store.Record) int { return strings.Compare(a.RKey, b.RKey) }

func sortItems(xs []*Item) {
	slices.SortFunc(xs, func(a, b *Item) int {
		if c := strings.Compare(a.SortKey(), b.SortKey()); c != 0 {
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
func (t *Tree) ChildrenOf(parent *Item) Kids {
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
		out = out[i].Children.AppendTo(out)
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
		// an agent passed the bullet's text: say which bullets have it;
		// else the keys nearest the one passed (one pass over the tree)
		near, scan := t.oneEditKeys(ref)
		var keys []string
		for k, it := range t.Nodes.All() {
			if strings.EqualFold(strings.TrimSpace(it.Str("text")), ref) {
				keys = append(keys, it.Key())
			}
			if scan && twoEdits(ref, k) {
				near = append(near, k)
			}
		}
		if len(keys) > 0 {
			slices.Sort(keys)
			if len(keys) > 10 {
				keys = append(keys[:10], "…")
			}
			return nil, fail(ErrNodeNotFound, "pass one of those record keys", "no bullet with key '%s'; bullets whose text is '%s': %s", ref, ref, strings.Join(keys, ", "))
		}
		if scan {
			for k := range t.Mirrors.All() {
				if twoEdits(ref, k) {
					near = append(near, k)
				}
			}
		}
		if len(near) > 0 {
			slices.Sort(near)
			near = near[:min(len(near), maxNearKeys)]
			return nil, &Error{Kind: ErrNodeNotFound,
				Msg:  fmt.Sprintf("no bullet with record key %s in %s; the nearest existing keys: %s", ref, t.DID, strings.Join(near, ", ")),
				Next: "pass the nearest key if it is the bullet you meant (check with read_outline node=KEY), or call search to find it",
				Data: map[string]any{"nearest": near}}
		}
	}
	return nil, fail(ErrNodeNotFound, "call read_outline or search to see the bullets and their record keys", "no bullet with record key %s in %s", ref, t.DID)
}

// Nearest keys. A record key one or two characters off (a typo, a
// dropped or doubled character, two swapped) gets the existing keys
// nearest by edit distance (Levenshtein, at most maxNear edits; two
// neighbours swapped count as one), at most
// maxNearKeys of them: those one edit away, found by looking up every key
// one edit from ref (a few thousand lookups, whatever the tree's size);
// when there is none, those two edits away, found in the pass over the
// tree that looks for a bullet whose text was passed as its key, each key
// compared in a band of the edit table that stops as soon as the distance
// is over 2 (BenchmarkResolveMissing, 250,000 bullets: about 20 ms over
// that pass's 45 when two edits are looked for, nothing when one; on a
// path that is already an error).
const (
	maxNear     = 2
	maxNearKeys = 5
	maxBand     = 4 // editWithin's limit without allocating
	// nearAlphabet is what a record key is written in (TIDs use the
	// digits 2-7 and a-z; other keys any of these).
	nearAlphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_.:~"
)

// oneEditKeys are the existing keys one edit from ref, and whether the
// keys two edits away are still to be found (none is one edit away).
func (t *Tree) oneEditKeys(ref string) ([]string, bool) {
	if len(ref) > 512 {
		return nil, false
	}
	var one []string
	try := func(k string) {
		if k == ref || slices.Contains(one, k) {
			return
		}
		if _, ok := t.Nodes.Lookup(k); ok {
			one = append(one, k)
		} else if _, ok := t.Mirrors.Lookup(k); ok {
			one = append(one, k)
		}
	}
	for i := 0; i <= len(ref); i++ {
		if i < len(ref) {
			try(ref[:i] + ref[i+1:]) // a character dropped
			if i+1 < len(ref) {
				try(ref[:i] + string([]byte{ref[i+1], ref[i]}) + ref[i+2:]) // two swapped
			}
		}
		for j := 0; j < len(nearAlphabet); j++ {
			c := nearAlphabet[j : j+1]
			try(ref[:i] + c + ref[i:]) // one added
			if i < len(ref) && ref[i] != c[0] {
				try(ref[:i] + c + ref[i+1:]) // one changed
			}
		}
	}
	return one, len(one) == 0
}

// twoEdits reports whether k is exactly two edits from ref.
func twoEdits(ref, k string) bool {
	return len(k) >= len(ref)-maxNear && len(k) <= len(ref)+maxNear && editWithin(ref, k, maxNear) == maxNear
}

// editWithin is the Levenshtein distance of a and b (a swap of two
// neighbours counts 2), or limit+1 when it is over limit: the table is
// filled only within limit of its diagonal, and left as soon as a row is
// all over limit.
func editWithin(a, b string, limit int) int {
	if d := len(a) - len(b); d > limit || -d > limit {
		return limit + 1
	}
	const far = 1 << 20
	w := 2*limit + 1
	var rows [2][2*maxBand + 1]int
	prev, cur := rows[0][:], rows[1][:]
	if w > len(prev) {
		prev, cur = make([]int, w), make([]int, w)
	}
	prev, cur = prev[:w], cur[:w]
	// row i holds columns j = i-limit .. i+limit at index j-i+limit
	for x := range prev {
		j := x - limit
		prev[x] = far
		if j >= 0 && j <= len(b) {
			prev[x] = j
		}
	}
	for i := 1; i <= len(a); i++ {
		best := far
		for x := range cur {
			j := i + x - limit
			cur[x] = far
			if j < 0 || j > len(b) {
				continue
			}
			if j == 0 {
				cur[x] = i
			} else {
				sub := prev[x] // (i-1, j-1)
				if a[i-1] != b[j-1] {
					sub++
				}
				v := sub
				if x+1 < w && prev[x+1]+1 < v { // (i-1, j): drop a[i-1]
					v = prev[x+1] + 1
				}
				if x > 0 && cur[x-1]+1 < v { // (i, j-1): add b[j-1]
					v = cur[x-1] + 1
				}
				cur[x] = v
			}
			best = min(best, cur[x])
		}
		if best > limit {
			return limit + 1
		}
		prev, cur = cur, prev
	}
	x := len(b) - len(a) + limit
	if x < 0 || x >= w || prev[x] > limit {
		return limit + 1
	}
	return prev[x]
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
	var walk func(items Kids, depth int, parent string)
	walk = func(items Kids, depth int, parent string) {
		for _, it := range items.All() {
			note := ""
			if it.Note != nil {
				note = it.Note.RKey + "@" + it.Note.CID + fmt.Sprint(it.Note.Value.Get("text"))
			}
			fmt.Fprintf(&b, "%*s%s parent=%q tree-parent=%q cid=%s sk=%q note=%q detached=%q text=%q\n", depth*2, "", itemID(it), parent,
				t.Parent(it).keyOrEmpty(), it.Rec.CID, it.SortKey(), note, it.Detached, it.Str("text"))
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
