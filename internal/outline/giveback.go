package outline

import (
	"context"
	"fmt"
	"slices"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// Charges is the optional interface of a repository whose write budget
// charges each batch before it is sent, under the batch's key (batchKey):
// a process killed while a batch was on its way leaves that charge open
// (it may have landed). The engine reads it back for the operations list
// (Charged) and, when the operation is undone or forgotten with that batch
// known not to have landed, gives it back (GiveBack): the PDS backend's
// file ledger (budget.Ledger.GiveBack).
type Charges interface {
	// GiveBack gives back the open charges of operation opID except
	// those under landed (the keys of its batches that landed), and
	// returns the points given back.
	GiveBack(ctx context.Context, opID string, landed []string) (int, error)
	// Charged is the points charged under key and whether the charge is
	// open (its process stopped before it knew whether the batch landed).
	Charged(ctx context.Context, key string) (points int, open bool)
}

// batchKey is the key batch i of op is charged under: the operation's ID,
// where the batch starts among its writes and how many it holds.
func batchKey(op *Operation, i int) string {
	start := 0
	if i > 0 {
		start = op.Batches[i-1]
	}
	return fmt.Sprintf("%s/%d+%d", op.ID, start, op.Batches[i]-start)
}

// giveBack gives back, when op has just been undone or forgotten, the
// charges a killed process left open for its batches that never landed,
// and returns the points given back (0 without a Charges repository). A
// batch counts as landed (its charge kept) when the journal says so, when
// the operation that undid op wrote any record the batch wrote, or,
// without such an operation (an undo with nothing to put back), when any
// of the batch's effects is in the repository. The batch after the landed
// ones is given back only when the repository has moved past the commit it
// was to be swapped onto (no request of it can land any more).
func (l *lifecycle) giveBack(ctx context.Context, op *Operation, to phase) (int, error) {
	if l.repo == nil {
		return 0, nil
	}
	repo := l.repo()
	c, ok := repo.(Charges)
	if !ok || len(op.Batches) == 0 {
		return 0, nil
	}
	var landed []string
	for i := range op.Landed {
		landed = append(landed, batchKey(op, i))
	}
	if to == phaseUndone && op.Landed < len(op.Batches) {
		var undoer *Operation
		if ops, err := l.j.List(ctx); err == nil {
			for _, u := range ops {
				if slices.Contains(u.Undoes, op.ID) && (undoer == nil || u.ID > undoer.ID) {
					undoer = u
				}
			}
		} else {
			return 0, err
		}
		var idx map[string]string
		if undoer == nil {
			s, err := repo.Snapshot(ctx)
			if err != nil {
				return 0, err
			}
			if op.Landed > 0 && s.Commit == op.Commits[op.Landed-1] {
				return 0, nil // still at the batch's swapCommit: it could land
			}
			idx = index(s)
		}
		touched := map[string]bool{}
		if undoer != nil {
			for _, w := range undoer.Writes {
				touched[w.Collection+"/"+w.RKey] = true
			}
		}
		for i := op.Landed; i < len(op.Batches); i++ {
			if maybeLanded(op.batch(i), touched, idx) {
				landed = append(landed, batchKey(op, i))
			}
		}
	}
	return c.GiveBack(ctx, op.ID, landed)
}

// maybeLanded reports whether any write of batch may have landed: its
// record was written by the undo (touched), or, read against the
// repository (idx), a created or updated record is there or a deleted one
// is gone.
func maybeLanded(batch []store.Write, touched map[string]bool, idx map[string]string) bool {
	for _, w := range batch {
		path := w.Collection + "/" + w.RKey
		if touched[path] {
			return true
		}
		if idx == nil {
			continue
		}
		_, there := idx[path]
		if there != (w.Op == store.Delete) {
			return true
		}
	}
	return false
}

// HeldCharge is what the write budget holds for operation id's batch after
// its landed ones, charged before it was sent: points (0: none, or no
// budget) and whether it is open, charged by a process that stopped
// (killed) before it knew whether the batch landed. A resume uses that
// charge (the batch is not charged again); an undo or a forget that finds
// it did not land gives it back.
func (e *Engine) HeldCharge(ctx context.Context, id string) (points int, open bool, err error) {
	c, ok := e.Repo.(Charges)
	if !ok {
		return 0, false, nil
	}
	op, err := e.ops.get(ctx, id)
	if err != nil {
		return 0, false, err
	}
	if op.State != OpIncomplete || op.Landed >= len(op.Batches) {
		return 0, false, nil
	}
	points, open = c.Charged(ctx, batchKey(op, op.Landed))
	return points, open, nil
}
