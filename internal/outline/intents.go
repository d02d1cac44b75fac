package outline

import (
	"fmt"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
)

// target resolves a position to (parent item or nil, sibling list, index).
func (p *Planner) target(pos Position, current *Item, exclude map[*Item]bool) (*Item, Kids, int, error) {
	t := p.t
	parent := current
	switch strings.TrimSpace(pos.Parent) {
	case "":
	case "top":
		parent = nil
	default:
		it, err := t.Resolve(pos.Parent)
		if err != nil {
			if e, ok := err.(*Error); ok && e.Kind == ErrNodeNotFound {
				return nil, Kids{}, 0, fail(ErrParentMissing, e.Next, "parent %s does not exist", pos.Parent)
			}
			return nil, Kids{}, 0, err
		}
		if it.Mirror {
			return nil, Kids{}, 0, fail(ErrInvalidInput, "use a node as parent, not a mirror", "%s is a mirror; bullets cannot hang under a mirror", it.Key())
		}
		if it.Detached != "" {
			p.note("parent %s is itself detached (%s)", it.Key(), it.Detached)
		}
		parent = it
	}
	sibs := t.ChildrenOf(parent)
	if len(exclude) > 0 {
		kept := make([]*Item, 0, sibs.Len())
		for s := range sibs.Items() {
			if !exclude[s] {
				kept = append(kept, s)
			}
		}
		sibs = KidsOf(kept)
	}
	if pos.After != "" {
		if pos.Where != "" {
			return nil, Kids{}, 0, fail(ErrInvalidInput, "pass either after or position", "after and position both given")
		}
		a, err := t.Resolve(pos.After)
		if err != nil {
			return nil, Kids{}, 0, err
		}
		if i, ok := indexOf(sibs, a); ok {
			return parent, sibs, i + 1, nil
		}
		return nil, Kids{}, 0, fail(ErrAnchorMissing, nextChildren(t, parent, sibs), "anchor %s is not a child of %s", a.Key(), parentName(parent))
	}
	switch pos.Where {
	case "", "last":
		return parent, sibs, sibs.Len(), nil
	case "first":
		return parent, sibs, 0, nil
	}
	return nil, Kids{}, 0, fail(ErrInvalidInput, "use position first or last, or after=<sibling>", "unknown position %q", pos.Where)
}

// indexOf finds it in sibs, a sibling list in sibling order (sortKey
// bytes, record key, a node before a mirror), by binary search: O(log n)
// in the list.
func indexOf(sibs Kids, it *Item) (int, bool) {
	i, _ := sibs.SearchFunc(func(s *Item) int {
		if c := strings.Compare(s.SortKey(), it.SortKey()); c != 0 {
			return c
		}
		if c := strings.Compare(s.Key(), it.Key()); c != 0 {
			return c
		}
		return compareBool(s.Mirror, it.Mirror)
	})
	if i < sibs.Len() && sibs.At(i) == it {
		return i, true
	}
	return 0, false
}

// named is a bullet as results show it: its text (shortened) and key.
func named(it *Item) string {
	if it == nil {
		return "the top level"
	}
	txt := it.Str("text")
	if it.Mirror {
		txt = "mirror"
	}
	return fmt.Sprintf("%q (%s)", clip(txt, 40), it.Key())
}

func parentName(parent *Item) string {
	if parent == nil {
		return "the top level"
	}
	return parent.Key()
}

func nextChildren(t *Tree, parent *Item, sibs Kids) string {
	if sibs.Len() == 0 {
		return fmt.Sprintf("%s has no children; use position first or last", parentName(parent))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "its children are: ")
	for i, s := range sibs.All() {
		if i == 8 {
			fmt.Fprintf(&b, "… (%d more)", sibs.Len()-8)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %q", s.Key(), clip(s.Str("text"), 30))
	}
	if parent != nil {
		fmt.Fprintf(&b, "; call read_outline with node=%s to see them", parent.Key())
	}
	return b.String()
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// place chooses keys for n items at index at of sibs, adding updates for
// any renormalised siblings. It reads the siblings near the gap alone
// (placeSpan on each side: every window order.PlaceOpt may respace, and
// the bounds around it), so an insert into a list of 50,000 costs what one
// into a short list does; only when the neighbours leave no room at all
// (equal or invalid keys) and the respacing reaches past that span is the
// whole list read. The edit run that picks the bias (order.BiasFor) is
// read from the same span: its newest and second-newest bullets by record
// key (a newer sibling further away does not stop a run).
func (p *Planner) place(sibs Kids, at, n int) ([]string, error) {
	lo, hi := max(at-placeSpan, 0), min(at+placeSpan, sibs.Len())
	plan, err := p.placeIn(sibs, lo, hi, at, n)
	if err != nil {
		return nil, err
	}
	for _, r := range plan.Respace {
		if (r.Index == lo && lo > 0) || (r.Index == hi-1 && hi < sibs.Len()) {
			// a respacing that reached the span's edge: no room near
			// the gap; place against the whole list
			if plan, err = p.placeIn(sibs, 0, sibs.Len(), at, n); err != nil {
				return nil, err
			}
			break
		}
	}
	for _, r := range plan.Respace {
		s := sibs.At(r.Index)
		v := s.Rec.Value.Map()
		v["sortKey"] = r.Key
		p.update(s.Rec, v, "")
	}
	if len(plan.Respace) > 0 {
		p.note("respaced %d sibling sortKey(s) to make room (%d extra update(s))", len(plan.Respace), len(plan.Respace))
	}
	return plan.Keys, nil
}

// placeSpan is how many siblings on each side of the gap place reads:
// order.PlaceOpt's widest window (order.Window) and the bound past it.
const placeSpan = order.Window + 1

// placeIn runs order.PlaceOpt on sibs[lo:hi] (at and the returned indices
// are of sibs).
func (p *Planner) placeIn(sibs Kids, lo, hi, at, n int) (order.Plan, error) {
	span := sibs.Slice(lo, hi)
	keys := make([]string, len(span))
	newest, second := -1, -1
	for i, s := range span {
		keys[i] = s.SortKey()
		if newest < 0 || s.Key() > span[newest].Key() {
			second = newest
			newest = i
		} else if second < 0 || s.Key() > span[second].Key() {
			second = i
		}
	}
	bias := order.BiasFor(at-lo, newest, second)
	// re-spacing prefers rewriting bullets this server wrote over other
	// clients' (rewriting theirs races their own edits)
	var own map[string]bool
	plan, err := order.PlaceOpt(keys, at-lo, n, bias, order.Options{Foreign: func(i int) bool {
		if own == nil {
			own = p.e.ownKeys()
		}
		return !own[span[i].Key()]
	}})
	if err != nil {
		return order.Plan{}, err
	}
	for i := range plan.Respace {
		plan.Respace[i].Index += lo
	}
	return plan, nil
}

func (p *Planner) parentURI(parent *Item) string {
	if parent == nil {
		return ""
	}
	return p.t.NodeURI(parent.Key())
}

// reparent plans one update putting it under parent (nil: top) at sortKey,
// keeping every other field.
func (p *Planner) reparent(it, parent *Item, sortKey, label string) {
	v := it.Rec.Value.Map()
	v["sortKey"] = sortKey
	if parent == nil {
		delete(v, "parent")
	} else {
		v["parent"] = p.t.NodeURI(parent.Key())
	}
	p.update(it.Rec, v, label)
	p.touch(it.Key())
}

func (p *Planner) node(ref string) (*Item, error) {
	it, err := p.t.Resolve(ref)
	if err != nil {
		return nil, err
	}
	if it.Mirror {
		return nil, fail(ErrInvalidInput, "edit the original in its own repository", "%s is a mirror, not a bullet", it.Key())
	}
	return it, nil
}
