package intent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Delete deletes a bullet. Children says what happens to its children:
// refuse (the default: a bullet with children is not deleted), lift (they
// take its place) or subtree (they go too).
type Delete struct {
	Node     string
	Children string
}

// Plan implements outline.Intent with the kit alone: no cascade; the
// bullet's note, and the outline records and comment policies rooted at
// what goes, go with it; what stays and names it is said.
func (d Delete) Plan(p *outline.Planner) error {
	t := p.Tree()
	it, err := t.Resolve(d.Node)
	if err != nil {
		return err
	}
	kids := it.Children
	switch d.Children {
	case "", "refuse":
		if kids.Len() > 0 {
			return outline.Fail(outline.ErrHasChildren, "pass children=lift to move them up into its place, or children=subtree to delete them too", "%s has %d child(ren); nothing cascades", it.Key(), kids.Len())
		}
	case "lift":
		if err := lift(p, t, it); err != nil {
			return err
		}
	case "subtree":
	default:
		return outline.Fail(outline.ErrInvalidInput, "use refuse, lift or subtree", "unknown children policy %q", d.Children)
	}
	gone := []*outline.Item{it}
	if d.Children == "subtree" {
		gone = outline.Subtree(it)
	}
	// the records that name a deleted bullet as their root (its title, its
	// comment policy) go first, so no commit leaves one naming a bullet
	// that is gone (and undo re-creates the bullet before them)
	deleteRooted(p, t, gone)
	if d.Children == "subtree" {
		// leaves first: every commit of a large delete leaves a whole
		// outline, never a bullet whose parent is gone
		sub := gone[1:]
		for i := len(sub) - 1; i >= 0; i-- {
			deleteItem(p, sub[i])
		}
	}
	deleteItem(p, it)
	danglingRefs(p, t, gone)
	p.Summary("delete %s (children: %s)", outline.Name(it), orDefault(d.Children, "refuse"))
	return nil
}

// lift moves it's children up into its place among its siblings.
func lift(p *outline.Planner, t *outline.Tree, it *outline.Item) error {
	if it.Children.Len() == 0 {
		return nil
	}
	parent := t.Parent(it)
	sibs := t.ChildrenOf(parent)
	at, ok := siblingIndex(sibs, it)
	if ok {
		sibs = sibs.Delete(at, at+1)
	} else {
		at = 0 // detached: its children go first at the top level
	}
	keys, err := p.Place(sibs, at, it.Children.Len())
	if err != nil {
		return err
	}
	for i, k := range it.Children.All() {
		p.Reparent(k, parent, keys[i], "")
	}
	return nil
}

// deleteItem plans deleting a bullet or mirror and its note.
func deleteItem(p *outline.Planner, it *outline.Item) {
	p.Delete(it.Rec, "")
	if it.Note != nil {
		p.Delete(*it.Note, "")
	}
}

// itemURI is the AT-URI of a node's or mirror's own record.
func itemURI(t *outline.Tree, it *outline.Item) string {
	return "at://" + t.DID.String() + "/" + it.Rec.Collection + "/" + it.Key()
}

// deleteRooted plans deleting the app.bulleted.outline and
// app.bulleted.commentPolicy records whose root names one of the bullets
// in gone (whatever their record key), and a policy keyed by a deleted
// bullet's record key without a root (the older form), and says which.
func deleteRooted(p *outline.Planner, t *outline.Tree, gone []*outline.Item) {
	if t.Outlines.Len()+t.Policies.Len() == 0 {
		return // nothing can be rooted at them (and no URI of each is made)
	}
	uris := make(map[string]bool, len(gone))
	keys := make(map[string]bool, len(gone))
	for _, it := range gone {
		uris[itemURI(t, it)] = true
		if !it.Mirror {
			keys[it.Key()] = true
		}
	}
	var recs []store.Record
	for _, m := range []*outline.Map[store.Record]{&t.Outlines, &t.Policies} {
		for k, r := range m.All() {
			root, _ := r.Value.Text("root")
			if uris[root] || (root == "" && k != "self" && keys[k]) {
				recs = append(recs, r)
			}
		}
	}
	slices.SortFunc(recs, func(a, b store.Record) int {
		return strings.Compare(a.Collection+"/"+a.RKey, b.Collection+"/"+b.RKey)
	})
	var names []string
	for _, r := range recs {
		p.Delete(r, "")
		name := shortColl(r.Collection) + " " + r.RKey
		if title, _ := r.Value.Text("title"); title != "" {
			name += fmt.Sprintf(" (title %q)", clip(title, 40))
		}
		if root, _ := r.Value.Text("root"); root != "" {
			name += " rooted at " + root
		}
		names = append(names, name)
	}
	if len(names) > 0 {
		p.Note("deleted with it (their root is a deleted bullet; undo restores them): %s", strings.Join(names, "; "))
	}
}

// danglingRefs says which records of this repository that stay name a
// deleted bullet: mirrors of it, comments on it, and records of other
// collections naming it. They are left as they are.
func danglingRefs(p *outline.Planner, t *outline.Tree, gone []*outline.Item) {
	if t.Mirrors.Len()+len(t.Comments)+t.Others.Len() == 0 {
		return
	}
	// the gone items by collection and key: a URI is read against them
	// rather than each item's URI made (10,000 strings for a big delete)
	inGone := map[string]map[string]bool{lexicon.Node: make(map[string]bool, len(gone)), lexicon.Mirror: {}}
	for _, it := range gone {
		inGone[it.Rec.Collection][it.Key()] = true
	}
	prefix := "at://" + t.DID.String() + "/"
	uris := func(s string) bool { // s is the URI of a gone item
		rest, ok := strings.CutPrefix(s, prefix)
		if !ok {
			return false
		}
		coll, key, _ := strings.Cut(rest, "/")
		return inGone[coll][key]
	}
	var mirrors, comments, others []string
	for k, m := range t.Mirrors.All() {
		if !inGone[lexicon.Mirror][m.Key()] && uris(m.Str("original")) {
			mirrors = append(mirrors, k)
		}
	}
	for _, c := range t.Comments {
		if s, _ := c.Value.Text("subject"); uris(s) {
			comments = append(comments, c.RKey)
		}
	}
	for k, r := range t.Others.All() {
		for _, f := range []string{"root", "subject", "parent", "original"} {
			if s, _ := r.Value.Text(f); uris(s) {
				others = append(others, k)
				break
			}
		}
	}
	say := func(list []string, what string) {
		if len(list) == 0 {
			return
		}
		slices.Sort(list)
		if len(list) > 10 {
			list = append(list[:10], fmt.Sprintf("… (%d more)", len(list)-10))
		}
		p.Note("left in place, now naming a deleted bullet: %s %s", what, strings.Join(list, ", "))
	}
	say(mirrors, shortColl(lexicon.Mirror)+" record(s) (they will show a missing original; delete them with delete_node)")
	say(comments, shortColl(lexicon.Comment)+" record(s)")
	say(others, "record(s)")
}

func shortColl(coll string) string { return strings.TrimPrefix(coll, "app.bulleted.") }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
