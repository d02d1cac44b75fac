package search

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Select calls fn, in the outline's order (pre-order from the top, or
// from q.Under), for every bullet of t that q matches, with the same
// filters as Search (Limit and Cursor are ignored), until fn returns
// false. It reads t alone, without an index: what a write that selects
// its bullets by query (where) uses on the tree its plan is made on.
// Mirrors, which have no text of their own, are never selected. With
// q.Depth, only the bullets 1 to Depth levels below q.Under are.
func Select(t *outline.Tree, q Query, fn func(it *outline.Item) bool) error {
	m, err := newMatcher(q)
	if err != nil {
		return err
	}
	var visit func(it *outline.Item, level int) bool
	visit = func(it *outline.Item, level int) bool {
		if q.Depth > 0 && level > q.Depth {
			return true
		}
		if !it.Mirror && (q.Depth == 0 || level > 0) {
			text, note := lowered(it)
			if ok, _, _, _ := m.match(derive(it), text, note); ok && !fn(it) {
				return false
			}
		}
		if q.Depth > 0 && level == q.Depth {
			return true // its children are below depth
		}
		for c := range it.Children.Items() {
			if !visit(c, level+1) {
				return false
			}
		}
		return true
	}
	top := t.Roots
	if q.Under != nil {
		top = outline.KidsOf([]*outline.Item{q.Under})
	}
	for it := range top.Items() {
		if !visit(it, 0) {
			return nil
		}
	}
	return nil
}
