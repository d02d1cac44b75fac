package tools_test

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
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestOperationsBudgetHeld: an operation stopped by a killed process says,
// in both parts of the operations list, how many points the write budget
// holds for its unknown batch, that resume uses that charge and undo gives
// it back; after the undo the points are back and the list says so.
func TestOperationsBudgetHeld(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := enginetest.NewKilledRepo(t, openLocal(t), filepath.Join(dir, "budget.json"), 1) // killed sending its second batch
	e := outline.New(r)
	ns := make([]intent.NewNode, 300) // 200 + 100 bullets: 600 + 300 points
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("k%d", i)}
	}
	_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Nodes: ns}.Plan(p) })
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	id := oe.Data.(outline.OpReport).ID
	r.Revive()

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
	if got := r.Live.Spent(time.Hour); got != 900 {
		t.Fatalf("spent %d, want 900", got)
	}
	if res, _ := call(t, c, "undo", map[string]any{"operation": id}); res.IsError {
		t.Fatalf("undo: %s", text(res))
	}
	if got := r.Live.Spent(time.Hour); got != 600+200 {
		t.Fatalf("after the undo spent %d, want 800 (the killed batch's 300 given back)", got)
	}
	res, _ = call(t, c, "operations", map[string]any{})
	if msg := text(res); strings.Contains(msg, "holds 300") || !strings.Contains(msg, "300 point(s) charged by the stopped process for a batch that never landed were given back") {
		t.Fatalf("after the undo the list says:\n%s", msg)
	}
}
