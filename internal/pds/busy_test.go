package pds_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
)

// TestBusyRefusalSaysWhatChanged: a write planned on a state another
// client changed what it depends on since (its anchor moved under another
// parent, its parent deleted) is refused for its swapCommit, planned
// again, and refused with a typed error that says what the other client
// changed; nothing of it is written.
func TestBusyRefusalSaysWhatChanged(t *testing.T) {
	ctx := context.Background()
	a := account(t, srv)
	dir := t.TempDir()
	r := login(t, srv, a, dir, nil)
	e, err := newEngine(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	other := outline.New(login(t, srv, a, t.TempDir(), nil))
	top := enginetest.Insert(t, e, outline.Position{}, "Parent")[0]
	anchor := enginetest.Insert(t, e, outline.Position{Parent: top}, "Anchor")[0]
	dest := enginetest.Insert(t, e, outline.Position{}, "Elsewhere")[0]
	insert := func(pos outline.Position, text string) error {
		_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return p.Insert(pos, []outline.NewNode{{Text: text}})
		})
		return err
	}

	// 1. the anchor moved: our insert after it, planned on our own last
	// commit, is refused and planned again where the anchor is not a child
	// of the parent any more
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		return p.Move([]string{anchor}, outline.Position{Parent: dest})
	}); err != nil {
		t.Fatal(err)
	}
	writes := r.Stats.Writes.Load()
	err = insert(outline.Position{Parent: top, After: anchor}, "after the anchor")
	if !errors.Is(err, outline.ErrAnchorMissing) {
		t.Fatalf("insert after a moved anchor: %v, want kind anchor_missing", err)
	}
	if w := r.Stats.Writes.Load() - writes; w != 1 {
		t.Errorf("insert after a moved anchor: %d applyWrites, want 1 (refused for its swapCommit)", w)
	}
	if msg := err.Error(); !strings.Contains(msg, "another client moved") || !strings.Contains(msg, anchor) || !strings.Contains(msg, dest) {
		t.Errorf("the refusal does not say that another client moved the anchor %s under %s: %v", anchor, dest, err)
	}

	// 2. the parent deleted (after a write of ours, so that the next is
	// planned on our own last commit again)
	enginetest.Insert(t, e, outline.Position{Parent: top}, "B")
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error { return p.DeleteNode(top, "subtree") }); err != nil {
		t.Fatal(err)
	}
	err = insert(outline.Position{Parent: top, Where: "last"}, "under the parent")
	if !errors.Is(err, outline.ErrParentMissing) {
		t.Fatalf("insert under a deleted parent: %v, want kind parent_missing", err)
	}
	t.Logf("refusal: %v", err)
	if msg := err.Error(); !strings.Contains(msg, "another client deleted") || !strings.Contains(msg, top) {
		t.Errorf("the refusal does not say that another client deleted the parent %s: %v", top, err)
	}
	var oe *outline.Error
	if !errors.As(err, &oe) || oe.Data == nil {
		t.Errorf("the refusal carries no data on what changed: %#v", err)
	}

	// nothing of either was written
	tr := readBack(t, ctx, a.DID.String())
	for _, n := range tr.Nodes {
		if txt := n.Text(); txt == "after the anchor" || txt == "under the parent" {
			t.Errorf("a refused insert was written: %q", txt)
		}
	}
}
