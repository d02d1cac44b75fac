package outline

//go:generate go run ./internal/kindgen/cmd

import (
	"errors"
	"fmt"
)

// Kind is an error kind as tools name it: the sentinel, the
// machine-readable name a tool result carries (structuredContent.error.kind)
// and what it means. Kinds is the one table of them: the sentinels and
// their doc comments (zz_kinds.go, by go generate), tools' kindOf and the
// output schemas' enum are made from it; tests hold zz_kinds.go and the
// list in docs/tools.md to it.
type Kind struct {
	Err  error
	Name string
	Text string // Err's text (errors.New(Text))
	Doc  string
}

// Kinds lists every error kind, in the order tools document them.
var Kinds = []Kind{
	{ErrNodeNotFound, "node_missing", "node not found", "a referenced bullet is not in the repository"},
	{ErrAnchorMissing, "anchor_missing", "anchor missing", "the \"after\" sibling is not a child of the target parent, or is gone"},
	{ErrParentMissing, "parent_missing", "parent missing", "the target parent does not exist"},
	{ErrOperationMissing, "operation_missing", "operation not found", "an operation id (undo operation=, operations resume=) names no operation this server recorded, or none that can be undone"},
	{ErrCrossRepo, "cross_repo", "cross-repository reference", "a parent or policy root in another repository, where it is not admitted"},
	{ErrCycle, "cycle", "cycle", "the change would put a bullet (or a mirror) inside its own subtree"},
	{ErrHasChildren, "has_children", "has children", "a delete or undo that would detach children"},
	{ErrNotOwner, "not_yours", "not owner", "a write about a record this repository does not own"},
	{ErrInvalidInput, "invalid", "invalid input", "arguments that cannot make a valid record"},
	{ErrBudget, "budget", "budget exceeded", "the plan costs more points than are left, or the server asked to pause"},
	{ErrConflict, "conflict", "conflict", "the repository kept changing and retries ran out, or undo found records changed since"},
	{ErrTooLarge, "too_large", "repository bound", "the plan would take the repository past 250,000 records"},
	{ErrIncomplete, "partial", "operation incomplete", "an operation committed some of its batches and then stopped; it is recorded: resume or undo it"},
	{ErrCancelled, "cancelled", "cancelled", "the caller cancelled the call; nothing more is sent"},
	{ErrUnavailable, "unavailable", "repository unavailable", "the repository could not be reached or answered with a server error; nothing is known to have been written"},
	{ErrTimeout, "timeout", "timeout", "the repository did not answer in time"},
	{ErrNoChange, "no_change", "no change", "the intent asks for what is already there; nothing is written (a result, not a failure, when the tool reports it)"},
	{ErrDeclined, "declined", "declined", "the person declined, or did not answer, the confirmation a big destructive edit asked for; nothing was written"},
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
