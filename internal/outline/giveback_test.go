package outline_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// budgetRepo is the embedded store with a write budget charged as the PDS
// backend charges it (each batch under its key before it is sent). While
// killAt >= 0 it plays a process killed while sending its batch number
// killAt: the batch is charged, not sent, and the process's reservation
// (held by a process that is gone) is never released.
type budgetRepo struct {
	*store.Local
	live, dead *budget.Ledger
	mu         sync.Mutex
	calls      int
	killAt     int
}

func (r *budgetRepo) CheckBudget(ctx context.Context, cost int) (int, error) {
	return budget.CheckPlan(r.live, cost)
}

func (r *budgetRepo) ReservePlan(ctx context.Context, cost int) (context.Context, func(), error) {
	r.mu.Lock()
	killing := r.killAt >= 0
	r.mu.Unlock()
	if !killing {
		return budget.ReservePlan(ctx, r.live, cost)
	}
	res, err := r.dead.Reserve(cost)
	if err != nil {
		return ctx, nil, err
	}
	return budget.WithReservation(ctx, res), func() {}, nil
}

func (r *budgetRepo) Apply(ctx context.Context, swap string, ws []store.Write) (*store.Result, error) {
	if res := budget.ReservationFrom(ctx); res != nil {
		if _, err := res.Charge(budget.BatchFrom(ctx), store.Cost(ws)); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	n := r.calls
	r.calls++
	kill := r.killAt >= 0 && n == r.killAt
	r.mu.Unlock()
	if kill {
		return nil, errors.New("killed while sending")
	}
	return r.Local.Apply(ctx, swap, ws)
}

func (r *budgetRepo) GiveBack(_ context.Context, opID string, landed []string) (int, error) {
	return r.live.GiveBack(opID, landed)
}

func (r *budgetRepo) Charged(_ context.Context, key string) (int, bool) {
	return r.live.Charged(key)
}

// killedInsert inserts n top-level bullets with a process that is killed
// while sending batch killAt, and returns the engine (now a live process
// on the same ledger), its repository and the operation's id.
func killedInsert(t *testing.T, n, killAt int) (*outline.Engine, *budgetRepo, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "budget.json")
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	dead, err := budget.OpenAs(path, gone.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	live, err := budget.New(path)
	if err != nil {
		t.Fatal(err)
	}
	r := &budgetRepo{Local: openLocal(t, dir+"/repo"), live: live, dead: dead, killAt: killAt}
	e := outline.New(r)
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	ns := make([]intent.NewNode, n)
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("k%d", i)}
	}
	_, err = insertTop(context.Background(), e, ns)
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	r.mu.Lock()
	r.killAt = -1
	r.mu.Unlock()
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
		if got := r.live.Spent(time.Hour); got != 3*n {
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
		if got := r.live.Spent(time.Hour); got != 600+200 {
			t.Fatalf("after the undo %d points spent, want %d", got, 800)
		}
		if op := opByID(t, e, id); !strings.Contains(op.Reason, "300 point(s)") {
			t.Fatalf("the undone operation does not say what was given back: %q", op.Reason)
		}
	})

	t.Run("undo nothing landed", func(t *testing.T) {
		e, r, id := killedInsert(t, n, 0)
		if got := r.live.Spent(time.Hour); got != 600 {
			t.Fatalf("after the kill %d points spent, want 600", got)
		}
		out, err := e.Undo(ctx, 0, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if !out.NoChange {
			t.Fatalf("undo wrote %d record(s), want none", len(out.Plan.Writes))
		}
		if got := r.live.Spent(time.Hour); got != 0 {
			t.Fatalf("after the undo %d points spent, want 0 (the batch never landed)", got)
		}
	})

	t.Run("resume", func(t *testing.T) {
		e, r, id := killedInsert(t, n, 1)
		if _, err := e.Resume(ctx, id, false); err != nil {
			t.Fatal(err)
		}
		if got := r.live.Spent(time.Hour); got != 3*n {
			t.Fatalf("after the resume %d points spent, want %d (the killed batch's charge used, not charged again)", got, 3*n)
		}
		if _, open, _ := e.HeldCharge(ctx, id); open {
			t.Fatal("the resumed operation's charge still reads as open")
		}
		// undone now, everything landed: nothing is given back
		if _, err := e.Undo(ctx, 0, id, false); err != nil {
			t.Fatal(err)
		}
		if got := r.live.Spent(time.Hour); got != 3*n+n {
			t.Fatalf("after undoing the resumed operation %d points spent, want %d", got, 4*n)
		}
	})
}
