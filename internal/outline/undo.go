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
	// the kept tree, brought to the repository's commit: an undo costs what
	// it puts back, not a whole snapshot
	t, err := e.Tree(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	targets, ids := undoTargets(t, stack)
	if err := targets.changedSince(t); err != nil {
		return nil, err
	}
	ws, prev, held := targets.writes()
	summary := "undo " + strings.Join(ids, ", ")
	for _, op := range stack {
		summary += "; undid: " + strings.TrimSuffix(op.Summary, ".")
	}
	plan := &Plan{Writes: ws, Prev: prev, Cost: store.Cost(ws), Summary: summary, Batches: cutBatches(ws), Undoes: ids,
		Shared: restoredForeignParents(t, ws), held: held}
	out := &Outcome{Plan: plan, DryRun: dryRun, Before: t, BudgetLeft: e.budgetLeft(ctx)}
	if len(ws) == 0 {
		out.NoChange = true
		if !dryRun {
			e.markUndone(ctx, ids)
		}
		return out, nil
	}
	if plan.Verdict, err = gate(t, plan); err != nil {
		var oe *Error
		if errors.As(err, &oe) {
			oe.Msg = "cannot undo: " + oe.Msg
			switch {
			case errors.Is(err, ErrHasChildren):
				oe.Next = "move those bullets elsewhere (move_node) first, then undo again"
			case errors.Is(err, ErrCycle):
				oe.Next = "move the mirror (or the bullets around it) elsewhere first, then undo again"
			default:
				oe.Next = "read the outline and fix it by hand with the edit tools"
			}
		}
		return nil, err
	}
	if dryRun {
		return out, nil
	}
	keys := e.nextKeys()
	if needsConfirm(ctx, plan.Verdict, "", out.BudgetLeft) {
		pid, _ := e.keepPlan(UndoRequest{Steps: steps, Operation: id}, t, plan, keys, e.Now()) // "": cannot be confirmed, and the caller says so
		return nil, &ConfirmNeeded{PlanID: pid, Verdict: plan.Verdict, Summary: summary, Left: out.BudgetLeft}
	}
	op := &Operation{ID: keys.clock.Next().String(), DID: e.Repo.DID().String(), Summary: summary, Started: e.Now(),
		State: opPlanned, Writes: ws, Prev: prev, Batches: plan.Batches, Undoes: ids}
	commits, err := e.execute(ctx, op, t.Commit)
	out.Commits = commits
	out.BudgetLeft = e.budgetLeft(ctx)
	if errors.Is(err, errReplan) {
		return nil, fail(ErrConflict, "call undo again", "the repository changed while undoing; nothing was written")
	}
	if err != nil {
		return out, err
	}
	rep := op.report()
	out.Op = &rep
	return out, nil
}

// UndoRequest names an undo (the newest Steps operations, or the one
// named Operation) as the intent of a plan kept for the person's
// confirmation: Apply(ctx, id, UndoRequest{…}) commits that plan. It plans
// nothing itself: undo is planned by Engine.Undo.
type UndoRequest struct {
	Steps     int    `json:"steps,omitempty"`
	Operation string `json:"operation,omitempty"`
}

// Plan implements Intent: an undo cannot be planned through the kit.
func (UndoRequest) Plan(*Planner) error {
	return fail(ErrInvalidInput, "call operations with undo", "an undo is planned by the engine's Undo, not as an intent")
}

// restoredForeignParents are the parents in other repositories that an
// undo's writes put back (contributions that were admitted when first
// written).
func restoredForeignParents(t *Tree, ws []store.Write) map[string]bool {
	var m map[string]bool
	for _, w := range ws {
		if w.Collection != lexicon.Node || w.Op == store.Delete {
			continue
		}
		if pa := parentOf(w.Value); pa != "" && sameRepoParent(t.DID.String(), pa) == "" && strings.HasPrefix(pa, "at://") {
			if m == nil {
				m = map[string]bool{}
			}
			m[pa] = true
		}
	}
	return m
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
		return nil, fail(ErrOperationMissing, "call operations to see what can be undone", "no operation %s that can be undone", id)
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
	// listed operations may be light: the ones undone are read whole
	for i, op := range stack {
		if stack[i], err = e.ops.full(ctx, op); err != nil {
			return nil, err
		}
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
func undoTargets(t *Tree, stack []*Operation) (*undoSet, []string) {
	set := &undoSet{byPath: map[string]*undoTarget{}}
	var ids []string
	for _, op := range stack {
		cp := *op
		if cp.State != OpDone {
			for cp.Landed < len(cp.Batches) && landedIn(t, cp.batch(cp.Landed)) {
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
// newest operation left it in t.
func (set *undoSet) changedSince(t *Tree) error {
	var changed []string
	for _, path := range set.order {
		u := set.byPath[path]
		r, ok := t.Record(u.coll, u.rkey)
		if ok != u.cur || (ok && r.CID != u.after) {
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

// writes are the undo's writes, the record each replaces, and the CID of
// the record each puts back as the repository held it ("": a delete; see
// Plan.held).
func (set *undoSet) writes() ([]store.Write, []*store.Record, []string) {
	var ws []store.Write
	var prev []*store.Record
	var held []string
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
		h := ""
		if t.want != nil {
			h = t.want.CID
		}
		held = append(held, h)
	}
	return ws, prev, held
}

// landedIn reports whether batch is in t (batchLanded on the kept tree).
func landedIn(t *Tree, batch []store.Write) bool {
	for _, w := range batch {
		if w.Op == store.Create {
			_, ok := t.Record(w.Collection, w.RKey)
			return ok
		}
	}
	for _, w := range batch {
		r, ok := t.Record(w.Collection, w.RKey)
		if w.Op == store.Delete {
			if ok {
				return false
			}
			continue
		}
		want, err := store.RecordCID(w.Value)
		if err != nil || !ok || r.CID != want {
			return false
		}
	}
	return true
}
