package tools

import (
	"fmt"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Change is one bullet a dry run touches, before and after, for the diff
// view (internal/ui) and any client that wants the same: what happens to it
// (added, deleted, moved, changed, or moved+changed), its text after (before,
// if deleted), its text before when that changes, its parent key after and
// before ("" is the top level) when it moves.
type Change struct {
	RKey   string `json:"rkey"`
	Change string `json:"change"`
	Text   string `json:"text,omitempty"`
	Was    string `json:"was,omitempty"`
	Parent string `json:"parent,omitempty"`
	From   string `json:"from,omitempty"`
	Layout string `json:"layout,omitempty"`
	Done   bool   `json:"done,omitempty"`
	Mirror bool   `json:"mirror,omitempty"`
	Note   bool   `json:"note,omitempty"` // the bullet's note is added, changed or removed
}

// maxChanges bounds the changes a dry run lists (each about 100 bytes);
// more are counted (changesTotal) and said.
const maxChanges = 150

// changeText is the length text and was are clipped to.
const changeText = 60

// changesOf lists the bullets (nodes and mirrors) plan p writes, in the
// order of its writes, each once, with what happens to each, comparing the
// tree before with the tree after; a note's write marks its bullet changed.
func changesOf(before *outline.Tree, p *outline.Plan) []Change {
	after := before.Next(before.Commit, before.Rev, outline.WriteChanges(p.Writes))
	seen := map[string]int{}
	var out []Change
	get := func(t *outline.Tree, coll, key string) *outline.Item {
		if coll == lexicon.Mirror {
			return t.Mirrors.Get(key)
		}
		return t.Nodes.Get(key)
	}
	parentOf := func(t *outline.Tree, it *outline.Item) string {
		if par := t.Parent(it); par != nil {
			return par.Key()
		}
		return ""
	}
	for _, w := range p.Writes {
		coll := w.Collection
		note := coll == lexicon.Note
		if note {
			coll = lexicon.Node // a note's key is its bullet's
		} else if coll != lexicon.Node && coll != lexicon.Mirror {
			continue
		}
		b, a := get(before, coll, w.RKey), get(after, coll, w.RKey)
		c := Change{RKey: w.RKey, Mirror: coll == lexicon.Mirror, Note: note}
		switch {
		case b == nil && a == nil:
			continue
		case b == nil:
			c.Change = "added"
			c.Parent = parentOf(after, a)
		case a == nil:
			c.Change = "deleted"
			c.Parent = parentOf(before, b)
		default:
			var kinds []string
			pb, pa := parentOf(before, b), parentOf(after, a)
			if pb != pa || b.SortKey() != a.SortKey() {
				kinds = append(kinds, "moved")
				c.Parent, c.From = pa, pb
			}
			if note || b.Str("text") != a.Str("text") || b.Str("layout") != a.Str("layout") || b.Str("completedAt") != a.Str("completedAt") {
				kinds = append(kinds, "changed")
				if b.Str("text") != a.Str("text") {
					c.Was = clip(b.Str("text"), changeText)
				}
			}
			if len(kinds) == 0 {
				continue
			}
			c.Change = strings.Join(kinds, "+")
		}
		it := a
		if it == nil {
			it = b
		}
		c.Text = clip(it.Str("text"), changeText)
		if c.Mirror {
			c.Text = clip(it.Str("original"), changeText)
		}
		c.Layout = it.Str("layout")
		c.Done = it.Str("completedAt") != ""
		if i, ok := seen[w.RKey]; ok {
			// a second write of the same bullet (its note, or a mirror and
			// a node sharing a key): one entry, the kinds merged
			prev := &out[i]
			for _, k := range strings.Split(c.Change, "+") {
				if !strings.Contains(prev.Change, k) && prev.Change != "added" && prev.Change != "deleted" {
					prev.Change += "+" + k
				}
			}
			prev.Note = prev.Note || c.Note
			if prev.Was == "" {
				prev.Was = c.Was
			}
			continue
		}
		seen[w.RKey] = len(out)
		out = append(out, c)
	}
	return out
}

// changeCounts says how many bullets each kind of change touches, as
// "2 added, 1 moved"; moved+changed counts under both.
func changeCounts(cs []Change) string {
	n := map[string]int{}
	for _, c := range cs {
		for _, k := range strings.Split(c.Change, "+") {
			n[k]++
		}
	}
	var parts []string
	for _, k := range []string{"added", "moved", "changed", "deleted"} {
		if n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
		}
	}
	return strings.Join(parts, ", ")
}
