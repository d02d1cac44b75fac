package outline

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
)

// Sort orders for SortChildren.
const (
	SortText    = "text"    // natural order of the text, case-insensitive ("item 2" before "item 10")
	SortState   = "state"   // open todos, then done todos, then other bullets
	SortCreated = "created" // by createdAt, oldest first
	SortReverse = "reverse" // the present order backwards
)

// SortChildren plans ordering the children of parent (a record key or URI;
// "" for the top level) by by; desc reverses the order (for state: open
// todos last). The sort is stable. Only the sortKeys that must change are
// written: the longest run of children already in the new order keeps its
// keys, and the others get keys between their new neighbours. Bullets of
// other identities (contributions shown in a shared outline) are in their
// own repositories and never rewritten.
func (p *Planner) SortChildren(parent, by string, desc bool) error {
	p.advance()
	var par *Item
	kids := p.t.Roots
	if parent != "" && parent != "top" {
		it, err := p.node(parent)
		if err != nil {
			return err
		}
		par, kids = it, it.Children
	}
	less, err := sortOrder(by)
	if err != nil {
		return err
	}
	sorted := slices.Clone(kids)
	if by == SortReverse {
		slices.Reverse(sorted)
	} else {
		slices.SortStableFunc(sorted, func(a, b *Item) int {
			c := less(a, b)
			if desc {
				c = -c
			}
			return c
		})
	}
	p.summary("sort the %d children of %s by %s%s", len(kids), named(par), by, map[bool]string{true: ", descending"}[desc])
	if par != nil {
		p.touch(par.Key())
	}
	keys, err := rekey(kids, sorted)
	if err != nil {
		return fail(ErrConflict, "move the bullets by hand (move_node)", "no sortKeys fit the new order of %s: %v", named(par), err)
	}
	n := 0
	for _, it := range sorted {
		if k, ok := keys[it]; ok {
			v := Copy(it.Rec.Value)
			v["sortKey"] = k
			p.update(it.Rec, v, "")
			n++
		}
	}
	if n > 0 {
		p.note("%d of %d children get a new sortKey; the others keep theirs", n, len(kids))
	}
	if by == SortText {
		if m := countMirrors(kids); m > 0 {
			p.note("%d mirror(s) have no text of their own and sort first by text", m)
		}
	}
	return nil
}

// rekey gives the items of sorted (a new order of kids, which are in their
// present order) new sortKeys where they need one: the items whose present
// places form the longest increasing run in the new order keep theirs.
func rekey(kids, sorted []*Item) (map[*Item]string, error) {
	place := make(map[*Item]int, len(kids))
	for i, it := range kids {
		place[it] = i
	}
	seq := make([]int, len(sorted))
	for i, it := range sorted {
		seq[i] = place[it]
	}
	keep := lis(seq)
	out := map[*Item]string{}
	for i := 0; i < len(sorted); {
		if keep[i] {
			i++
			continue
		}
		j := i
		for j < len(sorted) && !keep[j] {
			j++
		}
		lo, hi := "", ""
		if i > 0 {
			lo = sorted[i-1].SortKey()
		}
		if j < len(sorted) {
			hi = sorted[j].SortKey()
		}
		ks, err := order.Spread(lo, hi, j-i)
		if err != nil {
			var ok bool
			if ks, ok = order.Wide(lo, hi, j-i); !ok {
				return nil, err
			}
		}
		for q := i; q < j; q++ {
			out[sorted[q]] = ks[q-i]
		}
		i = j
	}
	return out, nil
}

// lis marks a longest strictly increasing subsequence of seq.
func lis(seq []int) []bool {
	tails := []int{} // index in seq of the smallest tail of each length
	prev := make([]int, len(seq))
	for i, v := range seq {
		k, _ := slices.BinarySearchFunc(tails, v, func(t, v int) int { return seq[t] - v })
		if k > 0 {
			prev[i] = tails[k-1]
		} else {
			prev[i] = -1
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	keep := make([]bool, len(seq))
	if len(tails) > 0 {
		for i := tails[len(tails)-1]; i >= 0; i = prev[i] {
			keep[i] = true
		}
	}
	return keep
}

func sortOrder(by string) (func(a, b *Item) int, error) {
	switch by {
	case SortText:
		return func(a, b *Item) int { return natural(itemText(a), itemText(b)) }, nil
	case SortState:
		rank := func(it *Item) int {
			switch {
			case it.Str("layout") == "todo" && it.Str("completedAt") == "":
				return 0
			case it.Str("layout") == "todo":
				return 1
			}
			return 2
		}
		return func(a, b *Item) int { return rank(a) - rank(b) }, nil
	case SortCreated:
		return func(a, b *Item) int { return strings.Compare(a.Str("createdAt"), b.Str("createdAt")) }, nil
	case SortReverse:
		return nil, nil
	}
	return nil, fail(ErrInvalidInput, "by is text, state, created or reverse", "unknown sort order %q", by)
}

func itemText(it *Item) string {
	if it.Mirror {
		return ""
	}
	return it.Str("text")
}

// natural compares a and b case-insensitively, runs of digits by their
// value ("item 2" < "item 10").
func natural(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		if isDigit(ra) && isDigit(rb) {
			da, db := digits(a), digits(b)
			ta, tb := strings.TrimLeft(da, "0"), strings.TrimLeft(db, "0")
			if len(ta) != len(tb) {
				return len(ta) - len(tb)
			}
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
			a, b = a[len(da):], b[len(db):]
			continue
		}
		la, lb := unicode.ToLower(ra), unicode.ToLower(rb)
		if la != lb {
			if la < lb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	return len(a) - len(b)
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

func digits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

func countMirrors(items []*Item) int {
	n := 0
	for _, it := range items {
		if it.Mirror {
			n++
		}
	}
	return n
}
