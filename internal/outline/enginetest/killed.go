package enginetest

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// KilledRepo is the embedded store with a write budget charged as the PDS
// backend charges it (each batch under its key before it is sent). Until
// Revive it plays a process killed while sending its batch number killAt
// (counted from 0): the batch is charged, not sent, and that process's
// reservation (held by a process that is gone) is never released. Live is
// the ledger of the process that goes on.
type KilledRepo struct {
	*store.Local
	Live, dead *budget.Ledger
	mu         sync.Mutex
	calls      int
	killAt     int
}

// NewKilledRepo is l with the ledger at path, as a killed process (one that
// has exited) and a live one share it.
func NewKilledRepo(t testing.TB, l *store.Local, path string, killAt int) *KilledRepo {
	t.Helper()
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
	return &KilledRepo{Local: l, Live: live, dead: dead, killAt: killAt}
}

// Revive makes it the live process: nothing is killed any more.
func (r *KilledRepo) Revive() {
	r.mu.Lock()
	r.killAt = -1
	r.mu.Unlock()
}

// CheckBudget implements store.Budgeted.
func (r *KilledRepo) CheckBudget(ctx context.Context, cost int) (int, error) {
	return budget.CheckPlan(r.Live, cost)
}

// ReservePlan implements store.Budgeted: the killed process's reservation
// is never released.
func (r *KilledRepo) ReservePlan(ctx context.Context, cost int) (context.Context, func(), error) {
	r.mu.Lock()
	killing := r.killAt >= 0
	r.mu.Unlock()
	if !killing {
		return budget.ReservePlan(ctx, r.Live, cost)
	}
	res, err := r.dead.Reserve(cost)
	if err != nil {
		return ctx, nil, err
	}
	return budget.WithReservation(ctx, res), func() {}, nil
}

// Apply charges the batch, then commits it, unless it is the batch the
// process is killed while sending.
func (r *KilledRepo) Apply(ctx context.Context, swap string, ws []store.Write) (*store.Result, error) {
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

// GiveBack implements the budget's give-back on the live ledger.
func (r *KilledRepo) GiveBack(_ context.Context, opID string, landed []string) (int, error) {
	return r.Live.GiveBack(opID, landed)
}

// Charged is what the live ledger holds under key.
func (r *KilledRepo) Charged(_ context.Context, key string) (int, bool) {
	return r.Live.Charged(key)
}
