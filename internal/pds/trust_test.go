package pds_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// A write right after our own commit is planned on it without asking the
// PDS (store.Known, pds.TrustOwn); swapCommit guards it. Another client of
// the account writes in between, three times: the trusted write is refused
// whole and planned again on what the PDS has, so that
//   - an insert lands where the other client's bullet now is (first, before
//     it), once, on untied keys;
//   - an edit of a bullet the other client edited keeps the other client's
//     text as what undo restores;
//   - an insert under a bullet the other client deleted is refused with
//     parent_missing and nothing is written;
//   - an insert under a bullet the other client made is not refused on the
//     guess (which lacks it): it asks, and lands.
//
// A write whose first batch costs more than outline.TrustPoints asks first.
// Each refused write costs one applyWrites more and stays counted in the
// ledger (the PDS's rate limiter counted it). Read back from the PDS, not
// from the tools' reports. And with nobody else writing, consecutive writes
// ask the PDS nothing; after TrustOwn they ask again.
func TestTrustedWriteMeetsAnotherWriter(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	r := pdstest.Login(t, srv, a, dir, nil)
	ledger, err := budget.New(filepath.Join(dir, "budget.json"))
	if err != nil {
		t.Fatal(err)
	}
	r.Budget = ledger
	e, err := pdstest.NewEngine(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	other := outline.New(pdstest.Login(t, srv, a, t.TempDir(), nil))
	did := a.DID.String()

	top := enginetest.Insert(t, e, outline.Position{}, "Parent")[0]
	itemA := enginetest.Insert(t, e, outline.Position{Parent: top}, "A")[0]

	// nobody else writes: the next writes ask nothing
	heads, diffs, writes := r.Stats.Heads.Load(), r.Stats.Diffs.Load(), r.Stats.Writes.Load()
	enginetest.Insert(t, e, outline.Position{Parent: top, Where: "last"}, "C1")
	enginetest.Insert(t, e, outline.Position{Parent: top, Where: "last"}, "C2")
	if h, d, w := r.Stats.Heads.Load()-heads, r.Stats.Diffs.Load()-diffs, r.Stats.Writes.Load()-writes; h != 0 || d != 0 || w != 2 {
		t.Fatalf("two writes after our own: %d getLatestCommit, %d getRepo, %d applyWrites; want 0, 0, 2", h, d, w)
	}
	spent := func() int { return budget.Limit - ledger.Left() }

	// 1. the other client inserts F first under Parent; ours, planned on
	// our own last commit, inserts B first
	enginetest.Insert(t, other, outline.Position{Parent: top, Where: "first"}, "F")
	heads, writes, before := r.Stats.Heads.Load(), r.Stats.Writes.Load(), spent()
	enginetest.Insert(t, e, outline.Position{Parent: top, Where: "first"}, "B")
	if h, w := r.Stats.Heads.Load()-heads, r.Stats.Writes.Load()-writes; w != 2 || h != 1 {
		t.Errorf("an insert that met another writer's commit: %d applyWrites, %d getLatestCommit; want 2 (one refused) and 1", w, h)
	}
	if got := spent() - before; got != 6 {
		t.Errorf("the ledger counts %d points for the insert, want 6 (3 refused, 3 landed)", got)
	}
	tr := pdstest.ReadBack(t, ctx, srv, did)
	if p := tr.CheckConsistent(true); len(p) > 0 {
		t.Fatalf("read back: %v", p)
	}
	var kids []string
	var keys []string
	for _, n := range tr.Nodes[top].Children {
		kids = append(kids, n.Text())
		keys = append(keys, n.SortKey())
	}
	if want := []string{"B", "F", "A", "C1", "C2"}; !slices.Equal(kids, want) {
		t.Fatalf("Parent's children read back: %v, want %v", kids, want)
	}
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			t.Fatalf("sortKeys not strictly increasing (as bytes): %q", keys)
		}
	}

	// 2. the other client edits A; ours edits A on the stale text: planned
	// again, what undo restores is the other client's text
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		s := "A, edited elsewhere"
		return intent.Edit{Node: itemA, Text: &s}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	writes = r.Stats.Writes.Load()
	mine := "A, mine"
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Edit{Node: itemA, Text: &mine}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	if w := r.Stats.Writes.Load() - writes; w != 2 {
		t.Errorf("an edit that met another writer's commit: %d applyWrites, want 2 (one refused)", w)
	}
	if got := pdstest.ReadBack(t, ctx, srv, did).Nodes[itemA].Text(); got != mine {
		t.Fatalf("A read back: %q, want %q", got, mine)
	}
	if _, err := pdstest.UndoOp(ctx, e, ""); err != nil {
		t.Fatal(err)
	}
	if got := pdstest.ReadBack(t, ctx, srv, did).Nodes[itemA].Text(); got != "A, edited elsewhere" {
		t.Fatalf("A after undo read back: %q, want the other client's text", got)
	}

	// 2b. the other client changes A again; ours sets it to the text the
	// commit known still has (the undo above was our own last commit):
	// "nothing to change" on the guess would be wrong, so it asks and writes
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		s := "A, elsewhere again"
		return intent.Edit{Node: itemA, Text: &s}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	undone := "A, edited elsewhere"
	if out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Edit{Node: itemA, Text: &undone}).Plan(p) }); err != nil || out.NoChange {
		t.Fatalf("an edit to the text the guess already has, after another client changed it: %v (no change: %v)", err, out != nil && out.NoChange)
	}
	if got := pdstest.ReadBack(t, ctx, srv, did).Nodes[itemA].Text(); got != undone {
		t.Fatalf("A read back: %q, want %q", got, undone)
	}

	// 3. the other client deletes Parent's subtree; ours inserts under it
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Delete{Node: top, Children: "subtree"}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	count := pdstest.RecordCount(pdstest.ReadBack(t, ctx, srv, did))
	_, err = e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{Parent: top}, Nodes: []intent.NewNode{{Text: "orphan"}}}.Plan(p)
	})
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrParentMissing) {
		t.Fatalf("an insert under a bullet deleted elsewhere: %v, want parent_missing", err)
	}
	if got := pdstest.RecordCount(pdstest.ReadBack(t, ctx, srv, did)); got != count {
		t.Fatalf("the repository holds %d records after a refused insert, want %d", got, count)
	}
	if inc := pdstest.IncompleteOps(e); len(inc) > 0 {
		t.Fatalf("operations left incomplete: %+v", inc)
	}

	// 4. the other client makes a bullet, and ours (told its key) inserts
	// under it: the commit known does not have it, so that refusal is not
	// given before asking
	enginetest.Insert(t, e, outline.Position{}, "ours")
	elsewhere := enginetest.Insert(t, other, outline.Position{}, "Made elsewhere")[0]
	heads = r.Stats.Heads.Load()
	enginetest.Insert(t, e, outline.Position{Parent: elsewhere}, "under it")
	if h := r.Stats.Heads.Load() - heads; h != 1 {
		t.Errorf("an insert under a bullet the commit known lacks: %d getLatestCommit, want 1", h)
	}
	if kids := pdstest.ReadBack(t, ctx, srv, did).Nodes[elsewhere].Children; len(kids) != 1 || kids[0].Text() != "under it" {
		t.Fatalf("read back under the bullet made elsewhere: %d children", len(kids))
	}

	// 5. a first batch dearer than TrustPoints is not sent on a guess
	enginetest.Insert(t, e, outline.Position{}, "cheap")
	heads, writes = r.Stats.Heads.Load(), r.Stats.Writes.Load()
	var many []intent.NewNode
	for i := range outline.TrustPoints/3 + 1 {
		many = append(many, intent.NewNode{Text: fmt.Sprint("many ", i)})
	}
	if _, err := pdstest.InsertOp(ctx, e, "", many); err != nil {
		t.Fatal(err)
	}
	if h, w := r.Stats.Heads.Load()-heads, r.Stats.Writes.Load()-writes; h != 1 || w != 1 {
		t.Errorf("an insert of %d bullets after our own commit: %d getLatestCommit, %d applyWrites; want 1 and 1", len(many), h, w)
	}

	// past TrustOwn, a write asks again
	enginetest.Insert(t, e, outline.Position{}, "later")
	pds.AgeOwnCommit(r, pds.TrustOwn)
	heads = r.Stats.Heads.Load()
	enginetest.Insert(t, e, outline.Position{}, "much later")
	if h := r.Stats.Heads.Load() - heads; h != 1 {
		t.Fatalf("a write %s after our own last commit: %d getLatestCommit, want 1", pds.TrustOwn, h)
	}
}
