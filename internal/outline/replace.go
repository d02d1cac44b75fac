package outline

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// replace places the bullets op has still to write (creates and updates of
// nodes and mirrors that carry a sortKey) against their siblings as they
// are in s, keeping their record keys: an operation that stopped part-way
// (or met another client's commit between two batches) must not write the
// sortKeys it planned when another client has since written bullets among
// them. Under each parent the operation's bullets are taken in their
// planned order; each run of bullets not yet written goes right after the
// bullet that came before it in the plan (the operation's own, already
// written, or else the sibling now before its planned place), and keeps its
// planned keys when they still fall strictly between that bullet and the
// next one there. Otherwise the run gets fresh keys in that gap, so no key
// ties a sibling and the run stays contiguous and in order. It returns how
// many writes it changed (op is then dirty: recorded whole at its next
// step); an operation bullet that a run was placed after and that is gone
// is an anchor_missing error. Undo operations are left as
// they are: they restore records exactly.
func replace(s *store.Snapshot, op *Operation) (int, error) {
	known := map[string]map[string]string{} // parent → path → sortKey at planning
	for _, a := range op.Around {
		if known[a.Parent] == nil {
			known[a.Parent] = map[string]string{}
		}
		known[a.Parent][a.Path] = a.Key
	}
	if len(op.Undoes) > 0 {
		return 0, nil
	}
	from := op.landedWrites()
	type entry struct {
		i      int // index in op.Writes
		path   string
		key    string
		landed bool
	}
	groups := map[string][]entry{} // parent field → the operation's bullets there
	unlanded := map[string]bool{}
	for i, w := range op.Writes {
		if w.Op == store.Delete || (w.Collection != lexicon.Node && w.Collection != lexicon.Mirror) {
			continue
		}
		k, ok := w.Value["sortKey"].(string)
		if !ok {
			continue
		}
		p, _ := w.Value["parent"].(string)
		path := w.Collection + "/" + w.RKey
		groups[p] = append(groups[p], entry{i: i, path: path, key: k, landed: i < from})
		if i >= from {
			unlanded[path] = true
		}
	}
	if len(unlanded) == 0 {
		return 0, nil
	}
	// the siblings now, under each parent the operation writes to (its own
	// bullets still to write left out: they are being placed)
	type sib struct{ path, key string }
	current := map[string][]sib{}
	for _, r := range s.Records {
		if r.Collection != lexicon.Node && r.Collection != lexicon.Mirror {
			continue
		}
		p, _ := r.Value.Text("parent")
		if _, ok := groups[p]; !ok {
			continue
		}
		path := r.Collection + "/" + r.RKey
		if unlanded[path] {
			continue
		}
		k, _ := r.Value.Text("sortKey")
		current[p] = append(current[p], sib{path, k})
	}
	changed := 0
	for _, p := range slices.Sorted(maps.Keys(groups)) {
		es := groups[p]
		sibs := current[p]
		slices.SortFunc(sibs, func(a, b sib) int {
			if c := strings.Compare(a.key, b.key); c != 0 {
				return c
			}
			return strings.Compare(a.path, b.path)
		})
		at := map[string]int{} // path → place among sibs
		for j, sb := range sibs {
			at[sb.path] = j
		}
		// the plan's order: the operation's bullets and the siblings they
		// were placed among (recorded at planning), by key as bytes
		for path, k := range known[p] {
			es = append(es, entry{i: -1, path: path, key: k, landed: true})
		}
		slices.SortStableFunc(es, func(a, b entry) int {
			if c := strings.Compare(a.key, b.key); c != 0 {
				return c
			}
			return compareBool(a.i >= 0, b.i >= 0) // a sibling before the bullet placed after it
		})
		for j := 0; j < len(es); {
			if es[j].landed {
				j++
				continue
			}
			end := j
			for end < len(es) && !es[end].landed {
				end++
			}
			run := es[j:end]
			// the bullet the run follows, and the one after it now
			prev := -1 // place in sibs; -1: the start
			switch {
			case j > 0:
				pe := es[j-1]
				q, ok := at[pe.path]
				if !ok {
					return 0, fail(ErrAnchorMissing, fmt.Sprintf("undo it with operation=%s to roll back what landed, then plan again", op.ID),
						"cannot resume %s: %s, which its bullets still to write were placed after, is no longer there", op.ID, pe.path)
				}
				prev = q
			case op.Around == nil:
				// planned before siblings were recorded: the sibling now
				// before the run's planned place
				for q, sb := range sibs {
					if sb.key < run[0].key {
						prev = q
					}
				}
			}
			lo, hi := "", ""
			if prev >= 0 {
				lo = sibs[prev].key
			}
			if prev+1 < len(sibs) {
				hi = sibs[prev+1].key
			}
			fits := true
			for q, e := range run {
				if e.key <= lo || (hi != "" && e.key >= hi) || (q > 0 && e.key <= run[q-1].key) {
					fits = false
					break
				}
			}
			if !fits {
				keys, err := order.Spread(lo, hi, len(run))
				if err != nil {
					// another client's keys outside this server's alphabet:
					// a printable key that fits between them
					if ks, ok := order.Wide(lo, hi, len(run)); ok {
						keys, err = ks, nil
					}
				}
				if err != nil {
					return 0, fail(ErrConflict, fmt.Sprintf("undo it with operation=%s to roll back what landed, then plan again", op.ID),
						"cannot resume %s: no room for its bullets between %q and %q (%v)", op.ID, lo, hi, err)
				}
				for q, e := range run {
					v := maps.Clone(op.Writes[e.i].Value)
					v["sortKey"] = keys[q]
					op.Writes[e.i].Value = v
					changed++
				}
			}
			j = end
		}
	}
	if changed > 0 {
		op.dirty = true // its record is written whole at its next step
	}
	return changed, nil
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// around is a sibling an operation's bullets were placed among, as it was
// when the operation was planned: the one right before the first of them
// under a parent, and every one whose key falls among theirs.
type around struct {
	Parent string `json:"parent"` // the parent field ("" for the top level)
	Path   string `json:"path"`   // collection/rkey
	Key    string `json:"key"`    // its sortKey then
}

// aroundOf records, from the tree a plan was made on, the siblings the
// plan's bullets are placed among (see Around), so that a resume can keep
// them where the plan put them.
func aroundOf(t *Tree, writes []store.Write) []around {
	type span struct{ lo, hi string }
	spans := map[string]*span{}
	own := map[string]bool{}
	for _, w := range writes {
		if w.Collection != lexicon.Node && w.Collection != lexicon.Mirror {
			continue
		}
		own[w.Collection+"/"+w.RKey] = true
		k, ok := w.Value["sortKey"].(string)
		if w.Op == store.Delete || !ok {
			continue
		}
		p, _ := w.Value["parent"].(string)
		if sp := spans[p]; sp == nil {
			spans[p] = &span{k, k}
		} else {
			sp.lo, sp.hi = min(sp.lo, k), max(sp.hi, k)
		}
	}
	out := []around{}
	for _, p := range slices.Sorted(maps.Keys(spans)) {
		sp := spans[p]
		var sibs Kids
		if p == "" {
			sibs = t.Roots
		} else if k, why := t.parentKey(p); why == "" {
			if it := t.Nodes.Get(k); it != nil {
				sibs = it.Children
			}
		}
		// the list is in sibling order (sort key first): the siblings
		// in the span are found by binary search, and the one before it
		// is the last before them that is not the plan's own
		first, _ := sibs.SearchFunc(func(it *Item) int { return strings.Compare(it.SortKey(), sp.lo) })
		var before *Item
		for i := first - 1; i >= 0; i-- {
			if s := sibs.At(i); !own[s.Rec.Collection+"/"+s.Key()] {
				before = s
				break
			}
		}
		for i := first; i < sibs.Len(); i++ {
			it := sibs.At(i)
			k := it.SortKey()
			if k > sp.hi {
				break
			}
			if !own[it.Rec.Collection+"/"+it.Key()] {
				out = append(out, around{Parent: p, Path: it.Rec.Collection + "/" + it.Key(), Key: k})
			}
		}
		if before != nil {
			out = append(out, around{Parent: p, Path: before.Rec.Collection + "/" + before.Key(), Key: before.SortKey()})
		}
	}
	return out
}
