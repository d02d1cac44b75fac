package intent

import (
	"bytes"
	"slices"
	"strings"

	"golang.org/x/text/collate"
	"golang.org/x/text/language"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Sort orders for Sort.By.
const (
	SortText    = "text"    // Unicode collation (root locale), case-insensitive, numbers by value ("éclair" before "Zebra", "item 2" before "item 10")
	SortState   = "state"   // open todos, then done todos, then other bullets
	SortCreated = "created" // by createdAt, oldest first
	SortReverse = "reverse" // the present order backwards
)

// Sort orders the children of Parent (a record key or URI; "" or "top" for
// the top level) by By; Desc reverses the order (for state: open todos
// last). The sort is stable. Only the sortKeys that must change are
// written (Planner.Reorder): the longest run of children already in the
// new order keeps its keys, and the others get keys between their new
// neighbours. Bullets of other identities (contributions shown in a shared
// outline) are in their own repositories and never rewritten. Undo puts
// the old keys back.
type Sort struct {
	Parent string
	By     string
	Desc   bool
}

// Plan implements outline.Intent.
func (s Sort) Plan(p *outline.Planner) error {
	var par *outline.Item
	if s.Parent != "" && s.Parent != "top" {
		it, err := p.Node(s.Parent)
		if err != nil {
			return err
		}
		par = it
	}
	kids := p.Children(par).AppendTo(nil)
	less, err := sortOrder(s.By, kids)
	if err != nil {
		return err
	}
	sorted := slices.Clone(kids)
	if s.By == SortReverse {
		slices.Reverse(sorted)
	} else {
		slices.SortStableFunc(sorted, func(a, b *outline.Item) int {
			c := less(a, b)
			if s.Desc {
				c = -c
			}
			return c
		})
	}
	p.Summary("sort the %d children of %s by %s%s", len(kids), outline.Name(par), s.By, map[bool]string{true: ", descending"}[s.Desc])
	if par != nil {
		p.Touch(par.Key())
	}
	n, err := p.Reorder(kids, sorted)
	if err != nil {
		return outline.Fail(outline.ErrConflict, "move the bullets by hand (move_node)", "no sortKeys fit the new order of %s: %v", outline.Name(par), err)
	}
	if n > 0 {
		p.Note("%d of %d children get a new sortKey; the others keep theirs", n, len(kids))
	}
	if s.By == SortText {
		if m := countMirrors(kids); m > 0 {
			p.Note("%d mirror(s) have no text of their own and sort first by text", m)
		}
	}
	return nil
}

func sortOrder(by string, kids []*outline.Item) (func(a, b *outline.Item) int, error) {
	switch by {
	case SortText:
		keys := collationKeys(kids)
		return func(a, b *outline.Item) int { return bytes.Compare(keys[a], keys[b]) }, nil
	case SortState:
		rank := func(it *outline.Item) int {
			switch {
			case it.Str("layout") == "todo" && it.Str("completedAt") == "":
				return 0
			case it.Str("layout") == "todo":
				return 1
			}
			return 2
		}
		return func(a, b *outline.Item) int { return rank(a) - rank(b) }, nil
	case SortCreated:
		return func(a, b *outline.Item) int { return strings.Compare(a.Str("createdAt"), b.Str("createdAt")) }, nil
	case SortReverse:
		return nil, nil
	}
	return nil, outline.Fail(outline.ErrInvalidInput, "by is text, state, created or reverse", "unknown sort order %q", by)
}

func itemText(it *outline.Item) string {
	if it.Mirror {
		return ""
	}
	return it.Str("text")
}

// collationKeys are the items' texts as collation keys of the root locale
// (Unicode's default order: "éclair" next to "eclair", before "Zebra"),
// case ignored, runs of digits by their value ("item 2" before "item 10"):
// comparing two as bytes compares the texts. One key per item, so a sort
// of n costs n keys, not n log n collations.
func collationKeys(items []*outline.Item) map[*outline.Item][]byte {
	c := collate.New(language.Und, collate.IgnoreCase, collate.Numeric)
	var buf collate.Buffer
	keys := make(map[*outline.Item][]byte, len(items))
	for _, it := range items {
		keys[it] = slices.Clone(c.KeyFromString(&buf, itemText(it)))
		buf.Reset()
	}
	return keys
}

func countMirrors(items []*outline.Item) int {
	n := 0
	for _, it := range items {
		if it.Mirror {
			n++
		}
	}
	return n
}
