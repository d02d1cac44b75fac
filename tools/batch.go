package tools

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

// batchable are the write tools apply_batch can combine, by name.
func batchable() map[string]Tool {
	m := map[string]Tool{}
	for _, t := range All() {
		if t.Intent != nil {
			m[t.Name] = t
		}
	}
	return m
}

func batchTool() Tool {
	t := Tool{Name: "apply_batch", Title: "Apply several edits at once", Family: FamilyEdit,
		Description: "Write ops [{tool, args}] in order on one snapshot, as one operation.",
		Schema: obj(map[string]any{
			"ops": map[string]any{"type": "array", "items": obj(map[string]any{
				"tool": pRef,
				"args": map[string]any{"type": "object"},
			}, "tool", "args")},
			"dry_run": pDryRun,
			"plan":    pPlan,
		}, "ops"),
		Output: writeOutput,
		Ann:    Annotations{Destructive: true}}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		var ops []struct {
			Tool string `json:"tool"`
			Args Args   `json:"args"`
		}
		if _, err := a.Decode("ops", &ops); err != nil || len(ops) == 0 {
			return badArgs("ops must be a non-empty list of {tool, args}")
		}
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		byName := batchable()
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		steps := make([]outline.Step, len(ops))
		var problems []string
		for i, op := range ops {
			wt, ok := byName[op.Tool]
			if !ok {
				problems = append(problems, fmt.Sprintf("ops[%d].tool: %q is not a write tool (one of %s)", i, op.Tool, strings.Join(names, ", ")))
				continue
			}
			if _, nested := op.Args["dry_run"]; nested {
				problems = append(problems, fmt.Sprintf("ops[%d].args.dry_run: not allowed inside apply_batch; the batch's own dry_run covers every op", i))
				continue
			}
			if _, nested := op.Args["plan"]; nested {
				problems = append(problems, fmt.Sprintf("ops[%d].args.plan: not allowed inside apply_batch; pass the batch's own plan", i))
				continue
			}
			args, err := wt.Check(op.Args)
			if err != nil {
				var oe *outline.Error
				if errors.As(err, &oe) {
					problems = append(problems, fmt.Sprintf("ops[%d] (%s): %s", i, op.Tool, oe.Msg))
					continue
				}
				return toolError(err)
			}
			if wt.Guard != nil {
				if err := wt.Guard(ctx, env, args); err != nil {
					var oe *outline.Error
					if errors.As(err, &oe) {
						e := *oe
						e.Msg = fmt.Sprintf("ops[%d] (%s): %s", i, op.Tool, oe.Msg)
						err = &e
					}
					return toolError(err)
				}
			}
			in, err := wt.Intent(args)
			if err != nil {
				var oe *outline.Error
				if errors.As(err, &oe) {
					problems = append(problems, fmt.Sprintf("ops[%d] (%s): %s", i, op.Tool, oe.Msg))
					continue
				}
				return toolError(err)
			}
			steps[i] = outline.Step{Tool: op.Tool, Intent: in}
		}
		if len(problems) > 0 {
			return toolError(&outline.Error{Kind: outline.ErrInvalidInput, Msg: strings.Join(problems, "; "), Next: "fix the named ops and call again; nothing was written"})
		}
		return runWrite(ctx, env, t.Name, intent.Batch(steps), a, dry)
	}
	return t
}
