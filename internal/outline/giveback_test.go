package outline_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

// killedInsert inserts n top-level bullets with a process that is killed
// while sending batch killAt, and returns the engine (now a live process
// on the same ledger), its repository and the operation's id.
func killedInsert(t *testing.T, n, killAt int) (*outline.Engine, *enginetest.KilledRepo, string) {
	t.Helper()
	dir := t.TempDir()
	r := enginetest.NewKilledRepo(t, openLocal(t, dir+"/repo"), filepath.Join(dir, "budget.json"), killAt)
	e := outline.New(r)
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	ns := make([]intent.NewNode, n)
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("k%d", i)}
	}
	_, err := insertTop(context.Background(), e, ns)
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	r.Revive()
	return e, r, oe.Data.(outline.OpReport).ID
}

// opByID is the operation id as the engine lists it.
func opByID(t *testing.T, e *outline.Engine, id string) outline.OpReport {
	t.Helper()
	ops, err := e.Operations()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.ID == id {
			return op
		}
	}
	t.Fatalf("no operation %s", id)
	return outline.OpReport{}
}

// A batch charged by a process killed while sending it stays counted (it
// may have landed) and is said: the operation holds that charge, which a
// resume uses (no second charge) and an undo that finds the batch did not
// land gives back, reading the ledger back.
func TestKilledChargeGivenBack(t *testing.T) {
	ctx := context.Background()
	const n = 300 // two batches: 200 (600 points) and 100 (300 points)

	t.Run("undo", func(t *testing.T) {
		e, r, id := killedInsert(t, n, 1)
		if got := r.Live.Spent(time.Hour); got != 3*n {
			t.Fatalf("after the kill %d points spent, want %d (both batches charged)", got, 3*n)
		}
		points, open, err := e.HeldCharge(ctx, id)
		if err != nil || points != 300 || !open {
			t.Fatalf("held charge %d, open %v (%v); want 300, open", points, open, err)
		}
		if _, err := e.Undo(ctx, 0, id, false); err != nil {
			t.Fatal(err)
		}
		// the undo deletes the 200 that landed (200 points); the killed
		// batch's 300 are given back
		if got := r.Live.Spent(time.Hour); got != 600+200 {
			t.Fatalf("after the undo %d points spent, want %d", got, 800)
		}
		if op := opByID(t, e, id); !strings.Contains(op.Reason, "300 point(s)") {
			t.Fatalf("the undone operation does not say what was given back: %q", op.Reason)
		}
	})

	t.Run("undo nothing landed", func(t *testing.T) {
		e, r, id := killedInsert(t, n, 0)
		if got := r.Live.Spent(time.Hour); got != 600 {
			t.Fatalf("after the kill %d points spent, want 600", got)
		}
		out, err := e.Undo(ctx, 0, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if !out.NoChange {
			t.Fatalf("undo wrote %d record(s), want none", len(out.Plan.Writes))
		}
		if got := r.Live.Spent(time.Hour); got != 0 {
			t.Fatalf("after the undo %d points spent, want 0 (the batch never landed)", got)
		}
	})

	t.Run("resume", func(t *testing.T) {
		e, r, id := killedInsert(t, n, 1)
		if _, err := e.Resume(ctx, id, false); err != nil {
			t.Fatal(err)
		}
		if got := r.Live.Spent(time.Hour); got != 3*n {
			t.Fatalf("after the resume %d points spent, want %d (the killed batch's charge used, not charged again)", got, 3*n)
		}
		if _, open, _ := e.HeldCharge(ctx, id); open {
			t.Fatal("the resumed operation's charge still reads as open")
		}
		// undone now, everything landed: nothing is given back
		if _, err := e.Undo(ctx, 0, id, false); err != nil {
			t.Fatal(err)
		}
		if got := r.Live.Spent(time.Hour); got != 3*n+n {
			t.Fatalf("after undoing the resumed operation %d points spent, want %d", got, 4*n)
		}
	})
}
