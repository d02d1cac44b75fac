package outline

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// What changed since a revision or a time, from the repository's own
// history (store.Historian: the embedded store's commits, a PDS's followed
// commits), each record with what happened to it and who wrote it: this
// server (an operation of its journal, by id) or another writer.

// errNoHistory means the repository cannot tell its history.
var errNoHistory = errors.New("this repository cannot tell what changed since a revision")

// SinceChange is one record changed since the revision asked.
type SinceChange struct {
	RKey string `json:"rkey"`
	// Collection is the record's when it is not a bullet (app.bulleted.node).
	Collection string `json:"collection,omitempty"`
	// Change is created, edited, moved, "moved, edited" or deleted.
	Change string `json:"change"`
	Text   string `json:"text,omitempty"` // the start of its text (before, if deleted)
	// Node is the bullet a note, comment, policy or outline record is of.
	Node string `json:"node,omitempty"`
	Rev  string `json:"rev"` // the commit that last changed it
	// By is "server" (this server: Operation names the operation of its
	// journal) or "other" (another writer: an app, another device, a
	// process writing without this server's journal).
	By        string `json:"by"`
	Operation string `json:"operation,omitempty"`
}

// SinceResult is what changed between two revisions.
type SinceResult struct {
	Rev     string // what the changes count from
	HeadRev string // what they count to
	Commits int
	Changes []SinceChange // in the order of their last change, oldest first
	Cut     string        // history the repository no longer holds ("": none)
}

// Since tells what changed since q's revision or time, from the
// repository's own history.
func (e *Engine) Since(ctx context.Context, q store.HistoryQuery) (*SinceResult, error) {
	h, ok := e.Repo.(store.Historian)
	if !ok {
		return nil, &Error{Kind: ErrInvalidInput, Msg: errNoHistory.Error(), Next: "read the outline instead"}
	}
	s, err := h.History(ctx, q)
	if err != nil {
		return nil, err
	}
	ops := map[string]string{} // commit → operation
	if e.ops != nil {
		if list, err := e.ops.j.List(ctx); err == nil {
			for _, op := range list {
				if op.DID != "" && op.DID != e.Repo.DID().String() {
					continue
				}
				for _, c := range op.Commits {
					ops[c] = op.ID
				}
			}
		} else {
			return nil, fmt.Errorf("reading the operations journal (who wrote what): %w", err)
		}
	}
	out := &SinceResult{Rev: s.Rev, HeadRev: s.HeadRev, Commits: s.Commits, Cut: s.Cut, Changes: make([]SinceChange, 0, len(s.Changed))}
	for _, c := range s.Changed {
		ch := SinceChange{RKey: c.RKey, Change: changeKind(c), Rev: c.Rev, By: "other"}
		if c.Collection != lexicon.Node {
			ch.Collection = c.Collection
		}
		if id, ok := ops[c.Commit]; ok {
			ch.By, ch.Operation = "server", id
		}
		v := c.After
		if c.Absent {
			v = c.Before
		}
		if t := v.Str("text"); t != "" {
			ch.Text = excerpt(t)
		} else if c.Collection == lexicon.Mirror {
			ch.Text = "(mirror)"
		}
		switch c.Collection {
		case lexicon.Note, lexicon.CommentPolicy, lexicon.Outline:
			ch.Node = c.RKey
		case lexicon.Comment:
			if u, err := parseNodeURI(v.Str("subject")); err == nil {
				ch.Node = u
			}
		}
		out.Changes = append(out.Changes, ch)
	}
	return out, nil
}

// changeKind says what happened to a record between two revisions: a
// bullet whose parent or place among its siblings changed moved; one whose
// other fields changed was edited.
func changeKind(c store.Changed) string {
	switch {
	case c.BeforeAbsent:
		return "created"
	case c.Absent:
		return "deleted"
	case c.Collection != lexicon.Node && c.Collection != lexicon.Mirror:
		return "edited"
	}
	place := map[string]bool{"parent": true, "sortKey": true}
	moved, edited := false, false
	seen := map[string]bool{}
	for _, v := range []store.Value{c.Before, c.After} {
		for _, k := range v.Keys() {
			if seen[k] {
				continue
			}
			seen[k] = true
			a, _ := c.Before.Field(k)
			b, _ := c.After.Field(k)
			if a == b {
				continue
			}
			if place[k] {
				moved = true
			} else {
				edited = true
			}
		}
	}
	switch {
	case moved && edited:
		return "moved, edited"
	case moved:
		return "moved"
	}
	return "edited"
}
