package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

func importTool() Tool {
	t := Tool{Name: "import_outline", Title: "Import Markdown or OPML", Family: FamilyEdit, Output: writeOutput,
		Description: "Insert a Markdown or OPML document under a parent; keys map to input lines.",
		Schema: obj(map[string]any{
			"content":  pRef,
			"format":   enum("", "markdown", "opml"),
			"parent":   pRef,
			"after":    pAfter,
			"position": pPosition,
			"dry_run":  pDryRun,
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
		out, err := env.Engine.Do(ctx, intent.Insert{Pos: position(a, "parent"), Nodes: d.Nodes}, dry)
		if err != nil {
			return toolError(err)
		}
		res := writeResult(out, a)
		// add the input line of each created bullet
		type line struct {
			RKey string `json:"rkey"`
			Line int    `json:"line"`
			Text string `json:"text,omitempty"`
		}
		var lines []line
		var b strings.Builder
		for _, c := range out.Plan.Created {
			if n, ok := d.Lines[c.Input]; ok {
				lines = append(lines, line{c.RKey, n, c.Text})
				fmt.Fprintf(&b, "line %d → ·%s\n", n, c.RKey)
			}
		}
		var sc map[string]any
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &sc); err != nil {
			return nil, err
		}
		sc["lines"] = lines
		if len(d.Notes) > 0 {
			// what of the input was not imported (an export's Detached
			// section), in the diagnostics and the text
			diags, _ := sc["diagnostics"].([]any)
			for _, n := range d.Notes {
				diags = append(diags, n)
			}
			sc["diagnostics"] = diags
			res.Content = append(res.Content, mcp.NewTextContent("Note: "+strings.Join(d.Notes, "\nNote: ")))
		}
		res.StructuredContent = sc
		if b.Len() > 0 {
			res.Content = append(res.Content, mcp.NewTextContent("Created from input lines:\n"+b.String()))
		}
		return res, nil
	}
	return t
}
