package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
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
		out, err := env.Engine.Undo(ctx, steps, a.Str("operation"), dry)
		if err != nil {
			return toolError(err)
		}
		return writeResult(out, a), nil
	}
	return t
}

func operationsTool() Tool {
	t := Tool{Name: "operations", Title: "Operations", Family: FamilyOps, Output: opsOutput,
		Description: "List recorded operations, or resume=ID to finish an incomplete one.",
		Schema:      obj(map[string]any{"resume": pRef, "incomplete": boolean(""), "dry_run": pDryRun})}
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
		var b strings.Builder
		rows := []any{}
		for _, op := range ops {
			if only && op.State != "incomplete" {
				continue
			}
			rows = append(rows, op)
			fmt.Fprintf(&b, "- %s %s: %s (%d of %d batches, %d of %d writes landed)", op.ID, op.State, op.Summary, op.Landed, op.Batches, op.LandedWrites, op.Writes)
			if op.Reason != "" {
				fmt.Fprintf(&b, "; stopped: %s", op.Reason)
			}
			if op.Next != "" {
				fmt.Fprintf(&b, "; %s", op.Next)
			}
			b.WriteString("\n")
		}
		if len(rows) == 0 {
			b.WriteString("No operations.")
		}
		return mcp.NewToolResultStructured(map[string]any{"operations": rows}, b.String()), nil
	}
	return t
}
