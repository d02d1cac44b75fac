package view

import (
	"cmp"
	"slices"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// CommentRow is a comment that renders under the owner's policy.
type CommentRow struct {
	URI    string `json:"uri"`
	Author string `json:"author"`
	// Handle is the author's handle as the owner's mention of them spells
	// it (the mention facet's text), when known.
	Handle    string `json:"handle,omitempty"`
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
		allow := stringsOf(p.Value.Get("allow"))
		root, _ := p.Value.Text("root")
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
		for _, d := range facet.Values(p.Rec.Value.Map(), facet.Mention) {
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
		if s, _ := c.Value.Text("subject"); s == uri {
			text, _ := c.Value.Text("text")
			at, _ := c.Value.Text("createdAt")
			out = append(out, CommentRow{URI: "at://" + t.DID.String() + "/" + lexicon.Comment + "/" + c.RKey, Author: t.DID.String(), Text: text, CreatedAt: at})
		}
	}
	return out
}

// thread returns the comments on it (whose URI is uri) that render under
// the owner's policy, read from each allowed identity's repository with
// get (nil: not available), in the order they were written; each carries
// the handle the owner's mention of its author spells.
func thread(t *outline.Tree, it *outline.Item, uri string, get func(did string) *outline.Tree) []CommentRow {
	var out []CommentRow
	for _, did := range MayComment(t, it) {
		ct := get(did)
		if ct == nil {
			continue
		}
		h := mentionHandle(t, it, did)
		for _, c := range CommentsOn(ct, uri) {
			c.Handle = h
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b CommentRow) int { return cmp.Compare(a.CreatedAt, b.CreatedAt) })
	return out
}

// mentionHandle is the handle a mention of did in it or a bullet above it
// spells (the text its facet covers, without "@"), "" if none does.
func mentionHandle(t *outline.Tree, it *outline.Item, did string) string {
	for p := it; p != nil; p = t.Parent(p) {
		text := p.Str("text")
		for _, s := range facet.Record(p.Rec.Value.Map()) {
			if s.Kind == facet.Mention && s.Value == did && s.Start >= 0 && s.Start < s.End && s.End <= len(text) {
				if h := strings.TrimPrefix(strings.TrimSpace(text[s.Start:s.End]), "@"); h != "" && !strings.ContainsAny(h, " \n") {
					return h
				}
			}
		}
	}
	return ""
}

// Line renders a comment on one line: who (handle, else DID), the day,
// and the text ("comment by @bob.test on 2026-07-30: Free-range?"), as
// the text format shows it under its bullet; other formats may use it.
func (c CommentRow) Line() string {
	who := c.Author
	if c.Handle != "" {
		who = "@" + c.Handle
	}
	day := c.CreatedAt
	if len(day) >= 10 {
		day = day[:10]
	}
	if day != "" {
		day = " on " + day
	}
	return "comment by " + who + day + ": " + oneLineText.Replace(c.Text)
}

var oneLineText = strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ")

// commentLines renders a row's comment thread for the text format, one
// line each below the bullet at indentation ind.
func commentLines(b *strings.Builder, r *Row, ind string) {
	for _, c := range r.Comments {
		b.WriteString(ind + "    " + c.Line() + "\n")
	}
}
