package outline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// cutBatches splits writes into commits of at most store.MaxBatch writes and
// store.MaxBatchBytes of values, never between writes of one record key
// (a node, its note and its policy share a commit). Writes keep their
// order, which the planner makes consistent: parents are created before
// children and deleted after them, so every commit leaves a whole outline.
func cutBatches(writes []store.Write) []int {
	var ends []int
	start, size := 0, 0
	for i := 0; i < len(writes); {
		// the unit: this write and the following writes of the same record key
		j := i + 1
		for j < len(writes) && writes[j].RKey == writes[i].RKey && coKeyed(writes[j].Collection) && coKeyed(writes[i].Collection) {
			j++
		}
		us := 0
		for _, w := range writes[i:j] {
			us += valueSize(w)
		}
		if i > start && (j-start > store.MaxBatch || size+us > store.MaxBatchBytes) {
			ends = append(ends, i)
			start, size = i, 0
		}
		size += us
		i = j
	}
	if len(writes) > start {
		ends = append(ends, len(writes))
	}
	return ends
}

// coKeyed collections share record keys with the node they belong to.
func coKeyed(coll string) bool {
	return coll == lexicon.Node || coll == lexicon.Note || coll == lexicon.CommentPolicy || coll == lexicon.Outline
}

func valueSize(w store.Write) int {
	if w.Value == nil {
		return 64
	}
	b, err := json.Marshal(w.Value)
	if err != nil {
		return 1 << 10
	}
	return len(b) + 96
}

// execute commits op's batches from op.Landed on, starting at commit swap,
// moving it through its lifecycle (lifecycle.go): running before the first
// batch, a step after each, then landed, or stopped (with an *Error of kind
// ErrIncomplete), or forgotten when nothing landed (ErrCancelled, ErrBudget,
// a refusal, or errReplan: plan again).
func (e *Engine) execute(ctx context.Context, op *Operation, swap string) ([]store.Result, error) {
	if ok, err := e.ops.claim(ctx, op.ID); err != nil {
		// the journal did not answer (its database restarting): nothing was
		// sent, nobody commits it; not a conflict to wait out
		return nil, &Error{Kind: ErrUnavailable, Msg: fmt.Sprintf("the operations journal could not claim operation %s: %v", op.ID, err), Next: "nothing was written; retry in a moment"}
	} else if !ok {
		return nil, fail(ErrConflict, "wait for it to finish, then call operations", "operation %s is being committed by another process", op.ID)
	}
	defer e.ops.release(ctx, op.ID)
	// fresh: planned just now, never sent before this call (not resumed)
	fresh := op.State == opPlanned
	remaining := 0
	for _, w := range op.Writes[op.landedWrites():] {
		remaining += store.Cost([]store.Write{w})
	}
	bctx, release, err := e.reserve(ctx, remaining)
	if err != nil {
		return nil, e.stop(ctx, op, err, "the write budget", false)
	}
	defer release()
	// recorded: the record of op planned just now, written while the
	// repository prepares its first batch (its points charged, fsynced
	// too), which leaves only once it is written (sendable:
	// store.SendGated); nil: recorded already
	var sendable, recorded func() error
	if _, gated := e.Repo.(store.SendGated); gated && fresh {
		sendable, recorded = e.ops.moveSoon(ctx, op)
		defer func() {
			if recorded != nil {
				recorded()
			}
		}()
	} else if err := e.ops.move(ctx, op, phaseRunning, step{}); err != nil {
		return nil, err
	}
	progress, _ := ctx.Value(progressKey{}).(Progress)
	var commits []store.Result
	conflicts := 0
	// the change log tells this writer's batches from others' (changelog.go)
	writer, gen := writerOf(ctx), uint64(0)
	defer func() { e.changes.unpend(gen) }()
	for op.Landed < len(op.Batches) {
		e.changes.unpend(gen)
		if ctx.Err() != nil {
			if recorded != nil {
				err := recorded()
				if recorded = nil; err != nil {
					return nil, err
				}
			}
			return commits, e.stop(ctx, op, ctx.Err(), "cancelled by the client", false)
		}
		batch := op.batch(op.Landed)
		if progress != nil && len(op.Batches) > 1 {
			progress(op.Landed, len(op.Batches), op.landedWrites(), len(op.Writes))
		}
		// the batch runs to completion even if the call is cancelled now
		cctx, cancel := context.WithTimeout(context.WithoutCancel(bctx), BatchTimeout)
		// its points are charged once under this key, however often it is sent
		cctx = budget.WithBatch(cctx, batchKey(op, op.Landed))
		gen = e.changes.pend(batch, writer)
		if recorded != nil {
			cctx = store.WithSendGate(cctx, sendable)
		}
		res, err := e.Repo.Apply(cctx, swap, batch)
		cancel()
		if recorded != nil {
			jerr := recorded()
			if recorded = nil; jerr != nil {
				if err == nil { // sent unrecorded: not by a SendGated repository
					e.changes.landed(batch, res.Rev, res.Results, writer)
					op.Landed, op.Commits = op.Landed+1, append(op.Commits, res.Commit)
					return append(commits, *res), e.journalLost(op, jerr)
				}
				return nil, jerr // not sent
			}
		}
		if err == nil {
			e.changes.landed(batch, res.Rev, res.Results, writer)
			commits = append(commits, *res)
			if err := e.landedStep(ctx, op, res.Commit); err != nil {
				return commits, e.journalLost(op, err)
			}
			swap = res.Commit
			continue
		}
		switch {
		case errors.Is(err, store.ErrBatchTooLarge):
			if !op.split(op.Landed) {
				return commits, e.stop(ctx, op, err, "a single record is too large for the repository", false)
			}
			if err := e.ops.move(ctx, op, phaseRunning, step{}); err != nil {
				return commits, e.journalLost(op, err)
			}
			continue
		case errors.Is(err, store.ErrStale) && fresh && op.Landed == 0 && len(op.Undoes) == 0:
			// refused for its swapCommit, nothing of this batch can land and
			// no batch before it was sent: plan again, no read needed here
			// (the next plan's read finds what moved)
			if err := e.ops.move(ctx, op, phaseForgotten, step{}); err != nil {
				return nil, err
			}
			return nil, errReplan
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrRecordExists), errors.Is(err, store.ErrRecordMissing):
			s, rerr := e.Repo.Snapshot(ctx)
			if rerr != nil {
				return commits, e.stop(ctx, op, rerr, "the repository could not be read after a conflict", false)
			}
			if batchLanded(s, batch) {
				e.changes.landed(batch, s.Rev, nil, writer)
				if err := e.landedStep(ctx, op, s.Commit); err != nil {
					return commits, e.journalLost(op, err)
				}
				swap = s.Commit
				continue
			}
			if op.Landed == 0 && !anyLanded(s, op) && len(op.Undoes) == 0 {
				if err := e.ops.move(ctx, op, phaseForgotten, step{}); err != nil {
					return nil, err
				}
				return nil, errReplan
			}
			if problems := checkRemainder(s, op); len(problems) > 0 {
				return commits, e.stop(ctx, op, fmt.Errorf("%w: %s", store.ErrConflict, strings.Join(problems, "; ")), "records it still has to write changed since it was planned", false)
			}
			// bullets still to write go where the plan put them among the
			// siblings as they are now (another client may have written
			// some there): no tied keys, the run kept together
			if n, perr := replace(s, op); perr != nil {
				return commits, e.stop(ctx, op, perr, "a bullet its bullets were placed after is gone", false)
			} else if n > 0 {
				if err := e.ops.move(ctx, op, phaseRunning, step{}); err != nil {
					return commits, e.journalLost(op, err)
				}
			}
			// what is left passes the gate against the repository as it is
			// now (another client may have moved a destination into a
			// bullet this operation moves, say)
			if gerr := e.gateRemainder(ctx, s, op); gerr != nil {
				return commits, e.stop(ctx, op, gerr, "what it still has to write no longer passes the outline's rules", false)
			}
			conflicts++
			fresh = false // what was read decides from now on
			if conflicts > retries*4 {
				return commits, e.stop(ctx, op, err, "the repository kept changing", false)
			}
			if werr := sleepCtx(ctx, backoff(min(conflicts, retries))); werr != nil {
				return commits, e.stop(ctx, op, werr, "cancelled by the client", false)
			}
			swap = s.Commit
			continue
		default:
			// the batch may or may not have landed (timeout, outage):
			// look once, then stop
			unknown := true
			if ctx.Err() == nil {
				if s, rerr := e.Repo.Snapshot(ctx); rerr == nil && batchLanded(s, batch) {
					e.changes.landed(batch, s.Rev, nil, writer)
					if err := e.landedStep(ctx, op, s.Commit); err != nil {
						return commits, e.journalLost(op, err)
					}
					swap = s.Commit
					continue
				} else if rerr == nil {
					unknown = false // read back: it did not land
					if op.Landed == 0 && !anyLanded(s, op) && definite(err) {
						if ferr := e.ops.move(ctx, op, phaseForgotten, step{}); ferr != nil {
							return nil, ferr
						}
						return nil, refusal(err)
					}
				}
			}
			return commits, e.stop(ctx, op, err, "", unknown)
		}
	}
	if op.State != OpDone { // every batch had landed before this call (a resume)
		if err := e.ops.move(ctx, op, phaseLanded, step{}); err != nil {
			return commits, e.journalLost(op, err)
		}
	}
	if len(op.Undoes) > 0 {
		e.markUndone(ctx, op.Undoes)
	}
	e.ops.prune(ctx) // a failure leaves more operations than JournalSize, pruned next time
	e.keepOwn(ctx)
	return commits, nil
}

// landedStep records that op's next batch landed as commit: a step from
// running to running, or, for its last batch, to landed in the same
// record (one append to the journal where there were two).
func (e *Engine) landedStep(ctx context.Context, op *Operation, commit string) error {
	to := phaseRunning
	if op.Landed+1 == len(op.Batches) {
		to = phaseLanded
	}
	return e.ops.move(ctx, op, to, step{landed: []string{commit}})
}

// keepOwn brings the kept tree to the commits a write just made, as part
// of the write, on the embedded store, where that asks nothing of anyone
// (a PDS's followed stream brings its tree forward as the commit arrives):
// the next call (a dry run, a read) does not pay for the write before it.
// A failure leaves it to the next call, as before.
func (e *Engine) keepOwn(ctx context.Context) {
	if _, local := e.Repo.(*store.Local); local {
		e.Tree(ctx)
	}
}

// remainder is what op has still to write, as a plan for the gate.
func remainder(t *Tree, op *Operation) *Plan {
	from := op.landedWrites()
	p := &Plan{Writes: op.Writes[from:], Prev: op.Prev[from:], Shared: restoredForeignParents(t, op.Writes[from:])}
	for _, b := range op.Batches[op.Landed:] {
		p.Batches = append(p.Batches, b-from)
	}
	return p
}

// gateRemainder checks what op has still to write against s (read after a
// conflict between two of its batches) with the gate.
func (e *Engine) gateRemainder(ctx context.Context, s *store.Snapshot, op *Operation) error {
	t, err := e.Tree(ctx)
	if err != nil || t.Commit != s.Commit {
		t = Rebuild(s, t) // the kept tree moved on, or could not be read: the snapshot's
	}
	_, err = gate(t, remainder(t, op))
	return err
}

// journalLost is the answer when the operations journal cannot record op
// after a batch of it was sent: never a plain error that invites a retry
// (the retry would write again what landed), but an incomplete operation
// with what landed, as the repository answered, and what to do. The
// journal is brought in line with the repository by the next resume or
// undo, which find in the repository what landed.
func (e *Engine) journalLost(op *Operation, err error) error {
	op.State = OpIncomplete
	op.Reason = "the operations journal could not record it: " + err.Error()
	rep := op.report()
	rep.Next = fmt.Sprintf("do not repeat the call (what landed would be written twice): once the journal answers again, operations resume=%s finishes it (what landed is read from the repository) or undo operation=%s rolls it back", op.ID, op.ID)
	return &Error{Kind: ErrIncomplete,
		Msg: fmt.Sprintf("operation %s (%s): %d of %d batch(es) landed (%d of %d writes), as the repository answered, but the operations journal could not record it (%v); nothing more was sent",
			op.ID, op.Summary, op.Landed, len(op.Batches), rep.LandedWrites, len(op.Writes), err),
		Next: rep.Next, Data: rep}
}

// definite reports whether err means the batch was refused before it was
// written (so nothing is unknown).
func definite(err error) bool {
	return errors.Is(err, budget.ErrBudget) || errors.Is(err, store.ErrRefused)
}

// refusal is the error of an operation refused before anything landed.
func refusal(err error) error {
	switch {
	case errors.Is(err, budget.ErrBudget):
		return budgetError(err)
	case errors.Is(err, store.ErrRefused):
		return &Error{Kind: ErrNotOwner, Msg: err.Error(), Next: "nothing was written; if the session lacks a permission, run bulleted-mcp login again (it asks for the app.bulleted permission set)"}
	}
	return unavailable(err)
}

// stop leaves op stopped after err (unknown: the batch after the landed
// ones may have landed too) and returns the error to report: an *Error of
// kind ErrIncomplete listing what landed. An operation of which nothing
// landed and nothing can have (never sent: refused its budget or
// cancelled; or not recorded yet) is forgotten and the plain error
// returned.
func (e *Engine) stop(ctx context.Context, op *Operation, err error, why string, unknown bool) error {
	nothing := errors.Is(err, budget.ErrBudget) || errors.Is(err, context.Canceled) || errors.Is(err, ErrBudget)
	if op.Landed == 0 && (nothing || op.State == opPlanned) {
		if ferr := e.ops.move(ctx, op, phaseForgotten, step{}); ferr != nil {
			return ferr
		}
		switch {
		case errors.Is(err, context.Canceled):
			return fail(ErrCancelled, "nothing was written; call again when ready", "cancelled before the first batch was sent")
		case nothing:
			return budgetError(err)
		}
		return unavailable(err)
	}
	reason := why
	if reason == "" {
		reason = err.Error()
	} else {
		reason += ": " + err.Error()
	}
	to := phaseStopped
	if unknown {
		to = phaseUnknown
	}
	if serr := e.ops.move(ctx, op, to, step{reason: reason}); serr != nil {
		reason += " (and the operation record could not be saved: " + serr.Error() + ")"
	}
	rep := op.report()
	msg := fmt.Sprintf("operation %s (%s) stopped after %d of %d batch(es) (%d of %d writes landed): %s", op.ID, op.Summary, op.Landed, len(op.Batches), rep.LandedWrites, len(op.Writes), reason)
	if rep.UnknownWrites > 0 {
		msg += fmt.Sprintf("; the next %d write(s) may have landed too (the repository could not be read back: resume or undo will find out)", rep.UnknownWrites)
	}
	if errors.Is(err, budget.ErrBudget) {
		var ex *budget.Exceeded
		if errors.As(err, &ex) && !ex.FreeAt.IsZero() {
			if ex.WaitSeconds == 0 {
				ex.At(ex.FreeAt, e.Now())
			}
			rep.RetryAt = ex.FreeAt.UTC().Format(time.RFC3339)
			rep.RetryInSeconds = ex.WaitSeconds
			msg += fmt.Sprintf("; it can go on (resume or undo) at %s, in %d s", rep.RetryAt, rep.RetryInSeconds)
		}
	}
	return &Error{Kind: ErrIncomplete, Msg: msg, Next: rep.Next, Data: rep}
}

// snapshot index: path → CID.
func index(s *store.Snapshot) map[string]string {
	m := make(map[string]string, len(s.Records))
	for _, r := range s.Records {
		m[r.Collection+"/"+r.RKey] = r.CID
	}
	return m
}

// batchLanded reports whether batch is in s. A batch is atomic, so one
// create of a key this operation minted tells; a batch without creates
// landed if every write's effect is there.
func batchLanded(s *store.Snapshot, batch []store.Write) bool {
	idx := index(s)
	for _, w := range batch {
		if w.Op == store.Create {
			_, ok := idx[w.Collection+"/"+w.RKey]
			return ok
		}
	}
	return effectsPresent(idx, batch)
}

func effectsPresent(idx map[string]string, ws []store.Write) bool {
	for _, w := range ws {
		got, ok := idx[w.Collection+"/"+w.RKey]
		if w.Op == store.Delete {
			if ok {
				return false
			}
			continue
		}
		want, err := store.RecordCID(w.Value)
		if err != nil || !ok || got != want {
			return false
		}
	}
	return true
}

// anyLanded reports whether any create of op is in s (then some batch of
// it landed, and planning it again could duplicate).
func anyLanded(s *store.Snapshot, op *Operation) bool {
	idx := index(s)
	for _, w := range op.Writes {
		if w.Op == store.Create {
			if _, ok := idx[w.Collection+"/"+w.RKey]; ok {
				return true
			}
		}
	}
	return false
}

// checkRemainder re-checks the writes op has still to send against the
// current snapshot: creates must be absent, updated and deleted records
// unchanged since planning, every parent must still exist (or come with
// the operation), and a node to delete must not have gained children.
func checkRemainder(s *store.Snapshot, op *Operation) []string {
	idx := index(s)
	from := op.landedWrites()
	rest := op.Writes[from:]
	deleting := map[string]bool{}
	creating := map[string]bool{}
	for _, w := range rest {
		switch w.Op {
		case store.Delete:
			deleting[w.Collection+"/"+w.RKey] = true
		case store.Create:
			creating[w.Collection+"/"+w.RKey] = true
		}
	}
	var problems []string
	for k, w := range rest {
		path := w.Collection + "/" + w.RKey
		got, ok := idx[path]
		prev := op.Prev[from+k]
		switch {
		case w.Op == store.Create && ok:
			problems = append(problems, path+" exists already")
		case w.Op != store.Create && !ok:
			problems = append(problems, path+" was deleted meanwhile")
		case w.Op != store.Create && prev != nil && prev.CID != "" && got != prev.CID:
			problems = append(problems, path+" was changed meanwhile")
		}
		if w.Op != store.Delete && (w.Collection == lexicon.Node || w.Collection == lexicon.Mirror) {
			if pk := sameRepoParent(s.DID.String(), parentOf(w.Value)); pk != "" {
				pp := lexicon.Node + "/" + pk
				if _, ok := idx[pp]; (!ok && !creating[pp]) || deleting[pp] {
					problems = append(problems, fmt.Sprintf("%s: its parent %s is gone", path, pk))
				}
			}
		}
		if len(problems) >= 10 {
			break
		}
	}
	if len(deleting) > 0 && len(problems) < 10 {
		for _, r := range s.Records {
			if r.Collection != lexicon.Node && r.Collection != lexicon.Mirror {
				continue
			}
			if deleting[r.Collection+"/"+r.RKey] {
				continue
			}
			if pk := sameRepoParent(s.DID.String(), r.Value.Str("parent")); pk != "" && deleting[lexicon.Node+"/"+pk] {
				problems = append(problems, fmt.Sprintf("%s gained a child (%s) since", pk, r.RKey))
				if len(problems) >= 10 {
					break
				}
			}
		}
	}
	return problems
}

// sameRepoParent is the record key of the parent p when it is a node of
// the repository did, else "".
func sameRepoParent(did string, p string) string {
	prefix := "at://" + did + "/" + lexicon.Node + "/"
	if !strings.HasPrefix(p, prefix) {
		return ""
	}
	return strings.TrimPrefix(p, prefix)
}

// ---- the operations surface: list, resume, undo ----

// Operations returns the recorded operations, newest first.
func (e *Engine) Operations() ([]OpReport, error) {
	ops, err := e.ops.list(context.Background())
	if err != nil {
		return nil, err
	}
	out := make([]OpReport, 0, len(ops))
	for i := len(ops) - 1; i >= 0; i-- {
		out = append(out, ops[i].report())
	}
	return out, nil
}

// Incomplete returns the operations that stopped part-way (or whose
// process died), newest first.
func (e *Engine) Incomplete() []OpReport {
	ops, err := e.ops.list(context.Background())
	if err != nil {
		return nil
	}
	var out []OpReport
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].State == OpIncomplete {
			out = append(out, ops[i].report())
		}
	}
	return out
}

// Resume finishes an incomplete operation: the batches that landed are
// found in the repository, the rest re-checked against it (records to
// change unchanged since planning, parents still there) and committed.
func (e *Engine) Resume(ctx context.Context, id string, dryRun bool) (*Outcome, error) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	op, err := e.ops.get(ctx, id)
	if err != nil {
		return nil, err
	}
	switch {
	case op.State == OpDone:
		return nil, fail(ErrNoChange, "nothing to resume", "operation %s is already complete", id)
	case op.State == OpUndone:
		return nil, fail(ErrInvalidInput, "nothing to resume", "operation %s was undone", id)
	}
	if live, err := e.ops.live(ctx, id); err != nil {
		return nil, unavailable(err)
	} else if live {
		return nil, fail(ErrConflict, "wait for it to finish, then call operations", "operation %s is being committed right now", id)
	}
	t, err := e.Tree(ctx)
	if err != nil {
		return nil, unavailable(err)
	}
	s := t.Snapshot()
	if dryRun {
		// finding what landed and placing the rest anew must not change
		// the kept operation
		c := *op
		c.Writes = slices.Clone(op.Writes)
		c.Commits = slices.Clone(op.Commits)
		op = &c
	}
	// what landed is found in the repository (nothing is unknown now)
	var found []string
	for n := op.Landed; n < len(op.Batches) && batchLanded(s, op.batch(n)); n++ {
		found = append(found, s.Commit)
	}
	if len(found) > 0 || op.Unknown {
		if err := e.ops.move(ctx, op, phaseStopped, step{landed: found, dry: dryRun}); err != nil {
			return nil, err
		}
	}
	rest := op.Writes[op.landedWrites():]
	plan := &Plan{Writes: rest, Cost: store.Cost(rest), Summary: "resume " + op.ID + ": " + op.Summary}
	out := &Outcome{Plan: plan, DryRun: dryRun, BudgetLeft: e.budgetLeft(ctx)}
	if problems := checkRemainder(s, op); len(problems) > 0 {
		return nil, &Error{Kind: ErrConflict, Msg: fmt.Sprintf("cannot resume %s: %s", op.ID, strings.Join(problems, "; ")), Next: fmt.Sprintf("undo it with operation=%s to roll back what landed, then plan again", op.ID), Data: op.report()}
	}
	// the bullets still to write are placed against the siblings as they
	// are now, keeping their record keys (see replace)
	moved, err := replace(s, op)
	if err != nil {
		var oe *Error
		if errors.As(err, &oe) {
			oe.Data = op.report()
		}
		return nil, err
	}
	if moved > 0 {
		plan.Diagnostics = append(plan.Diagnostics, fmt.Sprintf("%d bullet(s) still to write were given new sortKeys: other bullets were written among their planned places since the operation stopped", moved))
	}
	// what is left passes the gate against the repository as it is now
	if _, err := gate(t, remainder(t, op)); err != nil {
		var oe *Error
		if errors.As(err, &oe) {
			oe.Msg = fmt.Sprintf("cannot resume %s: %s", op.ID, oe.Msg)
			oe.Next = fmt.Sprintf("undo it with operation=%s to roll back what landed, then plan again", op.ID)
			oe.Data = op.report()
		}
		return nil, err
	}
	if dryRun {
		rep := op.report()
		out.Op = &rep
		return out, nil
	}
	commits, err := e.execute(ctx, op, s.Commit)
	out.Commits = commits
	out.BudgetLeft = e.budgetLeft(ctx)
	if errors.Is(err, errReplan) {
		return nil, fail(ErrConflict, "call operations with resume=ID again", "the repository changed while resuming %s; nothing more was written", id)
	}
	if err != nil {
		return nil, err
	}
	rep := op.report()
	out.Op = &rep
	return out, nil
}

// ownKeys is the record keys of the bullets this server's recorded
// operations created (the journal), for re-spacing to prefer them.
func (e *Engine) ownKeys() map[string]bool {
	own := map[string]bool{}
	ops, err := e.ops.list(context.Background())
	if err != nil {
		return own
	}
	for _, op := range ops {
		if op.State == OpUndone || len(op.Undoes) > 0 {
			continue
		}
		for _, w := range op.Writes {
			if w.Collection == lexicon.Node || w.Collection == lexicon.Mirror {
				own[w.RKey] = true
			}
		}
	}
	return own
}

// markUndone records that the operations ids were rolled back. (A failure
// leaves one listed as not undone; undoing it again is then refused as
// changed since, and says which records.)
func (e *Engine) markUndone(ctx context.Context, ids []string) {
	for _, id := range ids {
		op, err := e.ops.entry(ctx, id) // its progress only: not read whole
		if err != nil {
			continue
		}
		e.ops.move(ctx, op, phaseUndone, step{})
	}
}

// parentOf is a planned value's parent field ("" if none).
func parentOf(v map[string]any) string { p, _ := v["parent"].(string); return p }
