package intent

import (
	"fmt"
	"slices"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Move moves Nodes (a run of siblings, kept in display order) to Pos. A
// bullet contributed to another identity's shared outline is only
// reordered there, or moved under another shared parent that admits it.
type Move struct {
	Nodes []string
	Pos   outline.Position
}

// Plan implements outline.Intent with the kit alone: cycles (also through
// a mirror of a moved bullet), contributions (CheckContributions,
// KeptShared, SharedKeys) and re-placement (Target, Place, Reparent).
func (m Move) Plan(p *outline.Planner) error {
	items, set, err := m.items(p)
	if err != nil {
		return err
	}
	t := p.Tree()
	if err := p.CheckContributions(items, m.Pos); err != nil {
		return err
	}
	cur := t.Parent(items[0])
	for _, it := range items[1:] {
		if t.Parent(it) != cur || (it.Detached != "") != (items[0].Detached != "") {
			return outline.Fail(outline.ErrInvalidInput, "move bullets with different parents in separate calls", "%s and %s are not siblings", items[0].Key(), it.Key())
		}
	}
	sortSiblings(items) // display order
	if m.Pos.Parent == "" && items[0].Detached != "" {
		// a contribution to another identity's shared outline keeps its
		// parent there: a move without parent reorders it among the
		// bullets shown under that parent
		if sh, err := p.KeptShared(items); err != nil {
			return err
		} else if sh != nil {
			return m.shared(p, sh, items)
		}
		return outline.Fail(outline.ErrParentMissing, "pass parent=<node> or parent=top to re-attach it", "%s is detached (%s)", items[0].Key(), items[0].Detached)
	}
	if sh, err := p.SharedParent(m.Pos); err != nil {
		return err
	} else if sh != nil {
		return m.shared(p, sh, items)
	}
	if err := m.underMirror(p, items); err != nil {
		return err
	}
	parent, sibs, at, err := p.Target(m.Pos, cur, set)
	if err != nil {
		return err
	}
	for _, it := range items {
		if parent != nil && t.IsAncestor(it, parent) {
			return outline.Fail(outline.ErrCycle, "choose a parent outside the moved bullet's subtree", "cannot move %s into its own subtree (under %s)", it.Key(), parent.Key())
		}
	}
	if parent == cur && items[0].Detached == "" && alreadyAt(t.ChildrenOf(cur), items, at) {
		p.Note("already there: nothing to move")
		p.Summary("move %s under %s", outline.Name(items[0]), outline.Name(parent))
		return nil
	}
	keys, err := p.Place(sibs, at, len(items))
	if err != nil {
		return err
	}
	for i, it := range items {
		p.Reparent(it, parent, keys[i], fmt.Sprintf("nodes[%d]", i))
		if it.Detached != "" {
			p.Note("re-attached %s (was: %s)", it.Key(), it.Detached)
		}
	}
	if len(items) == 1 {
		p.Summary("move %s under %s", outline.Name(items[0]), outline.Name(parent))
	} else {
		p.Summary("move %d bullet(s) (%s, …) under %s", len(items), outline.Name(items[0]), outline.Name(parent))
	}
	return nil
}

// items resolves the bullets to move, each once.
func (m Move) items(p *outline.Planner) ([]*outline.Item, map[*outline.Item]bool, error) {
	if len(m.Nodes) == 0 {
		return nil, nil, outline.Fail(outline.ErrInvalidInput, "pass node or nodes", "nothing to move")
	}
	t := p.Tree()
	var items []*outline.Item
	set := map[*outline.Item]bool{}
	for _, r := range m.Nodes {
		it, err := t.Resolve(r)
		if err != nil {
			return nil, nil, err
		}
		if set[it] {
			continue
		}
		set[it] = true
		items = append(items, it)
	}
	return items, set, nil
}

// underMirror refuses a move under a mirror of a bullet being moved (or of
// one inside it): a cycle before it is a mirror.
func (m Move) underMirror(p *outline.Planner, items []*outline.Item) error {
	t := p.Tree()
	pa, err := t.Resolve(m.Pos.Parent)
	if err != nil || !pa.Mirror {
		return nil // Target says what is wrong with the parent
	}
	o := p.Original(pa)
	if o == nil {
		return nil
	}
	for _, it := range items {
		if t.IsAncestor(it, o) {
			return outline.Fail(outline.ErrCycle, "choose a parent outside the moved bullet's subtree (and bullets cannot hang under a mirror)", "cannot move %s under mirror %s, which renders %s, inside %s's own subtree; nothing was written", it.Key(), pa.Key(), o.Key(), it.Key())
		}
	}
	return nil
}

// shared plans moving items, bullets of this repository, under a bullet of
// another identity's outline that admits this one: each becomes a
// contribution (its parent the owner's bullet), its subtree coming along;
// when all of them already are contributions there, they are reordered.
func (m Move) shared(p *outline.Planner, sh *outline.Shared, items []*outline.Item) error {
	skip := map[string]bool{}
	for _, it := range items {
		skip[p.NodeURI(it.Key())] = true
	}
	reorder := true // every item is already a contribution there
	for _, it := range items {
		reorder = reorder && it.Str("parent") == sh.Parent
	}
	if reorder {
		_, at, err := p.SharedSpot(sh, m.Pos, skip)
		if err != nil {
			return err
		}
		if sharedAlreadyAt(p, sh.Siblings, at, items) {
			p.Note("already there: nothing to move")
			p.Summary("move %s within %s", outline.Name(items[0]), sh.Parent)
			return nil
		}
	}
	keys, err := p.SharedKeys(sh, m.Pos, len(items), skip)
	if err != nil {
		return err
	}
	for i, it := range items {
		v := it.Rec.Value.Map()
		v["sortKey"] = keys[i]
		v["parent"] = sh.Parent // the same when reordered
		p.Update(it.Rec, v, fmt.Sprintf("nodes[%d]", i))
		p.Touch(it.Key())
	}
	u, err := syntax.ParseATURI(sh.Parent)
	switch {
	case reorder && err == nil:
		p.Summary("move %s within %s", outline.Name(items[0]), fmt.Sprintf("%s in %s's shared outline (your contribution, reordered among the bullets shown there; only its sortKey changed, in your repository: read it with read_outline repo=%s node=%s)", u.RecordKey(), u.Authority(), u.Authority(), u.RecordKey()))
	case reorder:
		p.Summary("move %s within %s", outline.Name(items[0]), sh.Parent)
	default:
		where := sh.Parent
		if err == nil {
			where = fmt.Sprintf("%s in %s's shared outline (now a contribution: read it in place with read_outline repo=%s node=%s)", u.RecordKey(), u.Authority(), u.Authority(), u.RecordKey())
		}
		if len(items) == 1 {
			p.Summary("move %s under %s", outline.Name(items[0]), where)
		} else {
			p.Summary("move %d bullet(s) (%s, …) under %s", len(items), outline.Name(items[0]), where)
		}
	}
	return nil
}

// alreadyAt reports whether items stand, in order and together, at index
// at of the sibling list that excludes them (so a move there changes
// nothing).
func alreadyAt(all outline.Kids, items []*outline.Item, at int) bool {
	i, ok := siblingIndex(all, items[0])
	if !ok || i != at || i+len(items) > all.Len() {
		return false
	}
	for j, it := range items {
		if all.At(i+j) != it {
			return false
		}
	}
	return true
}

// sharedAlreadyAt reports whether items stand, in order and together, at
// index at of the list of bullets shown under a shared parent that leaves
// them out, in the full list all: a move there changes nothing.
func sharedAlreadyAt(p *outline.Planner, all []outline.SharedSibling, at int, items []*outline.Item) bool {
	first := p.NodeURI(items[0].Key())
	i := slices.IndexFunc(all, func(s outline.SharedSibling) bool { return s.URI == first })
	if i < 0 || i != at || i+len(items) > len(all) {
		return false
	}
	for j, it := range items {
		if all[i+j].URI != p.NodeURI(it.Key()) {
			return false
		}
	}
	return true
}

// sortSiblings puts items in sibling order.
func sortSiblings(items []*outline.Item) { slices.SortFunc(items, compareSiblings) }

// compareSiblings is sibling order (the tree's: sortKey bytes, record key,
// a node before a mirror), as package order compares what is shown.
func compareSiblings(a, b *outline.Item) int {
	return order.CompareShown(a.SortKey(), a.Key(), a.Mirror, "", b.SortKey(), b.Key(), b.Mirror, "")
}

// siblingIndex finds it in sibs (a list in sibling order) by binary
// search.
func siblingIndex(sibs outline.Kids, it *outline.Item) (int, bool) {
	i, _ := sibs.SearchFunc(func(s *outline.Item) int { return compareSiblings(s, it) })
	if i < sibs.Len() && sibs.At(i) == it {
		return i, true
	}
	return 0, false
}
