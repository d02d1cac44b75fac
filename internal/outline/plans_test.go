package outline_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestApplyPlan: a dry run's plan id applies exactly the records the dry
// run showed (the same keys and values), also after changes elsewhere in the
// outline; a change where the plan touches it refuses with conflict and
// writes nothing; other arguments, an unknown id and a second use are
// refused.
func TestApplyPlan(t *testing.T) {
	ctx := context.Background()
	repo, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	e := outline.New(repo)
	other := outline.New(repo) // another client of the same repository
	top := enginetest.Insert(t, e, outline.Position{}, "inbox", "archive")
	in := intent.Insert{Pos: outline.Position{Parent: top[0]}, Nodes: []intent.NewNode{{Text: "call the bank"}, {Text: "pay rent"}}}

	dry, err := e.Do(ctx, in, true)
	if err != nil {
		t.Fatal(err)
	}
	if dry.PlanID == "" {
		t.Fatal("a dry run kept no plan")
	}
	// a change elsewhere: the plan still applies as shown
	enginetest.Insert(t, other, outline.Position{Parent: top[1]}, "old stuff")
	if _, err := e.Apply(ctx, dry.PlanID, intent.Insert{Pos: outline.Position{Parent: top[0]}, Nodes: []intent.NewNode{{Text: "other"}}}); !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("other arguments: want invalid, got %v", err)
	}
	out, err := e.Apply(ctx, dry.PlanID, in)
	if err != nil {
		t.Fatal(err)
	}
	s, err := repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.Record{}
	for _, r := range s.Records {
		got[r.Collection+"/"+r.RKey] = r
	}
	for _, w := range dry.Plan.Writes {
		r, ok := got[w.Collection+"/"+w.RKey]
		if !ok || r.Value.Get("text") != w.Value["text"] || r.Value.Get("sortKey") != w.Value["sortKey"] || r.Value.Get("createdAt") != w.Value["createdAt"] {
			t.Fatalf("write %s/%s is not in the repository as the dry run showed it: %v", w.Collection, w.RKey, r.Value)
		}
	}
	if out.Op == nil || len(out.Plan.Writes) != len(dry.Plan.Writes) {
		t.Fatalf("apply: %+v", out)
	}
	if _, err := e.Apply(ctx, dry.PlanID, in); !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("second use: want invalid, got %v", err)
	}
	if _, err := e.Apply(ctx, "p-nonsense", in); !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("unknown id: want invalid, got %v", err)
	}

	// a change where the plan touches it: conflict, nothing written
	in2 := intent.Insert{Pos: outline.Position{Parent: top[1], Where: "first"}, Nodes: []intent.NewNode{{Text: "2025 taxes"}}}
	dry2, err := e.Do(ctx, in2, true)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Insert(t, other, outline.Position{Parent: top[1], Where: "first"}, "someone else's first")
	before, _ := repo.Snapshot(ctx)
	_, err = e.Apply(ctx, dry2.PlanID, in2)
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrConflict) || !strings.Contains(oe.Msg, "someone else's first") {
		t.Fatalf("want a conflict naming the change, got %v", err)
	}
	after, _ := repo.Snapshot(ctx)
	if after.Commit != before.Commit {
		t.Fatal("a refused plan wrote")
	}
}

// TestApplyPlanChildAddedUnderDeleted: a plan that deletes a bullet is
// refused when another client gave that bullet a child since the dry run
// (applying it would leave the child without its parent).
func TestApplyPlanChildAddedUnderDeleted(t *testing.T) {
	ctx := context.Background()
	repo, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	e := outline.New(repo)
	other := outline.New(repo)
	top := enginetest.Insert(t, e, outline.Position{}, "leaf to delete", "keep")
	in := intent.Delete{Node: top[0]}
	dry, err := e.Do(ctx, in, true)
	if err != nil || dry.PlanID == "" {
		t.Fatalf("dry run: %v", err)
	}
	enginetest.Insert(t, other, outline.Position{Parent: top[0]}, "a new child")
	before, _ := repo.Snapshot(ctx)
	if _, err := e.Apply(ctx, dry.PlanID, in); !errors.Is(err, outline.ErrConflict) {
		t.Fatalf("want conflict, got %v", err)
	}
	after, _ := repo.Snapshot(ctx)
	if after.Commit != before.Commit {
		t.Fatal("a refused plan wrote")
	}
}

// TestSupersededPlanDropped: a dry run's plan is forgotten once the same
// intent is applied without it (the same call without dry_run): it could
// only be refused now, and it holds the tree it was planned on. Another
// intent's plan is kept and still applies; a call that is refused drops
// nothing.
func TestSupersededPlanDropped(t *testing.T) {
	ctx := context.Background()
	repo, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	e := outline.New(repo)
	top := enginetest.Insert(t, e, outline.Position{}, "inbox", "archive", "done")
	del := intent.Delete{Node: top[2]}
	dryDel, err := e.Do(ctx, del, true)
	if err != nil {
		t.Fatal(err)
	}
	ins := intent.Insert{Pos: outline.Position{Parent: top[1]}, Nodes: []intent.NewNode{{Text: "old stuff"}}}
	dryIns, err := e.Do(ctx, ins, true)
	if err != nil {
		t.Fatal(err)
	}
	// a call of the same intent that is refused drops nothing
	if _, err := e.Apply(ctx, "p-nonsense", del); err == nil {
		t.Fatal("an unknown plan id applied")
	}
	if e.PlanOf(dryDel.PlanID) == nil {
		t.Fatal("a refused call dropped the plan")
	}
	if _, err := e.Do(ctx, del, false); err != nil {
		t.Fatal(err)
	}
	if e.PlanOf(dryDel.PlanID) != nil {
		t.Fatal("the delete's dry-run plan is still kept after the same delete was applied without it")
	}
	if e.PlanOf(dryIns.PlanID) == nil {
		t.Fatal("another intent's plan was dropped")
	}
	if _, err := e.Apply(ctx, dryDel.PlanID, del); !errors.Is(err, outline.ErrInvalidInput) || !strings.Contains(err.Error(), "dropped once the same call lands without them") {
		t.Fatalf("the superseded plan: want invalid (not known), saying why it may be gone, got %v", err)
	}
	if _, err := e.Apply(ctx, dryIns.PlanID, ins); err != nil {
		t.Fatalf("the other plan: %v", err)
	}
	// the same intent called without its plan and refused (another client
	// deleted the bullet meanwhile): its plan is kept
	del0 := intent.Delete{Node: top[0]}
	dry0, err := e.Do(ctx, del0, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := outline.New(repo).Do(ctx, del0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(ctx, del0, false); err == nil {
		t.Fatal("a delete of a bullet another client deleted was not refused")
	}
	if e.PlanOf(dry0.PlanID) == nil {
		t.Fatal("a refused call dropped its intent's kept plan")
	}
}
