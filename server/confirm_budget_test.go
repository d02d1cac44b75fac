package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// budgeted is an embedded store with a write budget of left points (the
// engine asks it as it asks a PDS's ledger; nothing is charged).
type budgeted struct {
	*store.Local
	left int
}

func (b *budgeted) CheckBudget(_ context.Context, cost int) (int, error) { return b.left, nil }

func (b *budgeted) ReservePlan(ctx context.Context, cost int) (context.Context, func(), error) {
	return ctx, func() {}, nil
}

func budgetEnv(t *testing.T, left int) (*tools.Env, *store.Local) {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rules := tools.DefaultConfirm
	return &tools.Env{Engine: outline.New(&budgeted{Local: l, left: left}), Confirm: &rules}, l
}

func bullets(n int) []any {
	var nodes []any
	for range n {
		nodes = append(nodes, map[string]any{"text": "b"})
	}
	return nodes
}

// TestCostSaid: a dry run and a write say what share of the hourly budget
// they use when it is over a fifth of it (in both parts), and not at a
// fifth exactly.
func TestCostSaid(t *testing.T) {
	env, _ := budgetEnv(t, 4_900)
	env.Confirm = nil
	c := connect(t, env, mcp.ProtocolVersion20251125, nil)
	const mark = "of the hourly write budget"
	// 333 bullets are 999 points; 334 are 1,002, over 1,000
	for _, tc := range []struct {
		n    int
		said bool
	}{{333, false}, {334, true}} {
		for _, dry := range []bool{true, false} {
			res := call(t, c, "insert_after", map[string]any{"nodes": bullets(tc.n), "dry_run": dry}, nil)
			if res.IsError {
				t.Fatalf("%d bullets: %v", tc.n, res.Content)
			}
			text, sc := resultText(res), scJSON(res)
			if strings.Contains(text, mark) != tc.said || strings.Contains(sc, mark) != tc.said {
				t.Fatalf("%d bullets (dry run %v): want said=%v, text %v, structured %v:\n%.400s", tc.n, dry, tc.said, strings.Contains(text, mark), strings.Contains(sc, mark), text)
			}
			if tc.said && !strings.Contains(text, "1002 point(s), 21% of the hourly write budget of 5000") {
				t.Fatalf("the share: %.400s", text)
			}
		}
	}
}

// TestConfirmOverBudget: with elicitation, a write costing more than half
// of the budget left asks first (17 bullets, 51 of 100 points), saying
// why; declined, nothing is written; 16 bullets (48 points, under half) do not ask.
func TestConfirmOverBudget(t *testing.T) {
	env, l := budgetEnv(t, 100)
	p := &person{answer: mcp.ElicitationResponseActionDecline}
	c := connect(t, env, mcp.ProtocolVersion20251125, p)
	res := call(t, c, "insert_after", map[string]any{"nodes": bullets(17)}, nil)
	if !res.IsError || errKind(res) != "declined" {
		t.Fatalf("over half: want declined, got %v %s", res.IsError, errKind(res))
	}
	if len(p.asked) != 1 || !strings.Contains(p.asked[0], "more than half of the 100 point(s) of the write budget left now") {
		t.Fatalf("asked %q", p.asked)
	}
	if n := nodeCount(t, l); n != 0 {
		t.Fatalf("declined: %d bullets written", n)
	}
	p.asked = nil
	if res := call(t, c, "insert_after", map[string]any{"nodes": bullets(16)}, nil); res.IsError || len(p.asked) != 0 {
		t.Fatalf("16 bullets (48 of 100 points): asked %q, %v", p.asked, res.Content)
	}
}
