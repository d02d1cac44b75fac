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
	// ErrDeclined: the person declined (or did not answer) the confirmation
	// a big destructive edit asked for; nothing was written.
	ErrDeclined = errors.New("declined")
)

// Kind is an error kind as tools name it: the sentinel, the
// machine-readable name a tool result carries (structuredContent.error.kind)
// and what it means. Kinds is the one table of them: tools' kindOf, the
// output schemas' enum and the README's list are made from it (tests hold
// the README to it).
type Kind struct {
	Err  error
	Name string
	Doc  string
}

// Kinds lists every error kind, in the order tools document them.
var Kinds = []Kind{
	{ErrNodeNotFound, "node_missing", "a referenced bullet is not in the repository"},
	{ErrAnchorMissing, "anchor_missing", "the after sibling is not a child of the target parent, or is gone"},
	{ErrParentMissing, "parent_missing", "the target parent does not exist"},
	{ErrCrossRepo, "cross_repo", "a parent or policy root in another repository, where it is not admitted"},
	{ErrCycle, "cycle", "the change would put a bullet (or a mirror) inside its own subtree"},
	{ErrHasChildren, "has_children", "a delete or undo that would detach children"},
	{ErrNotOwner, "not_yours", "a write about a record this repository does not own"},
	{ErrInvalidInput, "invalid", "arguments that cannot make a valid record"},
	{ErrBudget, "budget", "the plan costs more points than are left, or the server asked to pause"},
	{ErrConflict, "conflict", "the repository kept changing, or records changed since"},
	{ErrTooLarge, "too_large", "the plan would take the repository past 250,000 records"},
	{ErrIncomplete, "partial", "an operation stopped part-way: resume or undo it"},
	{ErrCancelled, "cancelled", "the caller cancelled the call"},
	{ErrUnavailable, "unavailable", "the repository could not be reached or failed"},
	{ErrTimeout, "timeout", "the repository did not answer in time"},
	{ErrNoChange, "no_change", "the intent asks for what is already there"},
	{ErrDeclined, "declined", "the person declined, or did not answer, the confirmation a big destructive edit asked for"},
}

// KindName is the name of err's kind (Kinds), or "error" for an error of
// no kind (a bug).
func KindName(err error) string {
	for _, k := range Kinds {
		if errors.Is(err, k.Err) {
			return k.Name
		}
	}
	return "error"
}

// KindNames is every kind's name, and "error" last.
func KindNames() []string {
	out := make([]string, 0, len(Kinds)+1)
	for _, k := range Kinds {
		out = append(out, k.Name)
	}
	return append(out, "error")
}

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
