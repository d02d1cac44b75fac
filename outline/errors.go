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
)

// Error is an error the model can act on: the sentinel it wraps, what went
// wrong, and the next step.
type Error struct {
	Kind error
	Msg  string
	Next string
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
