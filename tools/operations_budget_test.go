package tools_test

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
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// killedRepo is the embedded store with a write budget charged as the PDS
// backend charges it; while kill is set it plays a process killed while
// sending its second batch (charged, not sent, its reservation held by a
// process that is gone and never released).
type killedRepo struct {
	*store.Local
	live, dead *budget.Ledger
	mu         sync.Mutex
	calls      int
	kill       bool
}

func (r *killedRepo) CheckBudget(ctx context.Context, cost int) (int, error) {
	return budget.CheckPlan(r.live, cost)
}

func (r *killedRepo) ReservePlan(ctx context.Context, cost int) (context.Context, func(), error) {
	r.mu.Lock()
	kill := r.kill
	r.mu.Unlock()
	if !kill {
		return budget.ReservePlan(ctx, r.live, cost)
	}
	res, err := r.dead.Reserve(cost)
	if err != nil {
		return ctx, nil, err
	}
	return budget.WithReservation(ctx, res), func() {}, nil
}

func (r *killedRepo) Apply(ctx context.Context, swap string, ws []store.Write) (*store.Result, error) {
	if res := budget.ReservationFrom(ctx); res != nil {
		if _, err := res.Charge(budget.BatchFrom(ctx), store.Cost(ws)); err != nil {
			return nil, err
		}
	}
	r.mu.Lock()
	r.calls++
	kill := r.kill && r.calls == 2
	r.mu.Unlock()
	if kill {
		return nil, errors.New("killed while sending")
	}
	return r.Local.Apply(ctx, swap, ws)
}

func (r *killedRepo) GiveBack(_ context.Context, opID string, landed []string) (int, error) {
	return r.live.GiveBack(opID, landed)
}

func (r *killedRepo) Charged(_ context.Context, key string) (int, bool) { return r.live.Charged(key) }

// TestOperationsBudgetHeld: an operation stopped by a killed process says,
// in both parts of the operations list, how many points the write budget
// holds for its unknown batch, that resume uses that charge and undo gives
// it back; after the undo the points are back and the list says so.
func TestOperationsBudgetHeld(t *testing.T) {
	ctx := context.Background()
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
	r := &killedRepo{Local: openLocal(t), live: live, dead: dead, kill: true}
	e := outline.New(r)
	ns := make([]intent.NewNode, 300) // 200 + 100 bullets: 600 + 300 points
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("k%d", i)}
	}
	_, err = e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Nodes: ns}.Plan(p) })
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	id := oe.Data.(outline.OpReport).ID
	r.mu.Lock()
	r.kill = false
	r.mu.Unlock()

	c := inProcess(t, &tools.Env{Engine: e})
	res, sc := call(t, c, "operations", map[string]any{})
	msg := text(res)
	if !strings.Contains(msg, "holds 300 point(s)") || !strings.Contains(msg, "resume uses that charge") || !strings.Contains(msg, "undo gives it back") {
		t.Fatalf("the list does not say what the budget holds:\n%s", msg)
	}
	op := sc["operations"].([]any)[0].(map[string]any)
	if op["id"] != id || op["budgetHeld"] != float64(300) {
		t.Fatalf("structured row %v, want id %s with budgetHeld 300", op, id)
	}
	if got := live.Spent(time.Hour); got != 900 {
		t.Fatalf("spent %d, want 900", got)
	}
	if res, _ := call(t, c, "undo", map[string]any{"operation": id}); res.IsError {
		t.Fatalf("undo: %s", text(res))
	}
	if got := live.Spent(time.Hour); got != 600+200 {
		t.Fatalf("after the undo spent %d, want 800 (the killed batch's 300 given back)", got)
	}
	res, _ = call(t, c, "operations", map[string]any{})
	if msg := text(res); strings.Contains(msg, "holds 300") || !strings.Contains(msg, "300 point(s) charged by the stopped process for a batch that never landed were given back") {
		t.Fatalf("after the undo the list says:\n%s", msg)
	}
}
