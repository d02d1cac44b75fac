package outline

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Mirror cycles. A mirror renders its original's subtree in place, so a
// mirror inside its own original's subtree renders forever; so do mirrors
// that reach each other (a mirror of X under Y while a mirror of Y sits
// under X), and a mirror whose original is a mirror (followed to the node
// it ends at). add_mirror refuses the simple case up front; every plan that
// creates or re-parents a mirror, or moves a bullet while mirrors exist, is
// checked on the tree as it would be after the plan (mirrorCycle), whatever
// intent or sequence of apply_batch steps formed it. Originals in another
// repository are followed there (crosscycle.go).

// mirrorOriginal is the record key of the node of t that mirror m ends at
// (through mirrors of mirrors), or "" when it ends elsewhere.
func mirrorOriginal(t *Tree, m *Item) string {
	seen := map[string]bool{}
	for hops := 0; m != nil && hops < 64; hops++ {
		u, err := syntax.ParseATURI(m.Str("original"))
		if err != nil || u.Authority().String() != t.DID.String() {
			return ""
		}
		rk := u.RecordKey().String()
		switch u.Collection().String() {
		case lexicon.Node:
			if t.Nodes.Get(rk) == nil {
				return ""
			}
			return rk
		case lexicon.Mirror:
			if seen[rk] {
				return ""
			}
			seen[rk] = true
			m = t.Mirrors.Get(rk)
		default:
			return ""
		}
	}
	return ""
}

// mirrorCycles returns the record keys of t's mirrors that render forever,
// sorted, and for each the node it mirrors.
func mirrorCycles(t *Tree) ([]string, map[string]string) {
	orig := map[string]string{}    // mirror key → original node key
	byOrig := map[string][]*Item{} // original node key → its mirrors
	for k, m := range t.Mirrors.All() {
		if o := mirrorOriginal(t, m); o != "" {
			orig[k] = o
			byOrig[o] = append(byOrig[o], m)
		}
	}
	if len(byOrig) == 0 {
		return nil, nil
	}
	// edge m1 → m2: m2 lies in the subtree of m1's original, so rendering
	// m1 renders m2
	next := map[string][]string{}
	for k, m := range t.Mirrors.All() {
		if m.Detached != "" {
			continue
		}
		for a := t.Parent(m); a != nil; a = t.Parent(a) {
			for _, m1 := range byOrig[a.Key()] {
				next[m1.Key()] = append(next[m1.Key()], k)
			}
		}
	}
	// a mirror renders forever when it reaches itself
	return slices.Sorted(maps.Keys(onCycles(next, slices.Sorted(maps.Keys(next))))), orig
}

// onCycles is every node of the graph next that lies on a cycle, found by
// one depth-first walk from each of keys (all of next's, in a fixed order).
func onCycles[K comparable](next map[K][]K, keys []K) map[K]bool {
	state := map[K]uint8{} // 1: on the DFS stack, 2: done
	onCycle := map[K]bool{}
	var stack []K
	var visit func(k K)
	visit = func(k K) {
		state[k] = 1
		stack = append(stack, k)
		for _, n := range next[k] {
			switch state[n] {
			case 0:
				visit(n)
			case 1:
				for i := len(stack) - 1; i >= 0; i-- {
					onCycle[stack[i]] = true
					if stack[i] == n {
						break
					}
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[k] = 2
	}
	for _, k := range keys {
		if state[k] == 0 {
			visit(k)
		}
	}
	return onCycle
}

// mirrorCycle refuses the plan (ErrCycle) when, after it, a mirror would
// render forever that did not before. It looks only when the plan writes a
// mirror, or moves bullets while the repository has mirrors.
func (p *Planner) mirrorCycle() error {
	mirrorWrite, nodeUpdate := false, false
	for _, w := range p.writes {
		switch {
		case w.Op == store.Delete || w.Op == "":
		case w.Collection == lexicon.Mirror:
			mirrorWrite = true
		case w.Collection == lexicon.Node && w.Op == store.Update:
			nodeUpdate = true
		}
	}
	if !mirrorWrite && !(nodeUpdate && p.base.Mirrors.Len() > 0) {
		return nil
	}
	p.advance()
	if err := newMirrorCycle(p.base, p.t); err != nil {
		return err
	}
	return p.crossMirrorCycle()
}

// newMirrorCycle returns an *Error (ErrCycle) naming the mirrors that
// render forever in after and did not in before (a plan's snapshot and the
// tree as it would be after the plan), or nil. Undo may use it on the tree
// its writes would leave.
func newMirrorCycle(before, after *Tree) error {
	now, orig := mirrorCycles(after)
	if len(now) == 0 {
		return nil
	}
	was, _ := mirrorCycles(before)
	var fresh []string
	for _, k := range now {
		if _, ok := slices.BinarySearch(was, k); !ok {
			fresh = append(fresh, k)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	var parts []string
	for i, k := range fresh {
		if i == 4 {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(fresh)-4))
			break
		}
		parts = append(parts, fmt.Sprintf("mirror %s (of %s) would hang under %s, inside what it renders", k, orig[k], ancestry(after, after.Mirrors.Get(k))))
	}
	return &Error{Kind: ErrCycle,
		Msg:  "the change would put a mirror inside its own original's subtree, so it would render forever: " + strings.Join(parts, "; ") + "; nothing was written",
		Next: "place the mirror (or the bullets you move) outside the subtree of the bullet it mirrors, or delete the mirror first",
		Data: map[string]any{"mirrors": fresh}}
}

// ancestry names its parents, nearest first ("A < B < top").
func ancestry(t *Tree, it *Item) string {
	var keys []string
	for a := t.Parent(it); a != nil && len(keys) < 6; a = t.Parent(a) {
		keys = append(keys, a.Key())
	}
	if len(keys) == 0 {
		return "the top level"
	}
	return strings.Join(keys, " < ")
}
