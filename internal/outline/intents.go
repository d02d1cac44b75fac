package outline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Position is where new or moved bullets go: after a sibling, or first/last
// under a parent. Parent "" keeps the default (top level for inserts, the
// current parent for moves); "top" is the top level.
type Position struct {
	Parent string
	After  string
	Where  string // "first" | "last" (default)
}

// NewNode is one bullet to insert, with its nested children. With Mirror
// (the at:// URI of a node) it is a mirror of that node instead (package
// markup reads them from an export): Text is then only what to create if
// the original is in this repository and does not exist (a plain bullet,
// said in the diagnostics); a mirror has no layout, note or children.
type NewNode struct {
	Text      string    `json:"text"`
	Layout    string    `json:"layout,omitempty"`
	Display   string    `json:"display,omitempty"`
	Completed bool      `json:"completed,omitempty"`
	Note      string    `json:"note,omitempty"`
	Mirror    string    `json:"mirror,omitempty"`
	Children  []NewNode `json:"children,omitempty"`
}

// target resolves a position to (parent item or nil, sibling list, index).
func (p *Planner) target(pos Position, current *Item, exclude map[*Item]bool) (*Item, []*Item, int, error) {
	t := p.t
	parent := current
	switch strings.TrimSpace(pos.Parent) {
	case "":
	case "top":
		parent = nil
	default:
		it, err := t.Resolve(pos.Parent)
		if err != nil {
			if e, ok := err.(*Error); ok && e.Kind == ErrNodeNotFound {
				return nil, nil, 0, fail(ErrParentMissing, e.Next, "parent %s does not exist", pos.Parent)
			}
			return nil, nil, 0, err
		}
		if it.Mirror {
			return nil, nil, 0, fail(ErrInvalidInput, "use a node as parent, not a mirror", "%s is a mirror; bullets cannot hang under a mirror", it.Key())
		}
		if it.Detached != "" {
			p.note("parent %s is itself detached (%s)", it.Key(), it.Detached)
		}
		parent = it
	}
	sibs := t.ChildrenOf(parent)
	if len(exclude) > 0 {
		sibs = make([]*Item, 0, len(sibs))
		for _, s := range t.ChildrenOf(parent) {
			if !exclude[s] {
				sibs = append(sibs, s)
			}
		}
	}
	if pos.After != "" {
		if pos.Where != "" {
			return nil, nil, 0, fail(ErrInvalidInput, "pass either after or position", "after and position both given")
		}
		a, err := t.Resolve(pos.After)
		if err != nil {
			return nil, nil, 0, err
		}
		for i, s := range sibs {
			if s == a {
				return parent, sibs, i + 1, nil
			}
		}
		return nil, nil, 0, fail(ErrAnchorMissing, nextChildren(t, parent, sibs), "anchor %s is not a child of %s", a.Key(), parentName(parent))
	}
	switch pos.Where {
	case "", "last":
		return parent, sibs, len(sibs), nil
	case "first":
		return parent, sibs, 0, nil
	}
	return nil, nil, 0, fail(ErrInvalidInput, "use position first or last, or after=<sibling>", "unknown position %q", pos.Where)
}

// named is a bullet as results show it: its text (shortened) and key.
func named(it *Item) string {
	if it == nil {
		return "the top level"
	}
	txt := it.Str("text")
	if it.Mirror {
		txt = "mirror"
	}
	return fmt.Sprintf("%q (%s)", clip(txt, 40), it.Key())
}

func (p *Planner) named(parent *Item) string { return named(parent) }

func parentName(parent *Item) string {
	if parent == nil {
		return "the top level"
	}
	return parent.Key()
}

func nextChildren(t *Tree, parent *Item, sibs []*Item) string {
	if len(sibs) == 0 {
		return fmt.Sprintf("%s has no children; use position first or last", parentName(parent))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "its children are: ")
	for i, s := range sibs {
		if i == 8 {
			fmt.Fprintf(&b, "… (%d more)", len(sibs)-8)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %q", s.Key(), clip(s.Str("text"), 30))
	}
	if parent != nil {
		fmt.Fprintf(&b, "; call read_outline with node=%s to see them", parent.Key())
	}
	return b.String()
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// place chooses keys for n items at index at of sibs, adding updates for
// any renormalised siblings.
func (p *Planner) place(sibs []*Item, at, n int) ([]string, error) {
	keys := make([]string, len(sibs))
	newest, second := -1, -1
	for i, s := range sibs {
		keys[i] = s.SortKey()
		if newest < 0 || s.Key() > sibs[newest].Key() {
			second = newest
			newest = i
		} else if second < 0 || s.Key() > sibs[second].Key() {
			second = i
		}
	}
	bias := order.BiasFor(at, newest, second)
	// re-spacing prefers rewriting bullets this server wrote over other
	// clients' (rewriting theirs races their own edits)
	var own map[string]bool
	plan, err := order.PlaceOpt(keys, at, n, bias, order.Options{Foreign: func(i int) bool {
		if own == nil {
			own = p.e.ownKeys()
		}
		return !own[sibs[i].Key()]
	}})
	if err != nil {
		return nil, err
	}
	for _, r := range plan.Respace {
		s := sibs[r.Index]
		v := s.Rec.Value.Map()
		v["sortKey"] = r.Key
		p.update(s.Rec, v, "")
	}
	if len(plan.Respace) > 0 {
		p.note("respaced %d sibling sortKey(s) to make room (%d extra update(s))", len(plan.Respace), len(plan.Respace))
	}
	return plan.Keys, nil
}

func (p *Planner) parentURI(parent *Item) string {
	if parent == nil {
		return ""
	}
	return p.t.NodeURI(parent.Key())
}

// Insert plans new bullets (nested) at pos.
func (p *Planner) Insert(pos Position, nodes []NewNode) error {
	if len(nodes) == 0 {
		return fail(ErrInvalidInput, "pass text, or nodes: [{text: …}]", "nothing to insert")
	}
	if sh, err := p.sharedParent(pos); err != nil {
		return err
	} else if sh != nil {
		return p.insertShared(sh, pos, nodes)
	}
	parent, sibs, at, err := p.target(pos, nil, nil)
	if err != nil {
		return err
	}
	keys, err := p.place(sibs, at, len(nodes))
	if err != nil {
		return err
	}
	count, err := p.insertNodes(p.parentURI(parent), nodes, keys)
	if err != nil {
		return err
	}
	p.summary("insert %d bullet(s) under %s", count, p.named(parent))
	return nil
}

// insertNodes creates nodes (and their notes and children) under parentURI
// with the given sortKeys, returning how many bullets it created.
func (p *Planner) insertNodes(parentURI string, nodes []NewNode, keys []string) (int, error) {
	count := 0
	var foreign []string // mirrors of other repositories' bullets
	var walk func(parentURI string, ns []NewNode, keys []string, label string) error
	walk = func(parentURI string, ns []NewNode, keys []string, label string) error {
		for i, n := range ns {
			lab := fmt.Sprintf("%s[%d]", label, i)
			rk := p.newKey()
			count++
			if n.Mirror != "" {
				u, err := syntax.ParseATURI(n.Mirror)
				if err != nil || u.Collection().String() != lexicon.Node || u.RecordKey() == "" {
					return fail(ErrInvalidInput, "pass at://DID/app.bulleted.node/RKEY", "%s: mirror %q is not a node reference", lab, n.Mirror)
				}
				if len(n.Children) > 0 || n.Note != "" || n.Layout != "" || n.Display != "" || n.Completed {
					return fail(ErrInvalidInput, "give a mirror only its original", "%s: a mirror has no children, note, layout, display or completion", lab)
				}
				same := u.Authority().String() == p.t.DID.String()
				if !same || p.t.Nodes.Get(u.RecordKey().String()) != nil {
					if !same {
						foreign = append(foreign, u.String())
					}
					v := map[string]any{"$type": lexicon.Mirror, "original": u.String(), "sortKey": keys[i], "createdAt": p.stamp()}
					if parentURI != "" {
						v["parent"] = parentURI
					}
					p.create(lexicon.Mirror, rk, v, lab)
					p.touch(rk)
					continue
				}
				p.note("%s: the original %s of a mirror does not exist in this repository; created a plain bullet with the mirror's text %q instead", lab, u, clip(n.Text, 40))
			}
			v := map[string]any{"$type": lexicon.Node, "text": n.Text, "sortKey": keys[i], "createdAt": p.stamp()}
			if parentURI != "" {
				v["parent"] = parentURI
			}
			if n.Layout != "" {
				v["layout"] = n.Layout
			}
			if n.Display != "" {
				v["display"] = n.Display
			}
			if n.Completed {
				if n.Layout == "" {
					v["layout"] = "todo"
				} else if n.Layout != "todo" {
					p.note("%s: completed applies to todos; layout %s kept, completedAt set", lab, n.Layout)
				}
				v["completedAt"] = p.stamp()
			}
			p.facets(v, n.Text)
			p.create(lexicon.Node, rk, v, lab)
			p.touch(rk)
			if n.Note != "" {
				nv := map[string]any{"$type": lexicon.Note, "subject": p.t.NodeURI(rk), "text": n.Note, "createdAt": p.stamp()}
				p.facets(nv, n.Note)
				p.create(lexicon.Note, rk, nv, lab+".note")
			}
			if len(n.Children) > 0 {
				ck, err := order.Spread("", "", len(n.Children))
				if err != nil {
					return err
				}
				if err := walk(p.t.NodeURI(rk), n.Children, ck, lab+".children"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(parentURI, nodes, keys, "nodes"); err != nil {
		return 0, err
	}
	if len(foreign) > 0 {
		p.note("%d mirror(s) of bullets in other repositories created as given (first: %s); their originals were not checked here", len(foreign), foreign[0])
	}
	return count, nil
}

// Move plans moving refs (a run of siblings, kept in display order) to pos.
func (p *Planner) Move(refs []string, pos Position) error {
	if len(refs) == 0 {
		return fail(ErrInvalidInput, "pass node or nodes", "nothing to move")
	}
	var items []*Item
	set := map[*Item]bool{}
	for _, r := range refs {
		it, err := p.t.Resolve(r)
		if err != nil {
			return err
		}
		if set[it] {
			continue
		}
		set[it] = true
		items = append(items, it)
	}
	if err := p.guardContributions(items, pos); err != nil {
		return err
	}
	cur := p.t.Parent(items[0])
	for _, it := range items[1:] {
		if p.t.Parent(it) != cur || (it.Detached != "") != (items[0].Detached != "") {
			return fail(ErrInvalidInput, "move bullets with different parents in separate calls", "%s and %s are not siblings", items[0].Key(), it.Key())
		}
	}
	// display order
	sortItems(items)
	if pos.Parent == "" && items[0].Detached != "" {
		// a contribution to another identity's shared outline keeps its
		// parent there: a move without parent reorders it among the
		// bullets shown under that parent
		if sh, err := p.keptShared(items); err != nil {
			return err
		} else if sh != nil {
			return p.moveShared(sh, pos, items)
		}
		return fail(ErrParentMissing, "pass parent=<node> or parent=top to re-attach it", "%s is detached (%s)", items[0].Key(), items[0].Detached)
	}
	if sh, err := p.sharedParent(pos); err != nil {
		return err
	} else if sh != nil {
		return p.moveShared(sh, pos, items)
	}
	if pa, err := p.t.Resolve(pos.Parent); err == nil && pa.Mirror {
		// under a mirror of a bullet being moved (or of one inside it):
		// a cycle before it is a mirror
		if o := p.t.Nodes.Get(mirrorOriginal(p.t, pa)); o != nil {
			for _, it := range items {
				if p.t.IsAncestor(it, o) {
					return fail(ErrCycle, "choose a parent outside the moved bullet's subtree (and bullets cannot hang under a mirror)", "cannot move %s under mirror %s, which renders %s, inside %s's own subtree; nothing was written", it.Key(), pa.Key(), o.Key(), it.Key())
				}
			}
		}
	}
	parent, sibs, at, err := p.target(pos, cur, set)
	if err != nil {
		return err
	}
	for _, it := range items {
		if parent != nil && p.t.IsAncestor(it, parent) {
			return fail(ErrCycle, "choose a parent outside the moved bullet's subtree", "cannot move %s into its own subtree (under %s)", it.Key(), parent.Key())
		}
	}
	if parent == cur && items[0].Detached == "" && alreadyAt(p.t.ChildrenOf(cur), items, at) {
		p.note("already there: nothing to move")
		p.summary("move %s under %s", named(items[0]), p.named(parent))
		return nil
	}
	keys, err := p.place(sibs, at, len(items))
	if err != nil {
		return err
	}
	for i, it := range items {
		p.reparent(it, parent, keys[i], fmt.Sprintf("nodes[%d]", i))
		if it.Detached != "" {
			p.note("re-attached %s (was: %s)", it.Key(), it.Detached)
		}
	}
	if len(items) == 1 {
		p.summary("move %s under %s", named(items[0]), p.named(parent))
	} else {
		p.summary("move %d bullet(s) (%s, …) under %s", len(items), named(items[0]), p.named(parent))
	}
	return nil
}

// alreadyAt reports whether items stand, in order and together, at index
// at of the sibling list that excludes them (so a move there changes
// nothing).
func alreadyAt(all []*Item, items []*Item, at int) bool {
	for i, s := range all {
		if s == items[0] {
			if i != at || i+len(items) > len(all) {
				return false
			}
			for j, it := range items {
				if all[i+j] != it {
					return false
				}
			}
			return true
		}
	}
	return false
}

// reparent plans one update putting it under parent (nil: top) at sortKey,
// keeping every other field.
func (p *Planner) reparent(it, parent *Item, sortKey, label string) {
	v := it.Rec.Value.Map()
	v["sortKey"] = sortKey
	if parent == nil {
		delete(v, "parent")
	} else {
		v["parent"] = p.t.NodeURI(parent.Key())
	}
	p.update(it.Rec, v, label)
	p.touch(it.Key())
}

// Edit is an update of a bullet's own fields; nil fields are left alone.
type Edit struct {
	Text    *string
	Layout  *string
	Display *string
	Note    *string // "" removes the note
}

// Edit plans an edit of one node.
func (p *Planner) Edit(ref string, ed Edit) error {
	it, err := p.node(ref)
	if err != nil {
		return err
	}
	if ed.Text == nil && ed.Layout == nil && ed.Display == nil && ed.Note == nil {
		return fail(ErrInvalidInput, "pass text, layout, display or note", "nothing to change")
	}
	v := it.Rec.Value.Map()
	changed := false
	if ed.Text != nil {
		v["text"] = *ed.Text
		delete(v, "facets")
		p.facets(v, *ed.Text)
		changed = true
	}
	if setFields(v, map[string]*string{"layout": ed.Layout, "display": ed.Display}) {
		changed = true
	}
	if changed {
		p.update(it.Rec, v, "")
	}
	if ed.Note != nil {
		switch {
		case *ed.Note == "" && it.Note != nil:
			p.delete(*it.Note, "note")
		case *ed.Note == "":
			p.note("%s has no note to remove", it.Key())
		case it.Note != nil:
			nv := it.Note.Value.Map()
			nv["text"] = *ed.Note
			delete(nv, "facets")
			p.facets(nv, *ed.Note)
			p.update(*it.Note, nv, "note")
		default:
			nv := map[string]any{"$type": lexicon.Note, "subject": p.t.NodeURI(it.Key()), "text": *ed.Note, "createdAt": p.stamp()}
			p.facets(nv, *ed.Note)
			p.create(lexicon.Note, it.Key(), nv, "note")
		}
	}
	p.touch(it.Key())
	p.summary("update %s", named(it))
	return nil
}

func (p *Planner) node(ref string) (*Item, error) {
	it, err := p.t.Resolve(ref)
	if err != nil {
		return nil, err
	}
	if it.Mirror {
		return nil, fail(ErrInvalidInput, "edit the original in its own repository", "%s is a mirror, not a bullet", it.Key())
	}
	return it, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Delete plans deleting a bullet; children: refuse | lift | subtree.
func (p *Planner) DeleteNode(ref, children string) error {
	it, err := p.t.Resolve(ref)
	if err != nil {
		return err
	}
	kids := it.Children
	switch children {
	case "", "refuse":
		if len(kids) > 0 {
			return fail(ErrHasChildren, "pass children=lift to move them up into its place, or children=subtree to delete them too", "%s has %d child(ren); nothing cascades", it.Key(), len(kids))
		}
	case "lift":
		if len(kids) > 0 {
			parent := p.t.Parent(it)
			var sibs []*Item
			at := 0
			for _, s := range p.t.ChildrenOf(parent) {
				if s == it {
					at = len(sibs)
					continue
				}
				sibs = append(sibs, s)
			}
			keys, err := p.place(sibs, at, len(kids))
			if err != nil {
				return err
			}
			for i, k := range kids {
				p.reparent(k, parent, keys[i], "")
			}
		}
	case "subtree":
	default:
		return fail(ErrInvalidInput, "use refuse, lift or subtree", "unknown children policy %q", children)
	}
	gone := []*Item{it}
	if children == "subtree" {
		gone = Subtree(it)
	}
	// the records that name a deleted bullet as their root (its title, its
	// comment policy) go first, so no commit leaves one naming a bullet
	// that is gone (and undo re-creates the bullet before them)
	p.deleteRooted(gone)
	if children == "subtree" {
		// leaves first: every commit of a large delete leaves a whole
		// outline, never a bullet whose parent is gone
		sub := gone[1:]
		for i := len(sub) - 1; i >= 0; i-- {
			d := sub[i]
			p.delete(d.Rec, "")
			if d.Note != nil {
				p.delete(*d.Note, "")
			}
		}
	}
	p.delete(it.Rec, "")
	if it.Note != nil {
		p.delete(*it.Note, "")
	}
	p.danglingRefs(gone)
	p.summary("delete %s (children: %s)", named(it), orDefault(children, "refuse"))
	return nil
}

// SetPolicy plans a comment policy for the repo (root "") or a subtree.
func (p *Planner) SetPolicy(root string, allow []string, remove bool) error {
	rkey := "self"
	var rootURI string
	if root != "" {
		it, err := p.t.Resolve(root)
		if err != nil {
			if e, ok := err.(*Error); ok && e.Kind == ErrCrossRepo {
				return fail(ErrNotOwner, "a policy can only govern your own bullets", "%s is not your bullet", root)
			}
			return err
		}
		if it.Mirror {
			return fail(ErrNotOwner, "set the policy on a node you own", "%s is a mirror", it.Key())
		}
		rkey, rootURI = it.Key(), p.t.NodeURI(it.Key())
	}
	old, exists := p.t.Policies.Lookup(rkey)
	if remove {
		if !exists {
			return fail(ErrNodeNotFound, "", "no comment policy for %s", orDefault(root, "the repository"))
		}
		p.delete(old, "")
		p.summary("remove the comment policy of %s", orDefault(root, "the repository"))
		return nil
	}
	if allow == nil {
		allow = []string{}
	}
	for i, a := range allow {
		// the lexicon's allow list is an open set, but this server does not
		// write a rule that grants nothing in this version
		if !slices.Contains(lexicon.AllowRules, a) {
			return fail(ErrInvalidInput, `use ["mentioned"], or [] to close comments`, "allow[%d]: unknown rule %q grants nothing; the defined rule is \"mentioned\"", i, a)
		}
	}
	list := make([]any, len(allow))
	for i, a := range allow {
		list[i] = a
	}
	if exists {
		v := old.Value.Map()
		v["allow"] = list
		p.update(old, v, "")
	} else {
		v := map[string]any{"$type": lexicon.CommentPolicy, "allow": list, "createdAt": p.stamp()}
		if rootURI != "" {
			v["root"] = rootURI
		}
		p.create(lexicon.CommentPolicy, rkey, v, "")
	}
	if len(allow) == 0 {
		p.note("an empty allow list closes comments at this level")
	}
	p.summary("set the comment policy of %s to %v", orDefault(root, "the repository"), allow)
	return nil
}

// Mirror plans a mirror of original (any identity's node) at pos.
func (p *Planner) Mirror(original string, pos Position) error {
	u, err := syntax.ParseATURI(original)
	if err != nil || u.Collection().String() != lexicon.Node || u.RecordKey() == "" {
		if !strings.HasPrefix(original, "at://") {
			if it, err2 := p.t.Resolve(original); err2 == nil && !it.Mirror {
				u, _ = syntax.ParseATURI(p.t.NodeURI(it.Key()))
				err = nil
			}
		}
		if err != nil || u.Collection().String() != lexicon.Node {
			return fail(ErrInvalidInput, "pass at://DID/app.bulleted.node/RKEY or a record key of your own", "%q is not a node reference", original)
		}
	}
	parent, sibs, at, err := p.target(pos, nil, nil)
	if err != nil {
		return err
	}
	if u.Authority().String() == p.t.DID.String() {
		orig := p.t.Nodes.Get(u.RecordKey().String())
		if orig == nil {
			return fail(ErrNodeNotFound, "", "original %s does not exist", u.RecordKey())
		}
		if parent != nil && p.t.IsAncestor(orig, parent) {
			return fail(ErrCycle, "mirror it somewhere outside its own subtree", "mirroring %s under its own descendant %s would render forever", orig.Key(), parent.Key())
		}
	}
	keys, err := p.place(sibs, at, 1)
	if err != nil {
		return err
	}
	rk := p.newKey()
	v := map[string]any{"$type": lexicon.Mirror, "original": u.String(), "sortKey": keys[0], "createdAt": p.stamp()}
	if parent != nil {
		v["parent"] = p.t.NodeURI(parent.Key())
	}
	p.create(lexicon.Mirror, rk, v, "")
	p.touch(rk)
	p.summary("mirror %s under %s", u, p.named(parent))
	return nil
}

// SetOutline plans the title/description of the repo (root "") or a subtree.
func (p *Planner) SetOutline(root string, title, description *string) error {
	rkey := "self"
	var rootURI string
	if root != "" {
		it, err := p.node(root)
		if err != nil {
			return err
		}
		rkey, rootURI = it.Key(), p.t.NodeURI(it.Key())
	}
	old, exists := p.t.Outlines.Lookup(rkey)
	if title == nil && description == nil {
		p.summary("set the outline title/description of %s", orDefault(root, "the repository"))
		p.note("no title or description given")
		return nil
	}
	var v map[string]any
	if exists {
		v = old.Value.Map()
	} else {
		v = map[string]any{"$type": lexicon.Outline, "createdAt": p.stamp()}
		if rootURI != "" {
			v["root"] = rootURI
		}
	}
	setFields(v, map[string]*string{"title": title, "description": description})
	if exists {
		p.update(old, v, "")
	} else {
		p.create(lexicon.Outline, rkey, v, "")
	}
	p.summary("set the outline title/description of %s", orDefault(root, "the repository"))
	return nil
}

// setFields applies optional string fields to v: nil leaves a field as it
// is, "" removes it, anything else sets it. It reports whether any was given.
func setFields(v map[string]any, fields map[string]*string) bool {
	given := false
	for f, val := range fields {
		if val == nil {
			continue
		}
		given = true
		if *val == "" {
			delete(v, f)
		} else {
			v[f] = *val
		}
	}
	return given
}
