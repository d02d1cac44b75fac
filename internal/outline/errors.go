package outline

import (
	"errors"
	"fmt"
)

var (
	// ErrNodeNotFound: a referenced bullet is not in the repository.
	ErrNodeNotFound = errors.New("node not found")
	// ErrAnchorMissing: the "after" sibling is not a child of the target parent.
	ErrAnchorMissing = errors.New("anchor missing")
	// ErrParentMissing: the target parent does not exist.
	ErrParentMissing = errors.New("parent missing")
	// ErrCrossRepo: a parent or policy root in another repository.
	ErrCrossRepo = errors.New("cross-repository reference")
	// ErrCycle: the change would put a bullet inside its own subtree.
	ErrCycle = errors.New("cycle")
	// ErrHasChildren: a delete that would detach children.
	ErrHasChildren = errors.New("has children")
	// ErrNotOwner: a write about a record this repository does not own.
	ErrNotOwner = errors.New("not owner")
	// ErrInvalidInput: arguments that cannot make a valid record.
	ErrInvalidInput = errors.New("invalid input")
	// ErrBudget: the plan costs more points than are left.
	ErrBudget = errors.New("budget exceeded")
	// ErrConflict: the repository kept changing; retries ran out, or undo found
	// records changed since.
	ErrConflict = errors.New("conflict")
	// ErrTooLarge: the plan would take the repository past 250,000 records.
	ErrTooLarge = errors.New("repository bound")
	// ErrIncomplete: an operation committed some of its batches and then
	// stopped; it is recorded and can be resumed or undone.
	ErrIncomplete = errors.New("operation incomplete")
	// ErrCancelled: the caller cancelled the call; nothing more is sent.
	ErrCancelled = errors.New("cancelled")
	// ErrUnavailable: the repository could not be reached or answered with
	// a server error; nothing is known to have been written.
	ErrUnavailable = errors.New("repository unavailable")
	// ErrTimeout: the repository did not answer in time.
	ErrTimeout = errors.New("timeout")
	// ErrNoChange: the intent asks for what is already there; nothing is
	// written (a result, not a failure, when the tool reports it).
	ErrNoChange = errors.New("no change")
)

// Error is an error the model can act on: the sentinel it wraps, what went
// wrong, and the next step.
type Error struct {
	Kind error
	Msg  string
	Next string
	// Data is structured detail for the caller (an *OpReport of what
	// landed, a *budget.Exceeded with the free-at time), or nil.
	Data any
}

func (e *Error) Error() string {
	if e.Next == "" {
		return e.Msg
	}
	return e.Msg + "; " + e.Next
}

func (e *Error) Unwrap() error { return e.Kind }

func fail(kind error, next string, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...), Next: next}
}
