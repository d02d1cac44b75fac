package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// The operations surface: undo, list what was recorded, resume an
// incomplete operation.

func undoTool() Tool {
	t := Tool{Name: "undo", Title: "Undo", Family: FamilyOps,
		Description: "Undo the newest operations (steps) or one (operation=ID; of an incomplete one, what landed).",
		Schema:      obj(map[string]any{"steps": integer(1, 100, ""), "operation": pRef, "dry_run": pDryRun}),
		Output:      writeOutput,
		Ann:         Annotations{Destructive: true}}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		steps, err := a.Int("steps", 1)
		if err != nil {
			return badArgs("%v", err)
		}
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		req := outline.UndoRequest{Steps: steps, Operation: a.Str("operation")}
		out, ask, err := guarded(ctx, env, "undo", req, "", func(ctx context.Context) (*outline.Outcome, error) {
			return env.Engine.Undo(ctx, steps, req.Operation, dry)
		})
		if ask != nil {
			return ask, nil
		}
		if err != nil {
			return toolError(err)
		}
		defer env.settle(out)
		return writeResult(out, a), nil
	}
	return t
}

func operationsTool() Tool {
	t := Tool{Name: "operations", Title: "Operations", Family: FamilyOps, Output: opsOutput,
		Description: "List recorded operations, or resume=ID to finish an incomplete one.",
		Schema:      obj(map[string]any{"resume": pRef, "incomplete": boolean(""), "dry_run": pDryRun, "cursor": pRef})}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		if id := a.Str("resume"); id != "" {
			out, err := env.Engine.Resume(ctx, id, dry)
			if err != nil {
				return toolError(err)
			}
			return writeResult(out, a), nil
		}
		only, err := a.Bool("incomplete", false)
		if err != nil {
			return badArgs("%v", err)
		}
		ops, err := env.Engine.Operations()
		if err != nil {
			return toolError(err)
		}
		// what the write budget holds for an incomplete operation's next
		// batch, charged by a process that stopped (killed) before it knew
		// whether the batch landed
		held := map[string]int{}
		for _, op := range ops {
			if op.State != outline.OpIncomplete {
				continue
			}
			if points, open, err := env.Engine.HeldCharge(ctx, op.ID); err == nil && open && points > 0 {
				held[op.ID] = points
			}
		}
		return opsPageHeld(ops, only, a.Str("cursor"), held), nil
	}
	return t
}

// heldNote says what the write budget holds for an operation stopped by a
// killed process.
func heldNote(points int) string {
	return fmt.Sprintf("the write budget holds %d point(s) charged for its next batch by the process that stopped before it knew whether that batch landed: resume uses that charge (the batch is not charged again); undo gives it back if the batch did not land", points)
}

// opsRow is an operation as listed, with what the write budget holds for it.
type opsRow struct {
	outline.OpReport
	// BudgetHeld: points charged for its next batch by a process that
	// stopped before it knew whether the batch landed (see heldNote).
	BudgetHeld int    `json:"budgetHeld,omitempty"`
	BudgetNote string `json:"budgetNote,omitempty"`
}

// opsPage lists ops (newest first) from after the operation cursor names,
// as many as fit one result: the rest is said, with the cursor to go on.
func opsPage(ops []outline.OpReport, only bool, cursor string) *mcp.CallToolResult {
	return opsPageHeld(ops, only, cursor, nil)
}

// opsPageHeld is opsPage saying, for the operations in held, the points
// the write budget holds for them (heldNote).
func opsPageHeld(ops []outline.OpReport, only bool, cursor string, held map[string]int) *mcp.CallToolResult {
	from := strings.TrimPrefix(cursor, "op.")
	var b strings.Builder
	rows := []any{}
	size, more, last := 0, 0, ""
	started := from == ""
	for _, op := range ops {
		if !started {
			started = op.ID == from
			continue
		}
		if only && op.State != "incomplete" {
			continue
		}
		var line strings.Builder
		fmt.Fprintf(&line, "- %s %s: %s (%d of %d batches, %d of %d writes landed)", op.ID, op.State, op.Summary, op.Landed, op.Batches, op.LandedWrites, op.Writes)
		if op.Reason != "" {
			fmt.Fprintf(&line, "; stopped: %s", op.Reason)
		}
		if op.Next != "" {
			fmt.Fprintf(&line, "; %s", op.Next)
		}
		row := opsRow{OpReport: op}
		if p := held[op.ID]; p > 0 {
			row.BudgetHeld, row.BudgetNote = p, heldNote(p)
			fmt.Fprintf(&line, "; %s", row.BudgetNote)
		}
		line.WriteString("\n")
		raw, _ := json.Marshal(row)
		if more > 0 || size+line.Len()+len(raw)+1 > MaxResult-4_000 {
			more++
			continue
		}
		size += line.Len() + len(raw) + 1
		rows = append(rows, row)
		b.WriteString(line.String())
		last = op.ID
	}
	sc := map[string]any{"operations": rows}
	switch {
	case !started:
		res, _ := badArgs("cursor %q names no operation listed: call operations without a cursor", cursor)
		return res
	case more > 0:
		next := "op." + last
		msg := fmt.Sprintf("%d older operation(s) not shown, to fit one result: call operations with cursor=%q", more, next)
		fmt.Fprintf(&b, "(%s)\n", msg)
		sc["cursor"] = next
		sc["notices"] = []string{msg}
	case len(rows) == 0:
		b.WriteString("No operations.")
	}
	return mcp.NewToolResultStructured(sc, b.String())
}
