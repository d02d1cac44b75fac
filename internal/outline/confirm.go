package outline

import (
	"context"
	"fmt"
)

// Confirmation. When the caller can ask the person (the tools put a
// Threshold in the call's context: WithConfirm), every plan whose gate
// verdict passes it is held instead of committed, whatever made it (an
// intent, a batch, an import, a kept plan applied by id, undo): the engine
// keeps the plan and answers *ConfirmNeeded with its id; the person sees it
// and, when they accept, the caller applies exactly that plan with Apply
// under Confirmed. Resume is not asked again: what it finishes was decided
// when its operation was first committed. The one count is the gate's
// (Verdict): bullets and mirrors removed, bullets and mirrors moved.

// Threshold is when a write asks first: more than Deletes bullets and
// mirrors removed, or more than Moves moved (0: never for that count), or,
// with Budget, a cost over half of the write budget left now.
type Threshold struct {
	Deletes int
	Moves   int
	Budget  bool
}

// over reports whether v passes the threshold, left being the budget's
// points left now (-1: the repository has no budget).
func (th Threshold) over(v Verdict, left int) bool {
	return (th.Deletes > 0 && v.Removed() > th.Deletes) || (th.Moves > 0 && v.Moved > th.Moves) || th.Budget && overHalf(v.Cost, left)
}

// overHalf reports whether cost is more than half of left (-1: no budget).
func overHalf(cost, left int) bool { return left >= 0 && cost > 0 && 2*cost > left }

type confirmKey struct{}

type confirmState struct {
	th       Threshold
	accepted string // the plan id the person accepted
}

// WithConfirm returns a context whose writes are held for the person's
// confirmation when they pass th.
func WithConfirm(ctx context.Context, th Threshold) context.Context {
	st, _ := ctx.Value(confirmKey{}).(confirmState)
	st.th = th
	return context.WithValue(ctx, confirmKey{}, st)
}

// Confirmed returns a context in which the plan kept under id, which the
// person accepted, is committed without asking again.
func Confirmed(ctx context.Context, id string) context.Context {
	st, _ := ctx.Value(confirmKey{}).(confirmState)
	st.accepted = id
	return context.WithValue(ctx, confirmKey{}, st)
}

// ConfirmNeeded is the answer to a write held for the person's
// confirmation: nothing was written; the plan is kept under PlanID (empty
// when it was too large to keep, and then it cannot be confirmed).
type ConfirmNeeded struct {
	PlanID  string
	Verdict Verdict
	Summary string
	// Left is the write budget's points left when it was asked (-1: no
	// budget); the plan's cost is Verdict.Cost.
	Left int
}

// OverBudget reports whether the plan costs more than half of the budget
// left (one reason to ask).
func (c *ConfirmNeeded) OverBudget() bool { return overHalf(c.Verdict.Cost, c.Left) }

func (c *ConfirmNeeded) Error() string {
	return fmt.Sprintf("the plan (%s) removes %d bullet(s) and mirror(s) and moves %d: it needs the person's confirmation; nothing was written",
		c.Summary, c.Verdict.Removed(), c.Verdict.Moved)
}

// needsConfirm reports whether a plan with verdict v, kept under id ("" if
// not kept yet), must be held for the person; left is the budget's points
// left now (-1: none).
func needsConfirm(ctx context.Context, v Verdict, id string, left int) bool {
	st, ok := ctx.Value(confirmKey{}).(confirmState)
	if !ok || !st.th.over(v, left) {
		return false
	}
	return id == "" || st.accepted != id
}
