package store

import (
	"context"
	"slices"
	"sync"
)

// CallNotes collects what a repository has to say about the reads of one
// call (a read answered from a followed commit stream that has gone quiet,
// or from the PDS while the stream catches up): the server adds them to
// that call's result, in both its parts. Each note has a key; a later note
// of the same key replaces the earlier (a call that reads twice says the
// last).
type CallNotes struct {
	mu    sync.Mutex
	keys  []string
	notes map[string]string
}

type callNotesKey struct{}

// WithCallNotes returns ctx carrying a new CallNotes, and it.
func WithCallNotes(ctx context.Context) (context.Context, *CallNotes) {
	n := &CallNotes{notes: map[string]string{}}
	return context.WithValue(ctx, callNotesKey{}, n), n
}

// NoteCall adds note (under key) to the call of ctx; without one (a
// read of no call: a follower's own) it does nothing.
func NoteCall(ctx context.Context, key, note string) {
	n, _ := ctx.Value(callNotesKey{}).(*CallNotes)
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.notes[key]; !ok {
		n.keys = append(n.keys, key)
	}
	n.notes[key] = note
}

// Take returns the notes (in the order their keys were first noted) and
// forgets them.
func (n *CallNotes) Take() []string {
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, k := range n.keys {
		out = append(out, n.notes[k])
	}
	n.keys, n.notes = nil, map[string]string{}
	return slices.Clip(out)
}
