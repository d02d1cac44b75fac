package outline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// An operation's life, in one place: the phases it goes through, the
// transitions allowed between them, and the one method (lifecycle.move)
// that takes it from phase to phase and records each step in the journal.
//
//	planned ──▶ running ──▶ landed ──▶ undone
//	   │          │ ▲ ╲
//	   │          │ │  ╲──▶ stopped | unknown ──▶ undone
//	   │          │ └──────────┘ (resumed)
//	   └──────────┴──▶ forgotten (nothing of it landed)
//
// A phase is kept in the operation's recorded fields (State and Unknown),
// so records written before phases existed read as before.
type phase string

const (
	// phasePlanned: made from a plan, nothing recorded or sent yet.
	phasePlanned phase = "planned"
	// phaseRunning: recorded; a process holding its claim sends its
	// batches (each landed batch is a step from running to running).
	phaseRunning phase = "running"
	// phaseLanded: every batch landed (recorded as state "done").
	phaseLanded phase = "landed"
	// phaseStopped: stopped part-way, what landed known (state "incomplete").
	phaseStopped phase = "stopped"
	// phaseUnknown: stopped, and the batch after the landed ones may have
	// landed too (state "incomplete", unknown); resume or undo find out.
	phaseUnknown phase = "unknown"
	// phaseUndone: rolled back by a later operation (state "undone").
	phaseUndone phase = "undone"
	// phaseForgotten: taken out of the journal; nothing of it landed
	// (refused or cancelled before its first batch, or to be planned again).
	phaseForgotten phase = "forgotten"
)

// transitions is every step an operation may take. Anything else is a bug
// in the engine, refused by move with a Go error.
var transitions = map[phase][]phase{
	phasePlanned: {phaseRunning, phaseForgotten},
	// running → running: a batch landed, or its plan changed (a batch
	// split, bullets placed anew)
	phaseRunning: {phaseRunning, phaseLanded, phaseStopped, phaseUnknown, phaseForgotten},
	// stopped → stopped: what landed found in the repository, or a resume
	// refused before it sent anything; → running: resumed
	phaseStopped:   {phaseRunning, phaseStopped, phaseUndone, phaseForgotten},
	phaseUnknown:   {phaseRunning, phaseStopped, phaseUndone, phaseForgotten},
	phaseLanded:    {phaseUndone},
	phaseUndone:    nil,
	phaseForgotten: nil,
}

// phaseOf is the phase op's recorded fields say it is in.
func phaseOf(op *Operation) (phase, error) {
	switch op.State {
	case opPlanned:
		return phasePlanned, nil
	case OpRunning:
		return phaseRunning, nil
	case OpDone:
		return phaseLanded, nil
	case OpIncomplete:
		if op.Unknown {
			return phaseUnknown, nil
		}
		return phaseStopped, nil
	case OpUndone:
		return phaseUndone, nil
	case opForgotten:
		return phaseForgotten, nil
	}
	return "", fmt.Errorf("operation %s has no known state (%q)", op.ID, op.State)
}

// opForgotten is the state of an operation taken out of the journal (never
// recorded: only the engine's copy carries it).
const opForgotten = "forgotten"

// step is what comes with a transition.
type step struct {
	// landed: commits of batches that landed, in order (a batch sent, or
	// batches found in the repository by a resume)
	landed []string
	// reason: why it stopped (stopped, unknown)
	reason string
	// dry: apply to op (a dry run's copy), record nothing
	dry bool
}

// lifecycle moves the operations of one repository through their phases,
// recording every step in its journal, and reads them back.
type lifecycle struct {
	j Journal
	// repo is the engine's repository (nil in tests of the lifecycle
	// alone): an undone or forgotten operation's open charges are given
	// back through it (giveback.go).
	repo func() store.Repository
}

// move takes op to phase to, with what step s brings, and records it: the
// whole operation when it is new or its plan changed since it was last
// recorded (op.dirty), else only its progress; forgotten removes it. A
// transition the table does not allow is refused with a plain error (a
// bug), op unchanged.
func (l *lifecycle) move(ctx context.Context, op *Operation, to phase, s step) error {
	from, err := l.advance(op, to, s)
	if err != nil || s.dry {
		return err
	}
	return l.record(ctx, op, from, to)
}

// moveSoon is move of an operation planned just now to running, its
// record written meanwhile (while the batch's points are charged): op is
// moved at once; sendable gives the record's error once it is written and
// durable, recorded once the writing is over too (each the same error
// every time it is called). The caller sends none of op's batches before
// sendable returns nil (store.WithSendGate), and calls recorded before it
// reads or changes op again or sends another.
//
// A file journal's record is sendable once its file is in place, whole,
// for every process (a kill, or another process, finds it) and on disk
// with its name (a crash of the machine finds it too): the file's and the
// directory's syncs run at once, before the first batch leaves, so none
// is left to slow the repository's own commit.
func (l *lifecycle) moveSoon(ctx context.Context, op *Operation) (sendable, recorded func() error) {
	from, err := l.advance(op, phaseRunning, step{})
	if err != nil {
		f := func() error { return err }
		return f, f
	}
	visible, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		fj, staged := l.j.(*fileJournal)
		if !staged {
			err = l.record(ctx, op, from, phaseRunning)
			close(visible)
			return
		}
		if serr := fj.saveStaged(op); serr != nil {
			err = fmt.Errorf("recording operation %s: %w", op.ID, serr)
		} else {
			op.dirty = false
		}
		close(visible)
	}()
	sendable = func() error {
		<-visible
		return err
	}
	recorded = func() error {
		<-done
		return err
	}
	return sendable, recorded
}

// advance takes op from its phase to phase to in memory (move's first half),
// returning the phase it was in.
func (l *lifecycle) advance(op *Operation, to phase, s step) (phase, error) {
	from, err := phaseOf(op)
	if err != nil {
		return "", err
	}
	if !slices.Contains(transitions[from], to) {
		return "", fmt.Errorf("operation %s: no transition from %s to %s", op.ID, from, to)
	}
	if to == phaseForgotten && op.Landed+len(s.landed) > 0 {
		return "", fmt.Errorf("operation %s: cannot forget it, %d batch(es) landed", op.ID, op.Landed)
	}
	if op.Landed+len(s.landed) > len(op.Batches) {
		return "", fmt.Errorf("operation %s: %d batch(es) landed of %d", op.ID, op.Landed+len(s.landed), len(op.Batches))
	}
	op.Landed += len(s.landed)
	op.Commits = append(op.Commits, s.landed...)
	op.Unknown = to == phaseUnknown
	switch to {
	case phaseRunning:
		op.State, op.Reason = OpRunning, ""
	case phaseLanded:
		op.State = OpDone
	case phaseStopped, phaseUnknown:
		op.State = OpIncomplete
		if s.reason != "" {
			op.Reason = s.reason
		}
	case phaseUndone:
		op.State = OpUndone
	case phaseForgotten:
		op.State = opForgotten
	}
	return from, nil
}

// record writes op's step from phase from to phase to in the journal
// (move's second half).
func (l *lifecycle) record(ctx context.Context, op *Operation, from, to phase) error {
	// what landed must be recorded even when the call is cancelled (the
	// journal bounds its own requests)
	ctx = context.WithoutCancel(ctx)
	if to == phaseUndone || to == phaseForgotten {
		// the budget charges of batches that never landed, left open by a
		// killed process, are given back (said in the operation's reason)
		if n, err := l.giveBack(ctx, op, to); err != nil {
			op.Reason = strings.TrimPrefix(op.Reason+"; ", "; ") + "the write budget's charges of its batches that did not land could not be given back: " + err.Error()
			op.dirty = true
		} else if n > 0 {
			op.Reason = strings.TrimPrefix(op.Reason+"; ", "; ") + fmt.Sprintf("%d point(s) charged by the stopped process for a batch that never landed were given back to the write budget", n)
			op.dirty = true
		}
	}
	if to == phaseForgotten {
		if err := l.j.Remove(ctx, op.ID); err != nil {
			return fmt.Errorf("forgetting operation %s: %w", op.ID, err)
		}
		return nil
	}
	whole := from == phasePlanned || op.dirty
	if err := l.j.Save(ctx, op, whole); err != nil {
		return fmt.Errorf("recording operation %s: %w", op.ID, err)
	}
	op.dirty = false
	return nil
}

// claim takes the right to commit op id; false if another process (or
// instance) holds it.
func (l *lifecycle) claim(ctx context.Context, id string) (bool, error) { return l.j.Claim(ctx, id) }

// release gives the claim on id up.
func (l *lifecycle) release(ctx context.Context, id string) {
	l.j.Release(context.WithoutCancel(ctx), id)
}

// live reports whether some process holds the claim on id.
func (l *lifecycle) live(ctx context.Context, id string) (bool, error) { return l.j.Live(ctx, id) }

// list returns every operation of the repository, oldest first (IDs are
// TIDs). One recorded as running whose claim nobody holds belongs to a
// process that died: it comes back stopped (incomplete).
func (l *lifecycle) list(ctx context.Context) ([]*Operation, error) {
	ops, err := l.j.List(ctx)
	if err != nil {
		return nil, err
	}
	ops = slices.Clone(ops)
	slices.SortFunc(ops, func(a, b *Operation) int { return strings.Compare(a.ID, b.ID) })
	for i, op := range ops {
		if op.State != OpRunning {
			continue
		}
		live, err := l.j.Live(ctx, op.ID)
		if err != nil {
			return nil, err
		}
		if live {
			continue
		}
		// it may have finished or stopped since it was read: read it
		// again, now that its claim is known to be free
		if fresh, err := l.j.Get(ctx, op.ID); err == nil && fresh != nil && fresh.State != OpRunning {
			ops[i] = fresh
			continue
		}
		cp := *op
		cp.State = OpIncomplete
		if cp.Reason == "" {
			cp.Reason = "the process committing it stopped (killed or crashed)"
		}
		ops[i] = &cp
	}
	return ops, nil
}

// get returns (a copy of) operation id, as list has it, whole (its
// writes' values read: full).
func (l *lifecycle) get(ctx context.Context, id string) (*Operation, error) {
	op, err := l.entry(ctx, id)
	if err != nil {
		return nil, err
	}
	return l.full(ctx, op)
}

// entry returns (a copy of) operation id as list has it, which may be
// light (its writes' values not read): enough to report it or to record
// its progress (a journal reads a light operation whole to write it whole).
func (l *lifecycle) entry(ctx context.Context, id string) (*Operation, error) {
	ops, err := l.list(ctx)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		if op.ID == id {
			cp := *op
			return &cp, nil
		}
	}
	return nil, fail(ErrOperationMissing, "call operations to see the operations this server recorded", "no operation %s", id)
}

// full returns op with its writes' values and the records they replaced,
// read from the journal when op is light (as a listing keeps it); the
// state and progress are op's (list may have found its process dead).
func (l *lifecycle) full(ctx context.Context, op *Operation) (*Operation, error) {
	if !op.light {
		return op, nil
	}
	var fresh *Operation
	var err error
	if fj, ok := l.j.(*fileJournal); ok {
		fresh, err = fj.whole(ctx, op)
	} else {
		fresh, err = l.j.Get(ctx, op.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("reading operation %s: %w", op.ID, err)
	}
	if fresh == nil {
		return nil, fail(ErrOperationMissing, "call operations to see the operations this server recorded", "operation %s is no longer recorded", op.ID)
	}
	if !slices.Equal(fresh.Batches, op.Batches) {
		// its plan was recorded anew since it was listed: the record wins
		if fresh.State == OpRunning && op.State == OpIncomplete {
			fresh.State, fresh.Reason = op.State, op.Reason
		}
		return fresh, nil
	}
	cp := *op
	cp.Writes, cp.Prev, cp.Keys, cp.Around, cp.light = fresh.Writes, fresh.Prev, fresh.Keys, fresh.Around, false
	return &cp, nil
}

// prune removes the oldest finished operations beyond JournalSize.
func (l *lifecycle) prune(ctx context.Context) error {
	ops, err := l.list(ctx)
	if err != nil {
		return err
	}
	var finished []*Operation
	for _, op := range ops {
		if op.State == OpDone || op.State == OpUndone {
			finished = append(finished, op)
		}
	}
	for len(finished) > JournalSize {
		if err := l.j.Remove(context.WithoutCancel(ctx), finished[0].ID); err != nil {
			return err
		}
		finished = finished[1:]
	}
	return nil
}
