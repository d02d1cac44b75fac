package view

import (
	"slices"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
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
func policyFor(t *outline.Tree, it *outline.Item) (allow []string, ok bool) {
	byRoot := map[string][]string{}
	var self []string
	haveSelf := false
	for rk, p := range t.Policies.All() {
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
	for p := it; p != nil; p = t.Parent(p) {
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
func mentions(t *outline.Tree, it *outline.Item) []string {
	var out []string
	for p := it; p != nil; p = t.Parent(p) {
		for _, d := range facet.Values(p.Rec.Value, facet.Mention) {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	return out
}

// MayComment returns the identities whose comments on it render under the
// owner's policy: with the one defined rule, `mentioned`, every identity
// mentioned in the bullet or a bullet above it. No policy, an empty allow
// list or only unknown rules: nobody.
func MayComment(t *outline.Tree, it *outline.Item) []string {
	if it == nil || it.Mirror {
		return nil
	}
	allow, ok := policyFor(t, it)
	if !ok || !slices.Contains(allow, "mentioned") {
		return nil
	}
	return mentions(t, it)
}

// CommentsOn returns the comments in t's repository whose subject is uri.
func CommentsOn(t *outline.Tree, uri string) []CommentRow {
	var out []CommentRow
	for _, c := range t.Comments {
		if s, _ := c.Value["subject"].(string); s == uri {
			text, _ := c.Value["text"].(string)
			at, _ := c.Value["createdAt"].(string)
			out = append(out, CommentRow{URI: "at://" + t.DID.String() + "/" + lexicon.Comment + "/" + c.RKey, Author: t.DID.String(), Text: text, CreatedAt: at})
		}
	}
	return out
}
