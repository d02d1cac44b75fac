package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
)

func readTools() []Tool {
	read := Tool{Name: "read_outline", Title: "Read the outline", ReadOnly: true, Idempotent: true,
		Description: "Read the outline, or zoom to one bullet (node), to a depth (default 3). format text (default) is compact: one line per bullet ending with ·RKEY, the record key to use in other tools; json gives app.bulleted.getOutline-style rows nested with children; markdown and opml for export.",
		Schema: obj(map[string]any{
			"repo":   str("Handle or DID of the repository to read (default: your own). Other identities' outlines need the PDS backend."),
			"node":   str("Zoom to this bullet (" + refDesc + ")."),
			"depth":  map[string]any{"type": "integer", "minimum": 1, "maximum": 50, "description": "Levels below the root to show (default 3)."},
			"format": enum("Output format (default text).", "text", "json", "markdown", "opml"),
		})}
	read.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		depth, err := a.Int("depth", 3)
		if err != nil {
			return badArgs("%v", err)
		}
		if depth < 1 {
			depth = 1
		}
		t, err := env.Engine.Tree(ctx)
		if err != nil {
			return nil, err
		}
		if r := strings.TrimPrefix(a.Str("repo"), "@"); r != "" && r != t.DID.String() {
			if env.Others == nil {
				return mcp.NewToolResultError(fmt.Sprintf("reading %s needs the PDS backend (bulleted-mcp serve --pds URL); offline only your own repository (%s) can be read; omit repo", r, t.DID)), nil
			}
			if t, err = env.Others(ctx, r); err != nil {
				return mcp.NewToolResultError(fmt.Sprintf("cannot read %s: %v; check the handle or DID", r, err)), nil
			}
		}
		var root *outline.Item
		if n := a.Str("node"); n != "" {
			if root, err = t.Resolve(n); err != nil {
				return toolError(err)
			}
		}
		v := t.Read(root, depth)
		var other outline.Trees
		if env.Others != nil {
			other = func(did string) (*outline.Tree, error) { return env.Others(ctx, did) }
		}
		problems := v.Enrich(t, other)
		switch a.Str("format") {
		case "", "text":
			txt := v.Text()
			for _, p := range problems {
				txt += "Note: " + p + "\n"
			}
			return mcp.NewToolResultStructured(map[string]any{"did": v.DID, "text": txt, "truncated": v.Truncated, "stop": v.Stop}, txt), nil
		case "json":
			return mcp.NewToolResultStructured(v, fmt.Sprintf("%d bullet(s) of %s (stop: %s)", v.Total, v.DID, v.Stop)), nil
		case "markdown":
			md := v.Markdown()
			return mcp.NewToolResultStructured(map[string]any{"did": v.DID, "markdown": md, "truncated": v.Truncated}, md), nil
		case "opml":
			o := v.OPML()
			return mcp.NewToolResultStructured(map[string]any{"did": v.DID, "opml": o, "truncated": v.Truncated}, o), nil
		}
		return badArgs("format must be text, json, markdown or opml")
	}

	detached := Tool{Name: "list_detached", Title: "List detached bullets", ReadOnly: true, Idempotent: true,
		Description: "List bullets and mirrors whose parent does not resolve (deleted, in another repository, not a node, or a cycle). Re-attach one with move_node parent=<node> or parent=top.",
		Schema:      obj(map[string]any{})}
	detached.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		t, err := env.Engine.Tree(ctx)
		if err != nil {
			return nil, err
		}
		type row struct {
			RKey   string `json:"rkey"`
			Text   string `json:"text"`
			Parent string `json:"parent"`
			Reason string `json:"reason"`
		}
		rows := []row{}
		var b strings.Builder
		for _, it := range t.Detached {
			rows = append(rows, row{it.Key(), it.Str("text"), it.Str("parent"), it.Detached})
			fmt.Fprintf(&b, "- %s ·%s (%s)\n", it.Str("text"), it.Key(), it.Detached)
		}
		if len(rows) == 0 {
			b.WriteString("No detached bullets.")
		}
		return mcp.NewToolResultStructured(map[string]any{"detached": rows}, b.String()), nil
	}
	return []Tool{read, detached}
}
