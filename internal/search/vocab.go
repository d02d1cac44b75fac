package search

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Search runs q against t (Update is called first, a no-op for an
// unchanged commit; a Cache's index never built for t's repository walks
// t instead, and is built in the background). Hits come in outline order
// (pre-order), the same either way. A layout
// Bulleted does not render is searched as given (the set is open), and the
// result's notices say which layouts the outline has and which render.
func (x *Index) Search(t *outline.Tree, q Query) (*Result, error) {
	res, err := x.search(t, q)
	if err != nil || q.Layout == "" || slices.Contains(lexicon.Layouts, q.Layout) {
		return res, err
	}
	res.Notices = append(res.Notices, x.layoutNotice(t, q.Layout))
	return res, nil
}

// layoutAliases are layouts agents guess, with what Bulleted calls them.
var layoutAliases = map[string]string{
	"heading": "h1, h2 or h3", "header": "h1, h2 or h3", "title": "h1, h2 or h3",
	"checkbox": "todo", "task": "todo", "check": "todo", "checklist": "todo",
	"code": "codeBlock", "codeblock": "codeBlock", "quote": "quoteBlock", "quoteblock": "quoteBlock", "blockquote": "quoteBlock",
	"text": "bullet", "plain": "bullet", "paragraph": "bullet",
}

// layoutNotice says that layout is not one Bulleted renders, what it may
// have meant, and the layouts the indexed outline has, most used first.
func (x *Index) layoutNotice(t *outline.Tree, layout string) string {
	count := map[string]int{}
	if !x.builtFor(t) {
		// a cold index (its first searches walk the tree): counted there
		var walk func(items outline.Kids)
		walk = func(items outline.Kids) {
			for it := range items.Items() {
				if !it.Mirror {
					l := it.Str("layout")
					if l == "" {
						l = "bullet"
					}
					count[l]++
				}
				walk(it.Children)
			}
		}
		walk(t.Roots)
	} else {
		x.mu.Lock()
		for _, b := range x.blocks {
			for _, r := range b.rows {
				if r.e == nil {
					continue
				}
				l := r.e.layoutName()
				if l == "" {
					l = "bullet"
				}
				count[l]++
			}
		}
		x.mu.Unlock()
	}
	type lc struct {
		l string
		n int
	}
	var have []lc
	for l, n := range count {
		have = append(have, lc{l, n})
	}
	sort.Slice(have, func(i, j int) bool {
		if have[i].n != have[j].n {
			return have[i].n > have[j].n
		}
		return have[i].l < have[j].l
	})
	var parts []string
	for _, h := range have {
		parts = append(parts, fmt.Sprintf("%s (%d)", h.l, h.n))
	}
	msg := fmt.Sprintf("layout %q is not one Bulleted renders (%s); searched as given", layout, strings.Join(lexicon.Layouts, ", "))
	if alt, ok := layoutAliases[strings.ToLower(layout)]; ok {
		msg += "; did you mean " + alt + "?"
	}
	if len(parts) == 0 {
		return msg + "; this outline has no bullets"
	}
	return msg + "; layouts in this outline: " + strings.Join(parts, ", ")
}
