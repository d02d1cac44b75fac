package outline

import (
	"slices"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// CommentRow is a comment that renders under the owner's policy.
type CommentRow struct {
	URI       string `json:"uri"`
	Author    string `json:"author"`
	Text      string `json:"text"`
	CreatedAt string `json:"createdAt,omitempty"`
}

// policyFor returns the allow list that governs it: the nearest policy
// whose root is it or an ancestor, else the repository's `self` policy.
// ok is false when no policy applies (silence is closed).
func (t *Tree) policyFor(it *Item) (allow []string, ok bool) {
	byRoot := map[string][]string{}
	var self []string
	haveSelf := false
	for rk, p := range t.Policies {
		allow := stringsOf(p.Value["allow"])
		root, _ := p.Value["root"].(string)
		if root == "" {
			if rk == "self" {
				self, haveSelf = allow, true
			}
			continue
		}
		if u, err := syntax.ParseATURI(root); err == nil && u.Authority().String() == t.DID.String() {
			byRoot[u.RecordKey().String()] = allow
		}
	}
	for p := it; p != nil; p = p.Parent {
		if a, found := byRoot[p.Key()]; found {
			return a, true
		}
	}
	return self, haveSelf
}

func stringsOf(v any) []string {
	xs, _ := v.([]any)
	var out []string
	for _, x := range xs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// mentions returns the DIDs mentioned in the facets of it and its
// ancestors.
func mentions(it *Item) []string {
	var out []string
	for p := it; p != nil; p = p.Parent {
		fs, _ := p.Rec.Value["facets"].([]any)
		for _, f := range fs {
			fm, _ := f.(map[string]any)
			feats, _ := fm["features"].([]any)
			for _, ft := range feats {
				m, _ := ft.(map[string]any)
				if m["$type"] == "app.bsky.richtext.facet#mention" {
					if d, ok := m["did"].(string); ok && !slices.Contains(out, d) {
						out = append(out, d)
					}
				}
			}
		}
	}
	return out
}

// MayComment returns the identities whose comments on it render under the
// owner's policy: with the one defined rule, `mentioned`, every identity
// mentioned in the bullet or a bullet above it. No policy, an empty allow
// list or only unknown rules: nobody.
func (t *Tree) MayComment(it *Item) []string {
	if it == nil || it.Mirror {
		return nil
	}
	allow, ok := t.policyFor(it)
	if !ok || !slices.Contains(allow, "mentioned") {
		return nil
	}
	return mentions(it)
}

// CommentsOn returns the comments in this tree's repository whose subject
// is uri.
func (t *Tree) CommentsOn(uri string) []CommentRow {
	var out []CommentRow
	for _, c := range t.Comments {
		if s, _ := c.Value["subject"].(string); s == uri {
			text, _ := c.Value["text"].(string)
			at, _ := c.Value["createdAt"].(string)
			out = append(out, CommentRow{URI: t.uri(c.Collection, c.RKey), Author: t.DID.String(), Text: text, CreatedAt: at})
		}
	}
	return out
}

// Trees gives the tree of another identity's repository (a DID), for live
// mirrors and comments; nil means offline.
type Trees func(did string) (*Tree, error)

// Enrich fills in what lives in other repositories: the text of mirrored
// originals (read live, read-only) and the comments that render under the
// owner's policy. other may be nil (offline): only this repository is read.
// It returns problems worth telling the reader.
func (v *View) Enrich(t *Tree, other Trees) []string {
	var notes []string
	get := func(did string) *Tree {
		if did == t.DID.String() {
			return t
		}
		if other == nil {
			return nil
		}
		ot, err := other(did)
		if err != nil {
			notes = append(notes, "could not read "+did+": "+err.Error())
			return nil
		}
		return ot
	}
	var walk func(rows []*Row)
	walk = func(rows []*Row) {
		for _, r := range rows {
			if r.Mirror != nil {
				if u, err := syntax.ParseATURI(r.Mirror.Original); err == nil {
					if ot := get(u.Authority().String()); ot != nil {
						if n := ot.Nodes[u.RecordKey().String()]; n != nil {
							r.Mirror.Text = n.Str("text")
							r.Mirror.ChildCount = len(n.Children)
						} else {
							r.Mirror.Missing = true
						}
					}
				}
			} else if it := t.Nodes[r.RKey]; it != nil {
				for _, did := range t.MayComment(it) {
					if ct := get(did); ct != nil {
						r.Comments = append(r.Comments, ct.CommentsOn(r.URI)...)
					}
				}
			}
			walk(r.Children)
		}
	}
	if v.Root != nil {
		walk([]*Row{v.Root})
	}
	walk(v.Nodes)
	return notes
}
