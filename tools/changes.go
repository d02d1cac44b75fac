package tools

import (
	"fmt"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
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
	// Under and WasUnder are the texts of Parent (after) and From (before),
	// clipped, so that a reader need not look the keys up.
	Under    string `json:"under,omitempty"`
	WasUnder string `json:"wasUnder,omitempty"`
	Layout   string `json:"layout,omitempty"`
	Done     bool   `json:"done,omitempty"`
	Mirror   bool   `json:"mirror,omitempty"`
	Note     bool   `json:"note,omitempty"` // the bullet's note is added, changed or removed
}

// maxChanges bounds the changes a dry run lists (each 100–200 bytes): a
// sample, as for created keys (maxListed); more are counted (changesTotal,
// and the kinds in both parts) and said. At 150 a delete by where of 113
// bullets showed a structured client 19 KB for a yes-or-no.
const maxChanges = 20

// changeText is the length text and was are clipped to; parentText
// under and wasUnder.
const (
	changeText = 60
	parentText = 30
)

// changeSet is what a dry run touches: the first bullets (at most the
// limit asked for), how many in all, and the counts of each kind.
type changeSet struct {
	list   []Change
	total  int
	counts string // "2 added, 1 moved"
}

// changesOf lists the bullets (nodes and mirrors) plan p writes, in the
// order of its writes, each once, with what happens to each, comparing the
// tree before with the tree after (before with p's writes); a note's write marks its bullet changed.
// Past limit bullets only their kinds are counted.
func changesOf(before, after *outline.Tree, p *outline.Plan, limit int) *changeSet {
	seen := make(map[string]int, len(p.Writes))    // key → index in list, or -1 past the limit
	kinds := make(map[string]uint8, len(p.Writes)) // key → the kinds of change seen (kindBit)
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
	textOf := func(t *outline.Tree, key string) string {
		if it := t.Nodes.Get(key); it != nil {
			return clip(it.Str("text"), parentText)
		}
		return ""
	}
	// the record each write replaces, when the plan says (a plan's writes
	// are one per record, folded: a delete leaves nothing after it)
	prev := p.Prev
	if len(prev) != len(p.Writes) {
		prev = nil
	}
	for i, w := range p.Writes {
		coll := w.Collection
		note := coll == lexicon.Note
		if note {
			coll = lexicon.Node // a note's key is its bullet's
		} else if coll != lexicon.Node && coll != lexicon.Mirror {
			continue
		}
		if len(out) >= limit {
			// past the limit only the kinds count: a bullet already
			// counted as added or deleted is only that, and a delete is
			// counted from the plan, without looking either tree up (a
			// 10,000-bullet delete looked 30,000 keys up by halves)
			ks, again := kinds[w.RKey]
			if ks&(addedBit|deletedBit) != 0 {
				continue
			}
			if w.Op == store.Delete && !note && prev != nil {
				if prev[i] != nil {
					kinds[w.RKey] = ks | deletedBit
					if !again {
						seen[w.RKey] = -1
					}
				}
				continue
			}
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
			var ks []string
			pb, pa := parentOf(before, b), parentOf(after, a)
			if pb != pa || b.SortKey() != a.SortKey() {
				ks = append(ks, "moved")
				c.Parent, c.From = pa, pb
			}
			if note || b.Str("text") != a.Str("text") || b.Str("layout") != a.Str("layout") || b.Str("completedAt") != a.Str("completedAt") {
				ks = append(ks, "changed")
				if b.Str("text") != a.Str("text") {
					c.Was = clip(b.Str("text"), changeText)
				}
			}
			if len(ks) == 0 {
				continue
			}
			c.Change = strings.Join(ks, "+")
		}
		i, again := seen[w.RKey]
		for _, k := range strings.Split(c.Change, "+") {
			kinds[w.RKey] |= kindBit[k]
		}
		if again {
			// a second write of the same bullet (its note, or a mirror and
			// a node sharing a key): one entry, the kinds merged
			if i < 0 {
				continue
			}
			prev := &out[i]
			if prev.Change != "added" && prev.Change != "deleted" {
				for _, k := range strings.Split(c.Change, "+") {
					if !strings.Contains(prev.Change, k) {
						prev.Change += "+" + k
					}
				}
			}
			prev.Note = prev.Note || c.Note
			if prev.Was == "" {
				prev.Was = c.Was
			}
			continue
		}
		if len(out) >= limit {
			seen[w.RKey] = -1
			continue
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
		switch {
		case c.Change == "deleted":
			c.WasUnder = textOf(before, c.Parent)
		case c.From != "" || c.Parent != "":
			c.Under = textOf(after, c.Parent)
			if c.From != c.Parent {
				c.WasUnder = textOf(before, c.From)
			}
		}
		seen[w.RKey] = len(out)
		out = append(out, c)
	}
	n := map[string]int{}
	for _, ks := range kinds {
		if ks&(kindBit["added"]|kindBit["deleted"]) != 0 { // a bullet added or deleted is only that
			ks &^= kindBit["moved"] | kindBit["changed"]
		}
		for k, bit := range kindBit {
			if ks&bit != 0 {
				n[k]++
			}
		}
	}
	var parts []string
	for _, k := range []string{"added", "moved", "changed", "deleted"} {
		if n[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
		}
	}
	return &changeSet{list: out, total: len(seen), counts: strings.Join(parts, ", ")}
}

// kindBit are the kinds of change as bits, for counting them per bullet.
var kindBit = map[string]uint8{"added": addedBit, "moved": 2, "changed": 4, "deleted": deletedBit}

const addedBit, deletedBit = 1, 8
