package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/view"
)

// otherTrees adapts env.Others for package view (nil when offline).
func otherTrees(ctx context.Context, env *Env) view.Trees {
	if env.Others == nil {
		return nil
	}
	return func(did string) (*outline.Tree, error) { return env.Others(ctx, did) }
}

// readTree returns the tree to read: the user's own, or repo's (a handle or
// DID, read-only). handle is the handle the caller named, if any.
func readTree(ctx context.Context, env *Env, repo string) (t *outline.Tree, handle string, res *mcp.CallToolResult, err error) {
	t, err = env.Engine.Tree(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	r := strings.TrimPrefix(strings.TrimSpace(repo), "@")
	if r == "" || r == t.DID.String() {
		return t, "", nil, nil
	}
	if env.Others == nil {
		return nil, "", mcp.NewToolResultError(fmt.Sprintf("reading %s needs the PDS backend (bulleted-mcp serve --pds URL); offline only your own repository (%s) can be read; omit repo", r, t.DID)), nil
	}
	if t, err = env.Others(ctx, r); err != nil {
		return nil, "", mcp.NewToolResultError(fmt.Sprintf("cannot read %s: %v; check the handle or DID", r, err)), nil
	}
	if !strings.HasPrefix(r, "did:") {
		handle = r
	}
	return t, handle, nil, nil
}

func readTools() []Tool {
	read := Tool{Name: "read_outline", Title: "Read the outline", ReadOnly: true, Idempotent: true,
		Description: "Read the outline, or zoom to one bullet (node), to a depth (default 3), in pages of limit rows (default 500). format text (default) is compact: one line per bullet ending with ·RKEY, the record key to use in other tools; json gives app.bulleted.getOutline-style rows (nested, or flat pre-order with flat=true) with the outline title in effect; markdown and opml for export. A cut result says why (stop: limit or depth) and, when cut by limit, carries cursor: pass it back with the same node and depth for the next page. Mirrors show their original's subtree and contributors' bullets render in place, both read-only. To find bullets, use search instead of paging.",
		Schema: obj(map[string]any{
			"repo":   str("Handle or DID of the repository to read (default: your own). Other identities' outlines need the PDS backend."),
			"node":   str("Zoom to this bullet (" + refDesc + ")."),
			"depth":  map[string]any{"type": "integer", "minimum": 1, "maximum": 50, "description": "Levels below the root to show (default 3)."},
			"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": 5000, "description": "Rows in this page, across all levels (default 500)."},
			"cursor": str("Continue a cut read: the cursor of the previous page (same node and depth)."),
			"notes":  boolean("Text format: show note text under each bullet instead of a [note] marker (default false)."),
			"flat":   boolean("JSON format: rows flat in pre-order with parent fields, as app.bulleted.getOutline (default false: nested children)."),
			"format": enum("Output format (default text).", "text", "json", "markdown", "opml"),
		})}
	read.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		depth, err := a.Int("depth", 3)
		if err != nil {
			return badArgs("%v", err)
		}
		limit, err := a.Int("limit", view.DefaultLimit)
		if err != nil {
			return badArgs("%v", err)
		}
		if limit < 1 {
			return badArgs("limit must be at least 1")
		}
		notes, err := a.Bool("notes", false)
		if err != nil {
			return badArgs("%v", err)
		}
		flat, err := a.Bool("flat", false)
		if err != nil {
			return badArgs("%v", err)
		}
		if depth < 1 {
			depth = 1
		}
		t, handle, res, err := readTree(ctx, env, a.Str("repo"))
		if res != nil || err != nil {
			return res, err
		}
		var root *outline.Item
		if n := a.Str("node"); n != "" {
			if root, err = t.Resolve(n); err != nil {
				return toolError(err)
			}
		}
		other := otherTrees(ctx, env)
		contrib, problems := view.Gather(t, other)
		v, err := view.Read(t, root, view.Options{Depth: depth, Limit: limit, Cursor: a.Str("cursor"), Contributions: contrib})
		if errors.Is(err, view.ErrCursor) {
			return badArgs("%v; call read_outline without cursor to start again", err)
		} else if err != nil {
			return nil, err
		}
		v.Handle = handle
		problems = append(problems, v.Enrich(t, other)...)
		page := map[string]any{"did": v.DID, "truncated": v.Truncated, "stop": v.Stop, "total": v.Total}
		if v.Cursor != "" {
			page["cursor"] = v.Cursor
		}
		if v.Outline != nil {
			page["outline"] = v.Outline
		}
		if handle != "" {
			page["handle"] = handle
		}
		if c := v.Continue("read_outline"); c != "" {
			page["next"] = c
		}
		switch a.Str("format") {
		case "", "text":
			txt := v.Text(notes)
			for _, p := range problems {
				txt += "Note: " + p + "\n"
			}
			page["text"] = txt
			return mcp.NewToolResultStructured(page, txt), nil
		case "json":
			out := v
			if flat {
				out = v.FlatView()
			}
			summary := fmt.Sprintf("%d bullet(s) of %s (stop: %s)", v.Total, v.DID, v.Stop)
			if c := v.Continue("read_outline"); c != "" {
				summary += "; " + c
			}
			return mcp.NewToolResultStructured(out, summary), nil
		case "markdown":
			md := v.Markdown()
			page["markdown"] = md
			return mcp.NewToolResultStructured(page, md), nil
		case "opml":
			o := v.OPML()
			page["opml"] = o
			return mcp.NewToolResultStructured(page, o), nil
		}
		return badArgs("format must be text, json, markdown or opml")
	}

	detached := Tool{Name: "list_detached", Title: "List detached bullets", ReadOnly: true, Idempotent: true,
		Description: "List bullets and mirrors whose parent does not resolve (deleted, not a node, or a cycle). Re-attach one with move_node parent=<node> or parent=top. Bullets you wrote under another identity's outline that admits you as a contributor are not detached: they are listed apart as contributions and must stay where they are.",
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
		rows, contributions := []row{}, []row{}
		owners := map[string]*outline.Tree{}
		var b, c strings.Builder
		for _, it := range t.Detached {
			if owner := contributionOwner(ctx, env, t, it, owners); owner != "" {
				contributions = append(contributions, row{it.Key(), it.Str("text"), it.Str("parent"), "a contribution to " + owner + "'s outline"})
				fmt.Fprintf(&c, "- %s ·%s (in %s's shared outline: leave it there)\n", it.Str("text"), it.Key(), owner)
				continue
			}
			reason := it.Detached
			if strings.HasPrefix(reason, "parent is in another repository") {
				reason += " (if that outline lists you as a contributor it is shared, not detached; it could not be checked here)"
			}
			rows = append(rows, row{it.Key(), it.Str("text"), it.Str("parent"), reason})
			fmt.Fprintf(&b, "- %s ·%s (%s)\n", it.Str("text"), it.Key(), reason)
		}
		if len(rows) == 0 {
			b.WriteString("No detached bullets.\n")
		}
		if len(contributions) > 0 {
			b.WriteString("Contributions to shared outlines (not detached, do not move):\n" + c.String())
		}
		return mcp.NewToolResultStructured(map[string]any{"detached": rows, "contributions": contributions}, b.String()), nil
	}
	return []Tool{read, detached, searchTool(), importTool()}
}

// contributionOwner returns the owner DID when it, detached in t because its
// parent is in another repository, hangs under a bullet of an outline that
// admits t's identity as a contributor; "" otherwise (or offline).
func contributionOwner(ctx context.Context, env *Env, t *outline.Tree, it *outline.Item, cache map[string]*outline.Tree) string {
	if env.Others == nil {
		return ""
	}
	u, err := syntax.ParseATURI(it.Str("parent"))
	if err != nil || u.Authority().String() == t.DID.String() {
		return ""
	}
	did := u.Authority().String()
	ot, seen := cache[did]
	if !seen {
		ot, _ = env.Others(ctx, did)
		cache[did] = ot
	}
	if ot == nil || !view.Contributed(ot, t, it) {
		return ""
	}
	return did
}
