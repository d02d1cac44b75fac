package outline

import (
	"maps"
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
	return t.nextWith(commit, rev, changes, nil)
}

// nextWith is Next given the item of t each change replaces, where known
// (olds[i] for changes[i], nil: look it up).
func (t *Tree) nextWith(commit, rev string, changes []store.Record, olds []*Item) *Tree {
	nexts.Add(1)
	if nt := t.next(commit, rev, changes, olds); nt != nil {
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
			// as a read of the commit will decode it: the planned value's
			// Go types (facets as typed slices, ints) are not what the
			// lexicon validation of the tree expects
			r.Value = store.PlannedValue(w.Value)
		}
		out = append(out, r)
	}
	return out
}

// fullBuilds counts the commits Next could not follow, nexts the calls
// (tests).
var fullBuilds, nexts atomic.Int64

// applyChanges returns recs (sorted) with changes applied.
func applyChanges(recs []store.Record, changes []store.Record) []store.Record {
	for _, c := range changes {
		i, found := slices.BinarySearchFunc(recs, c, store.CompareRecords)
		switch {
		case c.Value.IsZero() && found:
			recs = slices.Delete(recs, i, i+1)
		case c.Value.IsZero():
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

// iid names a node or a mirror in next's maps (itemID without building
// a string).
type iid struct {
	mirror bool
	key    string
}

func idOf(it *Item) iid { return iid{it.Mirror, it.Rec.RKey} }

// nodeID is the iid of node key.
func nodeID(key string) iid { return iid{false, key} }

// containerOf is the sibling list it is in.
func containerOf(it *Item) string {
	switch {
	case it.Detached != "":
		return detachedList
	case it.pkey() == "":
		return topLevel
	}
	return it.pkey()
}

// siblingEdit is what happens to one sibling list.
type siblingEdit struct {
	remove map[iid]bool // items leaving (or replaced in) the list
	add    []*Item      // items joining it (or their new versions)
}

// nextState is one commit being applied to a tree by next: the tree
// before it, and what the commit changes, gathered part by part.
type nextState struct {
	t    *Tree
	repl map[iid]*Item // new versions (nil: deleted)
	// prev is the item before the commit of each ID in repl that had one:
	// looked up once (a search by halves in the nodes' base) rather than
	// again by every step
	prev map[iid]*Item
	// changed is repl as a list, in the order set (walked without the
	// maps' lookups)
	changed []change
	// leaving counts the items that leave the sibling list of a node the
	// commit deletes (a list that goes with its node is not rebuilt); gone
	// are the nodes deleted
	leaving   map[string]int
	gone      []*Item
	noteCh    map[string]slot[store.Record]
	policyCh  map[string]slot[store.Record]
	outlineCh map[string]slot[store.Record]
	otherCh   map[string]slot[store.Record]
	comments  []store.Record // the new tree's comments
	commentCh bool           // comments is already a copy of t.Comments
	created   []string       // node keys created
	notes     Map[store.Record]
	edits     map[string]*siblingEdit // by container
	work      []string                // containers whose parent still needs a new version
	// preview: the commit is t's own (a plan's writes shown before they
	// are sent, or a batch's next step planned): the tree is looked at and
	// dropped, so its maps keep a large change beside their base rather
	// than making a new one (overlay)
	preview bool
}

// next is Next without the fallback: nil when it cannot tell.
func (t *Tree) next(commit, rev string, changes []store.Record, olds []*Item) *Tree {
	s := &nextState{t: t, repl: make(map[iid]*Item, len(changes)), prev: make(map[iid]*Item, len(changes)), changed: make([]change, 0, len(changes)), leaving: map[string]int{}, comments: t.Comments, edits: map[string]*siblingEdit{},
		noteCh: map[string]slot[store.Record]{}, policyCh: map[string]slot[store.Record]{},
		outlineCh: map[string]slot[store.Record]{}, otherCh: map[string]slot[store.Record]{}}
	if len(olds) != len(changes) {
		olds = nil
	}
	if !s.classify(changes, olds) || !s.noteVersions() {
		return nil
	}
	s.preview = commit == t.Commit && rev == t.Rev
	s.notes = s.noteMap()
	s.place()
	if s.reattaches() || s.makesCycle() {
		return nil
	}
	s.siblingEdits()
	nt := &Tree{DID: t.DID, Commit: commit, Rev: rev, Roots: t.Roots, Detached: t.Detached, Comments: s.comments, Notes: s.notes}
	if !s.relist(nt) || s.leavesChildren() {
		return nil
	}
	s.indexes(nt)
	return nt
}

// old is the item of that ID in the tree before the commit, or nil: for
// an ID in repl, the one found when it was put there.
func (s *nextState) old(id iid) *Item {
	if o, ok := s.prev[id]; ok {
		return o
	}
	if _, ok := s.repl[id]; ok {
		return nil
	}
	if id.mirror {
		return s.t.Mirrors.Get(id.key)
	}
	return s.t.Nodes.Get(id.key)
}

// change is one entry of repl: an item's new version (nil: deleted) and
// the one it replaces (nil: none).
type change struct {
	id    iid
	it, o *Item
}

// replace sets the new version of an item (nil: deleted) and the one it
// replaces (nil: none); an item is replaced once.
func (s *nextState) replace(id iid, it, o *Item) {
	s.repl[id] = it
	if o != nil {
		s.prev[id] = o
	}
	s.changed = append(s.changed, change{id, it, o})
}

// deleted tells whether the commit deletes node key (a node there before).
func (s *nextState) deleted(key string) bool {
	it, ok := s.repl[nodeID(key)]
	return ok && it == nil
}

// finalNode is the node of that key after the commit, or nil.
func (s *nextState) finalNode(key string) *Item {
	if it, ok := s.repl[nodeID(key)]; ok {
		return it
	}
	return s.t.Nodes.Get(key)
}

// classify takes the last change of each record, by collection: nodes and
// mirrors become new versions (item), comments are applied to a copy of
// the list (comment), notes, policies, outlines and other collections are
// kept as changes to their maps. false: a change to an item in a parent
// cycle.
func (s *nextState) classify(changes []store.Record, olds []*Item) bool {
	type path struct{ coll, rkey string }
	var last map[path]int
	if olds == nil { // a plan's writes (olds known) are one per record
		last = make(map[path]int, len(changes))
		for i, c := range changes {
			last[path{c.Collection, c.RKey}] = i
		}
	}
	for i, c := range changes {
		if last != nil && last[path{c.Collection, c.RKey}] != i {
			continue
		}
		ch := slot[store.Record]{c, !c.Value.IsZero()}
		switch c.Collection {
		case lexicon.Node, lexicon.Mirror:
			var o *Item
			if olds != nil {
				o = olds[i]
			}
			if !s.item(c, o) {
				return false
			}
		case lexicon.Note:
			s.noteCh[c.RKey] = ch
		case lexicon.CommentPolicy:
			s.policyCh[c.RKey] = ch
		case lexicon.Outline:
			s.outlineCh[c.RKey] = ch
		case lexicon.Comment:
			s.comment(c)
		default:
			s.otherCh[c.Collection+"/"+c.RKey] = ch
		}
	}
	return true
}

// item makes the new version of a changed node or mirror (nil when
// deleted): its parent read, its children carried over, and its validation
// result too when the record (CID) is the same; o is the item it replaces
// when known (nil: looked up). false: the item was in a parent cycle.
func (s *nextState) item(c store.Record, o *Item) bool {
	id := iid{c.Collection == lexicon.Mirror, c.RKey}
	if o == nil || o.Rec.RKey != c.RKey || o.Mirror != (c.Collection == lexicon.Mirror) {
		o = s.old(id)
	}
	if o != nil && o.Detached == cycleReason {
		return false
	}
	if c.Value.IsZero() {
		if o != nil {
			s.replace(id, nil, o)
			if !o.Mirror {
				s.gone = append(s.gone, o)
			}
		}
		return true
	}
	it := &Item{Rec: c, Mirror: c.Collection == lexicon.Mirror}
	sk, _ := c.Value.Text("sortKey")
	it.sk = spanOf(c.Value, "", sk)
	p := it.Str("parent")
	key, why := s.t.parentKey(p)
	it.pk, it.pbad, it.parsed = spanOf(c.Value, p, key), why != "", true
	if o != nil {
		it.Children = o.Children
		if o.Rec.CID == c.CID && c.CID != "" {
			if p, ok := o.checked(); ok {
				it.carry(p)
			}
		}
	} else if !it.Mirror {
		s.created = append(s.created, c.RKey)
	}
	s.replace(id, it, o)
	return true
}

// comment applies a comment's change to the new tree's comment list (a
// copy, made at the first change).
func (s *nextState) comment(c store.Record) {
	if !s.commentCh {
		s.comments, s.commentCh = slices.Clone(s.comments), true
	}
	i, found := slices.BinarySearchFunc(s.comments, c.RKey, func(r store.Record, k string) int { return strings.Compare(r.RKey, k) })
	switch {
	case c.Value.IsZero() && found:
		s.comments = slices.Delete(s.comments, i, i+1)
	case c.Value.IsZero():
	case found:
		s.comments[i] = c
	default:
		s.comments = slices.Insert(s.comments, i, c)
	}
}

// noteVersions makes a new version of each node whose note changed (and
// that did not change itself), to carry its new note. false: such a node
// is in a parent cycle.
func (s *nextState) noteVersions() bool {
	for rk := range s.noteCh {
		id := nodeID(rk)
		if _, ok := s.repl[id]; ok {
			continue
		}
		if o := s.t.Nodes.Get(rk); o != nil {
			if o.Detached == cycleReason {
				return false
			}
			s.replace(id, o.clone(), o)
		}
	}
	return true
}

// place gives each new version its note (nodes) and says where it hangs:
// detached (with the reason) when its parent field is unusable or names a
// node that does not exist after the commit.
func (s *nextState) place() {
	for _, ch := range s.changed {
		it := ch.it
		if it == nil {
			continue
		}
		if !it.Mirror {
			if n, ok := s.notes.Lookup(it.Rec.RKey); ok {
				it.Note = &n
			} else {
				it.Note = nil
			}
		}
		if it.pbad {
			it.Detached = s.t.parentWhy(it)
		} else if it.pkey() != "" && s.finalNode(it.pkey()) == nil {
			it.Detached = "parent " + it.pkey() + " does not exist"
		} else {
			it.Detached = ""
		}
	}
}

// reattaches tells whether a created node is the missing parent of an
// unchanged detached item (which next does not follow).
func (s *nextState) reattaches() bool {
	if len(s.created) == 0 || s.t.Detached.Len() == 0 {
		return false
	}
	for d := range s.t.Detached.Items() {
		if !d.pbad && d.pkey() != "" && slices.Contains(s.created, d.pkey()) {
			if _, changed := s.repl[idOf(d)]; !changed {
				return true
			}
		}
	}
	return false
}

// makesCycle tells whether a new version's walk to the top meets a parent
// cycle (made by the commit, or an old one), or a parent that vanished.
func (s *nextState) makesCycle() bool {
	limit := s.t.Nodes.Len() + len(s.repl) + 1
	for _, ch := range s.changed {
		it := ch.it
		if it == nil || it.Detached != "" || it.pkey() == "" {
			continue
		}
		steps := 0
		for k := it.pkey(); k != ""; {
			p := s.finalNode(k)
			if p == nil || p == it || p.Detached == cycleReason || steps > limit {
				return true
			}
			if p.Detached != "" {
				break
			}
			k = p.pkey()
			steps++
		}
	}
	return false
}

// edit is the edit of sibling list c, made (and queued for its parent) at
// the first use.
func (s *nextState) edit(c string) *siblingEdit {
	e := s.edits[c]
	if e == nil {
		e = &siblingEdit{remove: map[iid]bool{}}
		s.edits[c] = e
		s.work = append(s.work, c)
	}
	return e
}

// siblingEdits: every changed item leaves its old sibling list and joins
// its new one; then the lists' parents change too (propagate). The list of
// a node the commit deletes is not edited: its items leaving are counted
// (leavesChildren checks that none stays).
func (s *nextState) siblingEdits() {
	lastC, lastGone := "", false // siblings come together: their list's answer kept
	for _, ch := range s.changed {
		id, it := ch.id, ch.it
		if o := ch.o; o != nil {
			c := containerOf(o)
			if c != lastC {
				lastC, lastGone = c, c != topLevel && c != detachedList && s.deleted(c)
			}
			if lastGone {
				s.leaving[c]++
			} else {
				s.edit(c).remove[id] = true
			}
		}
		if it != nil {
			c := containerOf(it)
			s.edit(c).add = append(s.edit(c).add, it)
		}
	}
	s.propagate()
}

// propagate: a sibling list that changes makes a new version of its
// parent, which is changed in its own list, up to the top.
func (s *nextState) propagate() {
	for len(s.work) > 0 {
		c := s.work[len(s.work)-1]
		s.work = s.work[:len(s.work)-1]
		if c == topLevel || c == detachedList {
			continue
		}
		id := nodeID(c)
		if _, ok := s.repl[id]; ok {
			continue // a new version already in its lists, or deleted (checked in relist)
		}
		o := s.t.Nodes.Get(c)
		if o == nil {
			continue // a parent created in this commit
		}
		nv := o.clone()
		s.replace(id, nv, o)
		e := s.edit(containerOf(o))
		e.remove[id] = true
		e.add = append(e.add, nv)
	}
}

// oldList is sibling list c before the commit.
func (s *nextState) oldList(c string) Kids {
	switch c {
	case topLevel:
		return s.t.Roots
	case detachedList:
		return s.t.Detached
	}
	if o := s.t.Nodes.Get(c); o != nil {
		return o.Children
	}
	return Kids{}
}

// relist makes each edited sibling list (the old one without the items
// leaving, merged with those joining, in sibling order) and sets it in nt
// or on its parent's new version. false: a node deleted while something
// still hangs under it.
func (s *nextState) relist(nt *Tree) bool {
	for c, e := range s.edits {
		base := s.oldList(c)
		sortItems(e.add)
		list := s.splice(base, e)
		switch c {
		case topLevel:
			nt.Roots = list
		case detachedList:
			nt.Detached = list
		default:
			p := s.repl[nodeID(c)]
			if p == nil {
				if list.Len() > 0 {
					return false
				}
				continue
			}
			p.Children = list
		}
	}
	return true
}

// splice is base without the items e removes, with those it adds (sorted)
// in sibling order. The items are found by binary search in base (a
// sibling list is in sibling order), and the list made shares base's
// chunks that no item leaves or joins (Kids.edit), so a long list costs
// the items touched and the chunks they are in, not a copy of the list;
// if an item leaving is not where the order says (a list out of order),
// every sibling is looked at instead.
func (s *nextState) splice(base Kids, e *siblingEdit) Kids {
	cut := make([]int, 0, len(e.remove))
	for id := range e.remove {
		o := s.old(id)
		if o == nil {
			return s.spliceAll(base, e)
		}
		i, _ := base.Search(o)
		if i >= base.Len() || base.At(i) != o {
			return s.spliceAll(base, e)
		}
		cut = append(cut, i)
	}
	slices.Sort(cut)
	at := make([]int, len(e.add))
	for j, it := range e.add {
		// after every sibling that sorts before it
		at[j], _ = base.Search(it)
	}
	return base.edit(cut, at, e.add)
}

// spliceAll is splice looking at every sibling.
func (s *nextState) spliceAll(base Kids, e *siblingEdit) Kids {
	list := make([]*Item, 0, base.Len()+len(e.add))
	for it := range base.Items() {
		if !e.remove[idOf(it)] {
			list = append(list, it)
		}
	}
	return KidsOf(mergeSorted(list, e.add))
}

// compareItems is sibling order (less) as a comparison.
func compareItems(a, b *Item) int {
	switch {
	case a == b:
		return 0
	case less(a, b):
		return -1
	case less(b, a):
		return 1
	}
	return 0
}

// leavesChildren tells whether a deleted node still has children (which
// would be detached): not all of its children leave its list.
func (s *nextState) leavesChildren() bool {
	for _, o := range s.gone {
		if o.Children.Len() > 0 && s.edits[o.Key()] == nil && s.leaving[o.Key()] < o.Children.Len() {
			return true
		}
	}
	return false
}

// indexes sets nt's maps (nodes and mirrors from the new versions; notes
// are set already; policies, outlines, other collections from their
// changes) and its record count.
func (s *nextState) indexes(nt *Tree) {
	nodeCh, mirrorCh := make(map[string]slot[*Item], len(s.repl)), map[string]slot[*Item]{}
	for _, ch := range s.changed {
		id, it := ch.id, ch.it
		if id.mirror {
			mirrorCh[id.key] = slot[*Item]{it, it != nil}
		} else {
			nodeCh[id.key] = slot[*Item]{it, it != nil}
		}
	}
	t := s.t
	nt.Nodes, nt.Mirrors = s.itemMap(&t.Nodes, nodeCh), s.itemMap(&t.Mirrors, mirrorCh)
	nt.Policies, nt.Outlines, nt.Others = t.Policies.with(s.policyCh), t.Outlines.with(s.outlineCh), t.Others.with(s.otherCh)
	nt.Count = nt.Nodes.Len() + nt.Mirrors.Len() + nt.Notes.Len() + nt.Policies.Len() + nt.Outlines.Len() + nt.Others.Len() + len(nt.Comments)
}

// itemMap is m (the nodes or the mirrors) with ch applied: as with does,
// or for a preview whose change with would make a new base of (a
// 10,000-bullet dry-run delete at 249,000 bullets: a pass over every
// item), an overlay, its size counted from the items before the commit
// (s.prev) rather than by looking each key up again.
func (s *nextState) itemMap(m *Map[*Item], ch map[string]slot[*Item]) Map[*Item] {
	if !s.preview || len(m.top)+len(ch) <= flattenAt(m.Len()) {
		return m.with(ch)
	}
	n := m.Len()
	for k, c := range ch {
		switch _, had := s.prev[iid{m == &s.t.Mirrors, k}]; {
		case had && !c.ok:
			n--
		case !had && c.ok:
			n++
		}
	}
	return m.overlay(ch, n)
}

// noteMap is the notes after the commit: as with makes it, or for a
// preview of many changes an overlay (as itemMap).
func (s *nextState) noteMap() Map[store.Record] {
	m := &s.t.Notes
	if !s.preview || len(m.top)+len(s.noteCh) <= flattenAt(m.Len()) {
		return m.with(s.noteCh)
	}
	n := m.Len()
	for k, c := range s.noteCh {
		switch _, had := m.Lookup(k); {
		case had && !c.ok:
			n--
		case !had && c.ok:
			n++
		}
	}
	return m.overlay(maps.Clone(s.noteCh), n)
}

// overlay is m with changes kept beside its base (n keys in all), however
// many: a version to look at and drop (with makes a new base past a share
// of the size, which only a version later ones are made from repays; the
// first with from this one makes it). It takes changes over (m's own
// changes since its base are added to it). A deletion of a key not in the
// base stays as a deleted slot, which reads as absent.
func (m *Map[V]) overlay(changes map[string]slot[V], n int) Map[V] {
	out := *m
	out.n = n
	for k, c := range m.top {
		if _, ok := changes[k]; !ok {
			changes[k] = c
		}
	}
	out.top = changes
	return out
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
		sk: it.sk, pk: it.pk, pbad: it.pbad, parsed: it.parsed}
	if p, ok := it.checked(); ok {
		c.carry(p)
	}
	return c
}
