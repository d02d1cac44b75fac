package view

import (
	"slices"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// OutlineRef is the app.bulleted.outline record in effect at a level, as in
// app.bulleted.getOutline#outline.
type OutlineRef struct {
	URI          string   `json:"uri"`
	Title        string   `json:"title,omitempty"`
	Description  string   `json:"description,omitempty"`
	ImageAlt     string   `json:"imageAlt,omitempty"`
	Contributors []string `json:"contributors,omitempty"`
}

// outlineRecords maps the record key of each subtree root to its outline
// record; "" is the repository-wide `self` record.
func outlineRecords(t *outline.Tree) map[string]store.Record {
	out := map[string]store.Record{}
	for rk, r := range t.Outlines.All() {
		root, _ := r.Value["root"].(string)
		if root == "" {
			if rk == "self" {
				out[""] = r
			}
			continue
		}
		if u, err := syntax.ParseATURI(root); err == nil && u.Authority().String() == t.DID.String() {
			out[u.RecordKey().String()] = r
		}
	}
	return out
}

// OutlineAt returns the outline record in effect at it (nil: the top
// level): the nearest one whose root is it or an ancestor, else `self`.
func OutlineAt(t *outline.Tree, it *outline.Item) *OutlineRef {
	recs := outlineRecords(t)
	for p := it; p != nil; p = t.Parent(p) {
		if r, ok := recs[p.Key()]; ok {
			return ref(t, r)
		}
	}
	if r, ok := recs[""]; ok {
		return ref(t, r)
	}
	return nil
}

func ref(t *outline.Tree, r store.Record) *OutlineRef {
	o := &OutlineRef{URI: "at://" + t.DID.String() + "/" + lexicon.Outline + "/" + r.RKey}
	o.Title, _ = r.Value["title"].(string)
	o.Description, _ = r.Value["description"].(string)
	o.ImageAlt, _ = r.Value["imageAlt"].(string)
	o.Contributors, _ = contributorsOf(r)
	return o
}

// contributorsOf reads an outline record's contributors; ok is false when
// the field is absent (inherit from above).
func contributorsOf(r store.Record) ([]string, bool) {
	xs, ok := r.Value["contributors"].([]any)
	if !ok {
		return nil, false
	}
	out := []string{}
	for _, x := range xs {
		if m, ok := x.(map[string]any); ok {
			if d, ok := m["did"].(string); ok {
				out = append(out, d)
			}
		}
	}
	return out, true
}

// ContributorsAt returns the identities admitted at it (nil: the top
// level): the contributors of the nearest outline record at it or above
// that has the field (absent inherits from above; empty grants nobody),
// else of `self`.
func ContributorsAt(t *outline.Tree, it *outline.Item) []string {
	recs := outlineRecords(t)
	for p := it; p != nil; p = t.Parent(p) {
		if r, ok := recs[p.Key()]; ok {
			if c, ok := contributorsOf(r); ok {
				return c
			}
		}
	}
	if r, ok := recs[""]; ok {
		c, _ := contributorsOf(r)
		return c
	}
	return nil
}

// allContributors lists every identity named in any outline record of t.
func allContributors(t *outline.Tree) []string {
	var out []string
	for _, r := range t.Outlines.All() {
		c, _ := contributorsOf(r)
		for _, d := range c {
			if d != t.DID.String() && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Contribution is a contributor's bullet hanging under a bullet of the
// owner's outline.
type Contribution struct {
	Item *outline.Item
	Tree *outline.Tree // the contributor's repository
}

// Contributions are the contributors' bullets of one owner's outline, by
// the record key of the owner's bullet they hang under.
type Contributions map[string][]Contribution

// Contributed reports whether it, an item of tree c whose parent field
// names a bullet of owner's tree, is admitted there: the parent exists in
// the owner's outline and c's identity is among the contributors in effect
// at the parent.
func Contributed(owner *outline.Tree, c *outline.Tree, it *outline.Item) bool {
	p, err := syntax.ParseATURI(it.Str("parent"))
	if err != nil || p.Authority().String() != owner.DID.String() || p.Collection().String() != lexicon.Node {
		return false
	}
	par := owner.Nodes.Get(p.RecordKey().String())
	if par == nil {
		return false
	}
	return slices.Contains(ContributorsAt(owner, par), c.DID.String())
}

// Gather reads the repositories of every contributor named in owner's
// outline records and collects their admitted bullets. It returns problems
// worth telling the reader (a repository that could not be read).
func Gather(owner *outline.Tree, other Trees) (Contributions, []string) {
	if other == nil {
		return nil, nil
	}
	var notes []string
	out := Contributions{}
	for _, did := range allContributors(owner) {
		ct, err := other(did)
		if err != nil {
			notes = append(notes, "could not read contributor "+did+": "+err.Error())
			continue
		}
		for _, it := range ct.Detached {
			if it.Mirror || !Contributed(owner, ct, it) {
				continue
			}
			p, _ := syntax.ParseATURI(it.Str("parent"))
			k := p.RecordKey().String()
			out[k] = append(out[k], Contribution{Item: it, Tree: ct})
		}
	}
	return out, notes
}

// SharedChildren lists the bullets directly under par, a bullet of owner's
// outline, as the owner's outline shows them: the owner's own children and
// the contributions hanging there (contribs, from Gather), in display order.
// Inserting a contribution places it among these.
func SharedChildren(owner *outline.Tree, par *outline.Item, contribs Contributions) []outline.SharedSibling {
	ents := make([]entry, 0, len(par.Children))
	for _, k := range par.Children {
		ents = append(ents, entry{k, owner})
	}
	for _, c := range contribs[par.Key()] {
		ents = append(ents, entry{c.Item, c.Tree})
	}
	slices.SortStableFunc(ents, func(a, b entry) int { return cmpStep(a.step(owner), b.step(owner)) })
	out := make([]outline.SharedSibling, len(ents))
	for i, e := range ents {
		out[i] = outline.SharedSibling{URI: "at://" + e.t.DID.String() + "/" + e.it.Rec.Collection + "/" + e.it.Key(), SortKey: e.it.SortKey()}
	}
	return out
}
