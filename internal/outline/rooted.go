package outline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// itemURI is the AT-URI of a node's or mirror's own record.
func (p *Planner) itemURI(it *Item) string { return p.t.uri(it.Rec.Collection, it.Key()) }

// deleteRooted plans deleting the app.bulleted.outline and
// app.bulleted.commentPolicy records whose root names one of the bullets
// in gone (whatever their record key), and a policy keyed by a deleted
// bullet's record key without a root (the older form), and says which.
func (p *Planner) deleteRooted(gone []*Item) {
	if p.t.Outlines.Len()+p.t.Policies.Len() == 0 {
		return // nothing can be rooted at them (and no URI of each is made)
	}
	uris := make(map[string]bool, len(gone))
	keys := make(map[string]bool, len(gone))
	for _, it := range gone {
		uris[p.itemURI(it)] = true
		if !it.Mirror {
			keys[it.Key()] = true
		}
	}
	var recs []store.Record
	for _, m := range []*Map[store.Record]{&p.t.Outlines, &p.t.Policies} {
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
		p.delete(r, "")
		name := shortColl(r.Collection) + " " + r.RKey
		if t, _ := r.Value.Text("title"); t != "" {
			name += fmt.Sprintf(" (title %q)", clip(t, 40))
		}
		if root, _ := r.Value.Text("root"); root != "" {
			name += " rooted at " + root
		}
		names = append(names, name)
	}
	if len(names) > 0 {
		p.note("deleted with it (their root is a deleted bullet; undo restores them): %s", strings.Join(names, "; "))
	}
}

// danglingRefs says which records of this repository that stay name a
// deleted bullet: mirrors of it, comments on it, and records of other
// collections naming it. They are left as they are.
func (p *Planner) danglingRefs(gone []*Item) {
	if p.t.Mirrors.Len()+len(p.t.Comments)+p.t.Others.Len() == 0 {
		return
	}
	// the gone items by collection and key: a URI is read against them
	// rather than each item's URI made (10,000 strings for a big delete)
	inGone := map[string]map[string]bool{lexicon.Node: make(map[string]bool, len(gone)), lexicon.Mirror: {}}
	for _, it := range gone {
		inGone[it.Rec.Collection][it.Key()] = true
	}
	prefix := "at://" + p.t.DID.String() + "/"
	uris := func(s string) bool { // s is the URI of a gone item
		rest, ok := strings.CutPrefix(s, prefix)
		if !ok {
			return false
		}
		coll, key, _ := strings.Cut(rest, "/")
		return inGone[coll][key]
	}
	var mirrors, comments, others []string
	for k, m := range p.t.Mirrors.All() {
		if !inGone[lexicon.Mirror][m.Key()] && uris(m.Str("original")) {
			mirrors = append(mirrors, k)
		}
	}
	for _, c := range p.t.Comments {
		if s, _ := c.Value.Text("subject"); uris(s) {
			comments = append(comments, c.RKey)
		}
	}
	for k, r := range p.t.Others.All() {
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
		p.note("left in place, now naming a deleted bullet: %s %s", what, strings.Join(list, ", "))
	}
	say(mirrors, shortColl(lexicon.Mirror)+" record(s) (they will show a missing original; delete them with delete_node)")
	say(comments, shortColl(lexicon.Comment)+" record(s)")
	say(others, "record(s)")
}
