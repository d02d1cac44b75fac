package tools

import (
	"context"
	"errors"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

func importTool() Tool {
	t := Tool{Name: "import_outline", Title: "Import Markdown or OPML", Family: FamilyEdit, Output: writeOutput,
		Description: "Insert a Markdown or OPML document; keys map to input lines.",
		Schema: obj(map[string]any{
			"content":  pRef,
			"format":   enum("", "markdown", "opml"),
			"parent":   pRef,
			"after":    pAfter,
			"position": pPosition,
			"dry_run":  pDryRun,
			"plan":     pPlan,
			"all_keys": boolean(""),
		}, "content")}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		parse := markup.Markdown
		switch a.Str("format") {
		case "", "markdown":
		case "opml":
			parse = markup.OPML
		default:
			return badArgs("format must be markdown or opml")
		}
		d, err := parse(a.Str("content"))
		if errors.Is(err, markup.ErrSyntax) {
			return badArgs("%v", err)
		} else if err != nil {
			return nil, err
		}
		in := intent.Insert{Pos: position(a, "parent"), Nodes: d.Nodes}
		id := a.Str("plan")
		if id != "" && dry {
			return badArgs("plan applies a dry run's plan: pass it without dry_run")
		}
		out, ask, err := guarded(ctx, env, "import_outline", in, id, func(ctx context.Context) (*outline.Outcome, error) {
			if id != "" {
				return env.Engine.Apply(ctx, id, in)
			}
			return env.Engine.Do(ctx, in, dry)
		})
		if ask != nil {
			return ask, nil
		}
		if err != nil {
			return toolError(linePaths(err, "content", d.Lines))
		}
		defer env.settle(out)
		// each created bullet's input line; what of the input was not
		// imported (an export's Detached section) in the diagnostics
		all, err := a.Bool("all_keys", false)
		if err != nil {
			return badArgs("%v", err)
		}
		return writeReport(out, report{lines: d.Lines, notes: d.Notes, allKeys: all}), nil
	}
	return t
}
