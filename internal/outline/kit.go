package outline

import (
	"slices"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Intent is one change to an outline, as a value: it plans its writes
// through the kit (the Planner's exported methods) and never touches the
// engine's internals. Engine.Do runs it as one operation; a batch runs
// several against one snapshot. The intents the tools offer are in package
// intent, one file each; a new one is a new file there (see its package
// doc).
type Intent interface {
	Plan(p *Planner) error
}

// planFunc is a function used as an Intent.
type planFunc func(p *Planner) error

// Plan implements Intent.
func (f planFunc) Plan(p *Planner) error { return f(p) }

// The kit: what an intent may use to read the outline and plan writes.
// The engine's rules (parents in this repository or an admitting shared
// outline, no cascade, no cycles, notes with their bullets, policy roots
// owned, no tied sortKeys, valid records) are checked on the whole plan by
// the gate (gate.go) right before it is sent, whatever the intent did.

// Tree is the outline as the plan sees it now: the snapshot with the
// writes planned so far (earlier steps of a batch, and this intent's own
// writes up to here) applied.
func (p *Planner) Tree() *Tree {
	p.advance()
	return p.t
}

// Node resolves ref (a record key or at:// URI) to a bullet of this
// repository, refusing mirrors (they have no text of their own to change)
// with an *Error the model can act on.
func (p *Planner) Node(ref string) (*Item, error) {
	p.advance()
	return p.node(ref)
}

// Children are parent's children in order (nil parent: the top level).
func (p *Planner) Children(parent *Item) Kids {
	p.advance()
	if parent == nil {
		return p.t.Roots
	}
	return parent.Children
}

// Name is a bullet as summaries show it: its text (shortened) and key;
// nil is "the top level".
func Name(it *Item) string { return named(it) }

// Create plans creating a record of coll with value and returns its record
// key (a TID of this operation: a re-plan after a conflict mints the same
// keys in the same order). label names the input it came from
// ("nodes[0]"), for errors and the result's created list; "" for none.
func (p *Planner) Create(coll string, value map[string]any, label string) string {
	rkey := p.newKey()
	p.create(coll, rkey, value, label)
	return rkey
}

// CreateAt plans creating a record of coll at record key rkey: a note,
// whose key is its bullet's (a note created with its bullet is written in
// the bullet's commit: cutBatches keeps writes of one key together when they are
// adjacent, so plan the note right after its bullet).
func (p *Planner) CreateAt(coll, rkey string, value map[string]any, label string) {
	p.create(coll, rkey, value, label)
}

// Update plans replacing rec's value by value (a copy: use Copy to start
// from rec's). A value equal to the one there is no write at all.
func (p *Planner) Update(rec store.Record, value map[string]any, label string) {
	p.update(rec, value, label)
}

// Delete plans deleting rec. Deleting a bullet that keeps children is
// refused when the plan is finished (no cascade): delete or move them too.
func (p *Planner) Delete(rec store.Record, label string) { p.delete(rec, label) }

// Place returns sortKeys for n new bullets at index at of sibs (0: first,
// sibs.Len(): last), planning new keys for siblings when there is no room
// between their neighbours.
func (p *Planner) Place(sibs Kids, at, n int) ([]string, error) { return p.place(sibs, at, n) }

// Reorder plans the fewest sortKey writes that put kids (a sibling list in
// its present order) in the order of sorted (the same items): the longest
// run already in the new order keeps its keys; the others get keys between
// their new neighbours. It returns how many were rewritten.
func (p *Planner) Reorder(kids, sorted []*Item) (int, error) {
	keys, err := rekey(kids, sorted)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range sorted {
		if k, ok := keys[it]; ok {
			v := it.Rec.Value.Map()
			v["sortKey"] = k
			p.update(it.Rec, v, "")
			n++
		}
	}
	return n, nil
}

// Facets sets v's facets for text: mentions (resolved to DIDs when the
// engine has a resolver; the result says when one could not be), links
// and tags, as the app reads them.
func (p *Planner) Facets(v map[string]any, text string) { p.facets(v, text) }

// Refacet sets the text of v, a record's value as it was, and its facets
// for that text, as Facets does; a mention v already carried keeps its DID
// (no lookup), and one it held as plain text is not said again.
func (p *Planner) Refacet(v map[string]any, text string) { p.refacet(v, text) }

// Summary sets the plan's one-line summary (the last intent of a batch to
// set it wins; Batch joins them).
func (p *Planner) Summary(format string, args ...any) { p.summary(format, args...) }

// Note adds a diagnostic the result shows: what was guessed, ignored or
// kept.
func (p *Planner) Note(format string, args ...any) { p.note(format, args...) }

// Review adds a note only a dry run shows: an example, bullet by bullet,
// of what the plan changes (the landed write's result gives the counts).
func (p *Planner) Review(format string, args ...any) {
	p.review(format, args...)
}

// Touch marks a bullet whose neighbourhood the result shows.
func (p *Planner) Touch(rkey string) { p.touch(rkey) }

// Stamp is the operation's timestamp for createdAt and completedAt (one
// per operation, so a re-plan writes the same values).
func (p *Planner) Stamp() string { return p.stamp() }

// NodeURI is the at:// URI of this repository's bullet rkey (for parent
// and original fields).
func (p *Planner) NodeURI(rkey string) string {
	return "at://" + p.t.DID.String() + "/" + lexicon.Node + "/" + rkey
}

// Position is where new or moved bullets go: after a sibling, or
// first/last under a parent. Parent "" keeps the default (the top level,
// or current for Target); "top" is the top level; a parent may be a record
// key or an at:// URI (of this repository, or of another identity's
// outline: see SharedParent).
type Position struct {
	Parent string
	After  string
	Where  string // "first" | "last" (default)
}

// Target resolves pos among this repository's bullets to the parent (nil:
// the top level), its children in order less those in exclude (bullets
// being moved there), and the index in that list pos names (the new
// bullets go before sibs.At(at); sibs.Len(): last). current is the parent when
// pos names none. A missing parent is ErrParentMissing, a mirror as parent
// ErrInvalidInput, an anchor that is not a child of the parent
// ErrAnchorMissing (its next step lists the children). An anchor is found
// by binary search in sibling order, so Target costs O(log n) in the
// sibling list, plus a copy of it when exclude is not empty.
func (p *Planner) Target(pos Position, current *Item, exclude map[*Item]bool) (parent *Item, sibs Kids, at int, err error) {
	p.advance()
	return p.target(pos, current, exclude)
}

// Reparent plans one update putting it under parent (nil: the top level)
// at sortKey, keeping every other field of its record, and marks it
// touched. The gate refuses a parent that is it or inside its subtree.
func (p *Planner) Reparent(it, parent *Item, sortKey, label string) {
	p.reparent(it, parent, sortKey, label)
}

// ParentURI is the value of a parent field naming parent ("" for the top
// level: the field is then left out).
func (p *Planner) ParentURI(parent *Item) string { return p.parentURI(parent) }

// Original is the node of this repository that mirror m renders (through
// mirrors of mirrors), nil when it renders another repository's bullet or
// nothing.
func (p *Planner) Original(m *Item) *Item {
	p.advance()
	return p.t.Nodes.Get(mirrorOriginal(p.t, m))
}

// SharedParent returns the bullet of another identity's outline pos names
// as parent when that outline admits this identity as a contributor there
// (with the bullets shown under it), nil when pos's parent is not another
// repository's bullet (or the engine reads no other repository: the gate
// then refuses it as any parent elsewhere). Not admitted is ErrCrossRepo;
// the owner's repository unreadable is ErrUnavailable.
func (p *Planner) SharedParent(pos Position) (*Shared, error) { return p.sharedParent(pos) }

// KeptShared returns the shared parent that items (detached here: their
// parent is in another repository) all hang under, when it admits this
// identity; nil otherwise.
func (p *Planner) KeptShared(items []*Item) (*Shared, error) { return p.keptShared(items) }

// SharedSpot resolves pos under a shared parent: the bullets shown there
// less those whose URIs are in skip (bullets being moved there), and the
// index pos names.
func (p *Planner) SharedSpot(sh *Shared, pos Position, skip map[string]bool) ([]SharedSibling, int, error) {
	return p.sharedAt(sh, pos, skip)
}

// SharedKeys returns n sortKeys for bullets placed at pos under a shared
// parent (leaving out skip), between the neighbours as they are: nobody
// else's record is ever rewritten, so no room is ErrInvalidInput. It
// admits sh.Parent as a parent for this plan (the gate lets a node hang
// there).
func (p *Planner) SharedKeys(sh *Shared, pos Position, n int, skip map[string]bool) ([]string, error) {
	return p.sharedKeys(sh, pos, n, skip)
}

// CheckContributions refuses moving items to pos when one of them is this
// identity's contribution to another's shared outline and the move would
// pull it out (ErrCrossRepo), or when its parent's repository cannot be
// read now to tell (ErrUnavailable).
func (p *Planner) CheckContributions(items []*Item, pos Position) error {
	p.advance()
	return p.guardContributions(items, pos)
}

// Fail is an *Error of kind (one of the Err… sentinels) with what went
// wrong and the next step the model can take.
func Fail(kind error, next, format string, args ...any) error {
	return fail(kind, next, format, args...)
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
				// no key without a space fits between the kept
				// neighbours (another client's "a" and "a!"): every
				// item takes a fresh key
				return respaceAll(sorted)
			}
		}
		for q := i; q < j; q++ {
			out[sorted[q]] = ks[q-i]
		}
		i = j
	}
	return out, nil
}

// respaceAll gives every item of sorted a fresh key, in that order.
func respaceAll(sorted []*Item) (map[*Item]string, error) {
	ks, err := order.Spread("", "", len(sorted))
	if err != nil {
		return nil, err
	}
	out := make(map[*Item]string, len(sorted))
	for i, it := range sorted {
		out[it] = ks[i]
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
