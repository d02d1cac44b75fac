package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// operationTools are the surface of recorded operations: list them, and
// resume an incomplete one (undo takes operation=ID to roll one back).
func operationTools() []Tool {
	list := Tool{Name: "list_operations", Title: "List operations", ReadOnly: true, Idempotent: true,
		Description: "List the write operations this server recorded, newest first: incomplete ones (stopped part-way, or whose server was killed) with what landed, then finished ones (undo's journal).",
		Schema:      obj(map[string]any{"incomplete": boolean("Only incomplete operations.")})}
	list.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
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

	resume := Tool{Name: "resume_operation", Title: "Resume an operation",
		Description: "Finish an incomplete operation: what landed is found in the repository, the rest is re-checked against the current outline (refused if records it must change were changed since) and committed. To roll it back instead, call undo with operation=ID.",
		Schema:      obj(map[string]any{"id": str("The operation's id (from list_operations or an incomplete result)."), "dry_run": pDryRun}, "id")}
	resume.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		out, err := env.Engine.Resume(ctx, a.Str("id"), dry)
		if err != nil {
			return toolError(err)
		}
		return writeResult(out), nil
	}
	return []Tool{list, resume}
}
