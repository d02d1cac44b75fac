package outline

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Undo rolls back operations: the newest steps operations (done or
// incomplete, not undone), or the one named id. Exactly what landed is
// reversed, if every record it wrote is still as it left it; a node that
// gained children since is not deleted (the undo is refused and says so).
// The undo is itself an operation: resumable if it stops part-way.
func (e *Engine) Undo(ctx context.Context, steps int, id string, dryRun bool) (*Outcome, error) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	stack, err := e.undoStack(ctx, steps, id)
	if err != nil {
		return nil, err
	}
	s, err := e.Repo.Snapshot(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	targets, ids := undoTargets(s, stack)
	if err := targets.changedSince(s); err != nil {
		return nil, err
	}
	ws, prev := targets.writes()
	if err := keptChildren(s, ws); err != nil {
		return nil, err
	}
	if err := undoMirrorCycle(s, ws); err != nil {
		return nil, err
	}
	summary := "undo " + strings.Join(ids, ", ")
	for _, op := range stack {
		summary += "; undid: " + strings.TrimSuffix(op.Summary, ".")
	}
	plan := &Plan{Writes: ws, Prev: prev, Cost: store.Cost(ws), Summary: summary, Batches: Cut(ws)}
	out := &Outcome{Plan: plan, DryRun: dryRun, BudgetLeft: e.budgetLeft(ctx)}
	if len(ws) == 0 {
		out.NoChange = true
		if !dryRun {
			e.markUndone(ctx, ids)
		}
		return out, nil
	}
	if dryRun {
		return out, nil
	}
	keys := e.nextKeys()
	op := &Operation{ID: keys.clock.Next().String(), DID: e.Repo.DID().String(), Summary: summary, Started: e.Now(),
		State: OpPlanned, Writes: ws, Prev: prev, Batches: plan.Batches, Undoes: ids}
	commits, err := e.execute(ctx, op, s.Commit)
	out.Commits = commits
	out.BudgetLeft = e.budgetLeft(ctx)
	if errors.Is(err, errReplan) {
		return nil, fail(ErrConflict, "call undo again", "the repository changed while undoing; nothing was written")
	}
	if err != nil {
		return out, err
	}
	rep := op.Report()
	out.Op = &rep
	return out, nil
}

// undoStack picks the operations to undo, newest first: the newest steps
// (done or incomplete, not undone, not being committed now), or the one
// named id.
func (e *Engine) undoStack(ctx context.Context, steps int, id string) ([]*Operation, error) {
	all, err := e.ops.list(ctx)
	if err != nil {
		return nil, err
	}
	var stack []*Operation
	for i := len(all) - 1; i >= 0; i-- {
		op := all[i]
		if len(op.Undoes) > 0 || op.State == OpUndone {
			continue
		}
		if op.State == OpRunning {
			continue // list has it running only while its claim is held
		}
		if id != "" {
			if op.ID == id {
				stack = []*Operation{op}
				break
			}
			continue
		}
		stack = append(stack, op)
	}
	if id != "" && len(stack) == 0 {
		return nil, fail(ErrNodeNotFound, "call operations to see what can be undone", "no operation %s that can be undone", id)
	}
	if steps < 1 {
		steps = 1
	}
	if id == "" {
		if steps > len(stack) {
			return nil, fail(ErrInvalidInput, "call operations to see them", "only %d operation(s) can be undone", len(stack))
		}
		stack = stack[:steps]
	}
	return stack, nil
}

// undoTarget is one record an undo puts back.
type undoTarget struct {
	coll, rkey string
	cur        bool          // present now (as the newest operation left it)
	want       *store.Record // the state before the oldest operation (nil: absent)
	after      string        // CID the newest operation left ("" = deleted)
	value      store.Value   // the value the newest operation left
}

// undoSet is the records an undo puts back, in the order first met.
type undoSet struct {
	byPath map[string]*undoTarget
	order  []string
}

// undoTargets gathers, from what landed of each operation of stack (newest
// first; an incomplete one's batches found in s), every record to put back:
// as the newest left it and as it was before the oldest. It returns them
// and the operations' ids.
func undoTargets(s *store.Snapshot, stack []*Operation) (*undoSet, []string) {
	set := &undoSet{byPath: map[string]*undoTarget{}}
	var ids []string
	for _, op := range stack {
		cp := *op
		if cp.State != OpDone {
			for cp.Landed < len(cp.Batches) && batchLanded(s, cp.batch(cp.Landed)) {
				cp.Landed++
			}
		}
		ids = append(ids, cp.ID)
		for i := cp.landedWrites() - 1; i >= 0; i-- {
			w := cp.Writes[i]
			path := w.Collection + "/" + w.RKey
			t, seen := set.byPath[path]
			if !seen {
				t = &undoTarget{coll: w.Collection, rkey: w.RKey, cur: w.Op != store.Delete}
				if w.Op != store.Delete {
					t.value = store.PlannedValue(w.Value)
					t.after = t.value.CID()
				}
				set.byPath[path] = t
				set.order = append(set.order, path)
			}
			t.want = cp.Prev[i]
		}
	}
	return set, ids
}

// changedSince refuses (conflict) when a record to put back is not as the
// newest operation left it in s.
func (set *undoSet) changedSince(s *store.Snapshot) error {
	idx := index(s)
	var changed []string
	for _, path := range set.order {
		t := set.byPath[path]
		got, ok := idx[path]
		if ok != t.cur || (ok && got != t.after) {
			changed = append(changed, path)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	if len(changed) > 10 {
		changed = append(changed[:10], fmt.Sprintf("… %d more", len(changed)-10))
	}
	return fail(ErrConflict, "read the outline and fix it by hand with the edit tools", "cannot undo: %d record(s) changed since (%s)", len(changed), strings.Join(changed, ", "))
}

// writes are the undo's writes, and the record each replaces.
func (set *undoSet) writes() ([]store.Write, []*store.Record) {
	var ws []store.Write
	var prev []*store.Record
	for _, path := range set.order {
		t := set.byPath[path]
		var cur *store.Record
		if t.cur {
			cur = &store.Record{Collection: t.coll, RKey: t.rkey, CID: t.after, Value: t.value}
		}
		switch {
		case t.cur && t.want != nil:
			ws = append(ws, store.Write{Op: store.Update, Collection: t.coll, RKey: t.rkey, Value: t.want.Value.Map()})
		case t.cur:
			ws = append(ws, store.Write{Op: store.Delete, Collection: t.coll, RKey: t.rkey})
		case t.want != nil:
			ws = append(ws, store.Write{Op: store.Create, Collection: t.coll, RKey: t.rkey, Value: t.want.Value.Map()})
		default:
			continue
		}
		prev = append(prev, cur)
	}
	return ws, prev
}

// keptChildren refuses (has_children) an undo that would delete a node
// which gained children it does not delete too.
func keptChildren(s *store.Snapshot, ws []store.Write) error {
	deleting := map[string]bool{}
	for _, w := range ws {
		if w.Op == store.Delete && w.Collection == lexicon.Node {
			deleting[w.RKey] = true
		}
	}
	if len(deleting) == 0 {
		return nil
	}
	var kept []string
	for _, r := range s.Records {
		if (r.Collection == lexicon.Node || r.Collection == lexicon.Mirror) && !(deleting[r.RKey] && r.Collection == lexicon.Node) {
			if pk := sameRepoParent(s.DID.String(), r.Value.Str("parent")); pk != "" && deleting[pk] {
				if r.Collection == lexicon.Mirror || !deleting[r.RKey] {
					kept = append(kept, fmt.Sprintf("%s (under %s)", r.RKey, pk))
				}
			}
		}
	}
	if len(kept) == 0 {
		return nil
	}
	return fail(ErrHasChildren, "move those bullets elsewhere (move_node) first, then undo again", "cannot undo: it would delete bullets that gained children since: %s", strings.Join(kept, ", "))
}

// undoMirrorCycle refuses (cycle) an undo that would put a mirror back
// inside its own original's subtree (an older operation undone alone,
// around later moves).
func undoMirrorCycle(s *store.Snapshot, ws []store.Write) error {
	if !undoTouchesMirrors(ws, s) {
		return nil
	}
	before := Build(s)
	err := NewMirrorCycle(before, before.Next(s.Commit, s.Rev, WriteChanges(ws)))
	var oe *Error
	if errors.As(err, &oe) {
		oe.Msg = "cannot undo: " + oe.Msg
		oe.Next = "move the mirror (or the bullets around it) elsewhere first, then undo again"
	}
	return err
}

// undoTouchesMirrors reports whether undo writes ws could make a mirror
// render inside its own original: they write a mirror, or move nodes while
// the repository has mirrors.
func undoTouchesMirrors(ws []store.Write, s *store.Snapshot) bool {
	nodes := false
	for _, w := range ws {
		switch {
		case w.Op == store.Delete:
		case w.Collection == lexicon.Mirror:
			return true
		case w.Collection == lexicon.Node:
			nodes = true
		}
	}
	if !nodes {
		return false
	}
	for _, r := range s.Records {
		if r.Collection == lexicon.Mirror {
			return true
		}
	}
	return false
}
