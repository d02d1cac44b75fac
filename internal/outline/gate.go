package outline

import (
	"errors"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// The gate. Every plan, whatever made it (an intent, an intent written
// with the kit alone, a batch, a dry run's kept plan applied later, an
// accepted confirmation, undo, resume), passes this one check right before
// it is sent, against the tree of the commit it is swapped onto: for a kept
// plan, undo and resume, the repository as it is then, not as it was when
// the plan was made. A plan that breaks a rule is refused whole with an
// *Error of a kind the model can act on, and nothing is written.
//
// The rules, on the outline as it would be after the plan:
//
//  1. every node or mirror the plan creates or re-parents hangs under a
//     parent that exists (a node of this repository, or a parent in
//     another repository the plan was admitted to write under), and not
//     under itself or one of its own descendants (no cycle);
//  2. no bullet is left without its parent: every child of a deleted node
//     is deleted or re-parented by the plan too (delete's children=lift
//     or subtree ask for that), and a deleted node takes its note and the
//     comment policies and outline records rooted at it along;
//  3. a note shares its node's record key and that node exists; a note
//     created with its node is in the node's commit (cutBatches keeps co-keyed
//     writes together); a comment policy's and an outline record's root
//     (other than the repository's "self") is a bullet of this repository
//     that exists;
//  4. no mirror renders inside its own original's subtree;
//  5. siblings' sortKeys stay strictly ordered: nothing the plan places
//     ties with a sibling, and every sortKey is at most 512 bytes;
//  6. every record the plan writes is valid by the lexicons, and the
//     repository stays within lexicon.MaxRepoRecords records.
//
// The gate also counts what the plan removes and moves (Verdict): the one
// place where a write's confirmation is decided (confirm.go).

// Verdict is what the gate counted in a plan it let through.
type Verdict struct {
	Bullets int // nodes deleted
	Mirrors int // mirrors deleted
	Notes   int // notes deleted
	Moved   int // nodes and mirrors whose parent or sortKey changes
	Writes  int
	Cost    int
}

// Removed is the rows a person sees go: bullets and mirrors deleted.
func (v Verdict) Removed() int { return v.Bullets + v.Mirrors }

// gateView is the outline as it would be after a plan, read through the
// tree and the plan's writes without building it.
type gateView struct {
	t      *Tree
	writes map[recPath]int // index in plan.Writes
	plan   *Plan
}

// recPath names a record.
type recPath struct{ coll, rkey string }

func newGateView(t *Tree, plan *Plan) *gateView {
	g := &gateView{t: t, plan: plan, writes: make(map[recPath]int, len(plan.Writes))}
	for i, w := range plan.Writes {
		g.writes[recPath{w.Collection, w.RKey}] = i
	}
	return g
}

// write is the plan's write of coll/rkey, if it has one.
func (g *gateView) write(coll, rkey string) (store.Write, bool) {
	i, ok := g.writes[recPath{coll, rkey}]
	if !ok {
		return store.Write{}, false
	}
	return g.plan.Writes[i], true
}

// exists reports whether coll/rkey is there after the plan.
func (g *gateView) exists(coll, rkey string) bool {
	if w, ok := g.write(coll, rkey); ok {
		return w.Op != store.Delete
	}
	_, ok := g.t.Record(coll, rkey)
	return ok
}

// nodeParent is node rkey's parent field after the plan, and whether the
// node is there.
func (g *gateView) nodeParent(rkey string) (string, bool) {
	if w, ok := g.write(lexicon.Node, rkey); ok {
		if w.Op == store.Delete {
			return "", false
		}
		return parentOf(w.Value), true
	}
	it := g.t.Nodes.Get(rkey)
	if it == nil {
		return "", false
	}
	return it.Str("parent"), true
}

// placed is where item coll/rkey hangs after the plan (its parent field
// and sortKey), and whether it is there.
func (g *gateView) placed(coll, rkey string) (parent, sortKey string, ok bool) {
	if w, found := g.write(coll, rkey); found {
		if w.Op == store.Delete {
			return "", "", false
		}
		sk, _ := w.Value["sortKey"].(string)
		return parentOf(w.Value), sk, true
	}
	m := &g.t.Nodes
	if coll == lexicon.Mirror {
		m = &g.t.Mirrors
	}
	it := m.Get(rkey)
	if it == nil {
		return "", "", false
	}
	return it.Str("parent"), it.SortKey(), true
}

// gateFail is the gate's refusal: what rule the plan breaks, that nothing
// was written, and what to do.
func gateFail(kind error, next, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...) + "; nothing was written", Next: next}
}

// gate checks plan against the rules on the outline t as it would be after
// the plan (see the comment at the top of this file), and counts what it
// removes and moves. Every way of committing a plan calls it right before
// the first batch is sent; a dry run calls it on the plan it shows.
func gate(t *Tree, plan *Plan) (Verdict, error) {
	v := Verdict{Writes: len(plan.Writes), Cost: store.Cost(plan.Writes)}
	if len(plan.Writes) == 0 {
		return v, nil
	}
	g := newGateView(t, plan)
	did := t.DID.String()
	batches := plan.Batches
	if len(batches) == 0 {
		batches = cutBatches(plan.Writes)
	}
	batchOf := func(i int) int { return sort.SearchInts(batches, i+1) }

	creates, deletes := 0, 0
	reparented := []string{}             // nodes whose parent the plan sets (rule 1's cycle walk)
	placedUnder := map[string][]int{}    // parent field → writes placing a bullet there (rule 5)
	mirrorsMatter := t.Mirrors.Len() > 0 // a node moving can put a mirror inside its original
	mirrorWrite, nodeMove := false, false
	for i, w := range plan.Writes {
		switch w.Op {
		case store.Create:
			creates++
		case store.Delete:
			deletes++
		}
		switch w.Collection {
		case lexicon.Node, lexicon.Mirror:
			if w.Op == store.Delete {
				if w.Collection == lexicon.Node {
					v.Bullets++
				} else {
					v.Mirrors++
				}
				continue
			}
			cur, curOK := t.Record(w.Collection, w.RKey)
			if w.Collection == lexicon.Mirror {
				mirrorWrite = true
			}
			pa := parentOf(w.Value)
			sk, _ := w.Value["sortKey"].(string)
			curPa, curSK := "", ""
			if curOK {
				curPa, _ = cur.Value.Text("parent")
				curSK, _ = cur.Value.Text("sortKey")
			}
			if len(sk) > 512 {
				return v, gateFail(ErrInvalidInput, "report this plan: its sortKeys come from package order and are never this long", "%s %s: sortKey of %d bytes (at most 512)", shortColl(w.Collection), w.RKey, len(sk))
			}
			if curOK && w.Op != store.Create && (pa != curPa || sk != curSK) {
				v.Moved++
			}
			if !curOK || pa != curPa || sk != curSK {
				placedUnder[pa] = append(placedUnder[pa], i)
			}
			if curOK && pa == curPa && w.Op != store.Create {
				continue // the parent is kept: nothing of rule 1 to check
			}
			if w.Collection == lexicon.Node {
				nodeMove = true
			}
			if pa == "" {
				continue // the top level
			}
			pk := sameRepoParent(did, pa)
			if pk == "" {
				continue // another repository (admitted or not: validation decides) or not a node URI (validation refuses)
			}
			if _, ok := g.nodeParent(pk); !ok {
				why := "does not exist (deleted since the plan was made, or never there)"
				if pw, planned := g.write(lexicon.Node, pk); planned && pw.Op == store.Delete {
					why = "is deleted by the same plan"
				}
				return v, gateFail(ErrParentMissing, "read the outline and plan again under a bullet that exists",
					"%s %s would hang under %s, which %s", shortColl(w.Collection), w.RKey, pk, why)
			}
			if w.Collection == lexicon.Node {
				reparented = append(reparented, w.RKey)
			}
		case lexicon.Note:
			if w.Op == store.Delete {
				v.Notes++
				continue
			}
			nw, planned := g.write(lexicon.Node, w.RKey)
			if !g.exists(lexicon.Node, w.RKey) {
				return v, gateFail(ErrInvalidInput, "a note belongs to the bullet of the same record key: create or keep that bullet with it",
					"note %s has no bullet %s to belong to", w.RKey, w.RKey)
			}
			if planned && nw.Op == store.Create && w.Op == store.Create {
				if batchOf(g.writes[recPath{lexicon.Node, w.RKey}]) != batchOf(i) {
					return v, gateFail(ErrInvalidInput, "report this plan: a bullet and its note must be created in one commit",
						"note %s would be created in another commit than its bullet", w.RKey)
				}
			}
		case lexicon.CommentPolicy, lexicon.Outline:
			if w.Op == store.Delete || w.RKey == "self" {
				continue
			}
			root, _ := w.Value["root"].(string)
			if root == "" {
				root = t.NodeURI(w.RKey) // the older form: keyed by its bullet
			}
			pk := sameRepoParent(did, root)
			if pk == "" {
				return v, gateFail(ErrCrossRepo, "set it on a bullet of this repository",
					"%s %s is rooted at %s, which is not a bullet of this repository", shortColl(w.Collection), w.RKey, root)
			}
			if !g.exists(lexicon.Node, pk) {
				return v, gateFail(ErrParentMissing, "set it on a bullet that exists",
					"%s %s is rooted at bullet %s, which is not there after the plan", shortColl(w.Collection), w.RKey, pk)
			}
		}
	}

	// rule 2: deleted nodes take their children (deleted or re-parented)
	// and their note and rooted records along
	var deletedNodes []string
	known := plan.itemsOn(t) // the items the planner found, when t is its tree
	for i, w := range plan.Writes {
		if w.Op != store.Delete || w.Collection != lexicon.Node {
			continue
		}
		var it *Item
		if known != nil && known[i] != nil && known[i].Rec.RKey == w.RKey && !known[i].Mirror {
			it = known[i]
		} else {
			it = t.Nodes.Get(w.RKey)
		}
		if it == nil {
			continue
		}
		var kept []string
		for c := range it.Children.Items() {
			coll := lexicon.Node
			if c.Mirror {
				coll = lexicon.Mirror
			}
			pa, _, there := g.placed(coll, c.Key())
			if there && sameRepoParent(did, pa) == w.RKey {
				kept = append(kept, c.Key())
			}
		}
		if len(kept) > 0 {
			if len(kept) > 5 {
				kept = append(kept[:5], fmt.Sprintf("… %d more", len(kept)-5))
			}
			return v, gateFail(ErrHasChildren, "delete them too (children=subtree), lift them (children=lift), or move them elsewhere first",
				"deleting %s would leave %s without a parent", w.RKey, strings.Join(kept, ", "))
		}
		if it.Note != nil && g.exists(lexicon.Note, w.RKey) { // the item carries its note
			return v, gateFail(ErrInvalidInput, "delete the bullet's note with it",
				"bullet %s would be deleted but its note kept", w.RKey)
		}
		deletedNodes = append(deletedNodes, w.RKey)
	}
	if len(deletedNodes) > 0 && t.Outlines.Len()+t.Policies.Len() > 0 {
		gone := make(map[string]bool, len(deletedNodes))
		for _, k := range deletedNodes {
			gone[t.NodeURI(k)] = true
		}
		for _, m := range []*Map[store.Record]{&t.Outlines, &t.Policies} {
			for k, r := range m.All() {
				root, _ := r.Value.Text("root")
				if root == "" && k != "self" {
					root = t.NodeURI(k)
				}
				if gone[root] && g.exists(r.Collection, r.RKey) {
					return v, gateFail(ErrInvalidInput, "delete the records rooted at a bullet with it",
						"bullet %s would be deleted but %s %s, rooted at it, kept", sameRepoParent(did, root), shortColl(r.Collection), r.RKey)
				}
			}
		}
	}

	// rule 1: no node under itself or its own descendants
	for _, k := range reparented {
		pa, _ := g.nodeParent(k)
		cur := sameRepoParent(did, pa)
		var seen map[string]bool // past a deep walk: a cycle elsewhere ends it
		for steps := 0; cur != ""; steps++ {
			if cur == k {
				return v, gateFail(ErrCycle, "place it outside its own subtree",
					"bullet %s would hang inside its own subtree", k)
			}
			if steps >= 64 {
				if seen == nil {
					seen = map[string]bool{}
				}
				if seen[cur] {
					break // a cycle elsewhere, already there (its bullets are listed as detached)
				}
				seen[cur] = true
			}
			p, ok := g.nodeParent(cur)
			if !ok {
				break // an ancestor is missing: detached before the plan, not by it
			}
			cur = sameRepoParent(did, p)
		}
	}

	// rule 5: no sortKey the plan places ties with a sibling's
	for pa, idx := range placedUnder {
		seen := make(map[string]string, len(idx))
		for _, i := range idx {
			w := plan.Writes[i]
			sk, _ := w.Value["sortKey"].(string)
			if other, dup := seen[sk]; dup {
				return v, gateFail(ErrConflict, "read the outline and plan again",
					"%s and %s would have the same sortKey %q under %s", other, w.RKey, sk, orTop(pa))
			}
			seen[sk] = w.RKey
		}
		var sibs Kids
		switch pk := sameRepoParent(did, pa); {
		case pa == "":
			sibs = t.Roots
		case pk != "":
			if p := t.Nodes.Get(pk); p != nil {
				sibs = p.Children
			}
		}
		if sibs.Len() == 0 {
			continue
		}
		for _, i := range idx {
			w := plan.Writes[i]
			sk, _ := w.Value["sortKey"].(string)
			j, _ := sibs.SearchFunc(func(s *Item) int { return strings.Compare(s.SortKey(), sk) })
			for ; j < sibs.Len() && sibs.At(j).SortKey() == sk; j++ {
				s := sibs.At(j)
				coll := lexicon.Node
				if s.Mirror {
					coll = lexicon.Mirror
				}
				if coll == w.Collection && s.Key() == w.RKey {
					continue
				}
				if spa, ssk, there := g.placed(coll, s.Key()); !there || spa != pa || ssk != sk {
					continue // moved away, re-keyed or deleted by the plan
				}
				return v, gateFail(ErrConflict, "read the outline and plan again: the siblings changed since the plan was made",
					"%s %s would tie with %s on sortKey %q under %s", shortColl(w.Collection), w.RKey, s.Key(), sk, orTop(pa))
			}
		}
	}

	// rule 4: no mirror inside its own original's subtree
	if mirrorWrite || (nodeMove && mirrorsMatter) {
		if err := newMirrorCycle(t, t.Next(t.Commit, t.Rev, WriteChanges(plan.Writes))); err != nil {
			return v, err
		}
	}

	// rule 6: the record bound and the lexicons
	if n := t.Count + creates - deletes; creates > 0 && n > lexicon.MaxRepoRecords {
		return v, fail(ErrTooLarge, "delete records first or write fewer", "the plan would take the repository to %s records; the app view's bound is %s; nothing was written", validate.Count(n), validate.Count(lexicon.MaxRepoRecords))
	}
	if err := validateWrites(t, plan); err != nil {
		return v, err
	}
	return v, nil
}

func orTop(parent string) string {
	if parent == "" {
		return "the top level"
	}
	return parent
}

// validateWrites checks every created and updated record against the
// lexicons and the record rules, on every core for a large plan; the error
// is the one of the first invalid write in plan order. A parent in another
// repository passes only when the plan was admitted under it (a
// contribution to a shared outline) or an update keeps the one there.
func validateWrites(t *Tree, plan *Plan) error {
	ws := plan.Writes
	v := validate.Default()
	errs := make([]error, len(ws))
	check := func(i int) {
		w := ws[i]
		if w.Op == store.Delete {
			return
		}
		if i < len(plan.held) && plan.held[i] != "" && store.PlannedValue(w.Value).CID() == plan.held[i] {
			return // put back byte for byte as the repository held it
		}
		u := syntax.ATURI(t.uri(w.Collection, w.RKey))
		var opt validate.Options
		if pa, _ := w.Value["parent"].(string); w.Collection == lexicon.Node && plan.Shared[pa] {
			opt.KeptParent = pa // a contribution, admitted by the owner's outline
		}
		if w.Op == store.Update && (w.Collection == lexicon.Node || w.Collection == lexicon.Mirror) {
			// an edit that keeps a parent in another repository (a
			// contribution to a shared outline) does not make one
			if cur, ok := t.Record(w.Collection, w.RKey); ok {
				if pa, _ := cur.Value.Text("parent"); pa != "" && pa == w.Value["parent"] {
					opt.KeptParent = pa
				}
			}
		}
		errs[i] = v.DataWith(atInts(w.Value).(map[string]any), w.Collection, &u, opt)
	}
	workers := runtime.GOMAXPROCS(0)
	if len(ws) < 256 || workers < 2 {
		for i := range ws {
			check(i)
			if errs[i] != nil {
				break
			}
		}
	} else {
		var wg sync.WaitGroup
		for k := 0; k < workers; k++ {
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				for i := k; i < len(ws); i += workers {
					check(i)
				}
			}(k)
		}
		wg.Wait()
	}
	for i, err := range errs {
		if err == nil {
			continue
		}
		var ve *validate.Error
		if errors.As(err, &ve) {
			if i < len(plan.Labels) && plan.Labels[i] != "" {
				ve = ve.WithPrefix(plan.Labels[i])
			}
			return &Error{Kind: ErrInvalidInput, Msg: ve.Error(), Next: "fix the named field and call again"}
		}
		return err
	}
	return nil
}
