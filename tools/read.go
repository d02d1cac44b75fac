package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
)

// otherTrees adapts env.others() for package view (nil when offline).
func otherTrees(ctx context.Context, env *Env) view.Trees {
	if env.others() == nil {
		return nil
	}
	return func(did string) (*outline.Tree, error) { return env.others()(ctx, did) }
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
	if env.others() == nil {
		return nil, "", typed("unavailable", fmt.Sprintf("reading %s needs the PDS backend (bulleted-mcp serve --pds URL); offline only your own repository (%s) can be read", r, t.DID), "omit repo", false, nil), nil
	}
	if t, err = env.others()(ctx, r); err != nil {
		return nil, "", typed("unavailable", fmt.Sprintf("cannot read %s: %v", r, err), "check the handle or DID, or retry in a moment", true, nil), nil
	}
	if !strings.HasPrefix(r, "did:") {
		handle = r
	}
	return t, handle, nil, nil
}

func readOutlineTool() Tool {
	read := Tool{Name: "read_outline", Title: "Read the outline", Family: FamilyRead, Output: readOutput,
		Ann:         Annotations{ReadOnly: true, Idempotent: true},
		Description: "Read the outline or a subtree (node) to a depth (default 3), limit rows (default 500); a cut page gives a cursor for the next. Lines end with ·RKEY.",
		Schema: obj(map[string]any{
			"repo":   pRepo,
			"node":   pRef,
			"depth":  integer(1, 50, ""),
			"limit":  integer(1, 5000, ""),
			"cursor": pCursor,
			"notes":  boolean(""),
			"flat":   boolean(""),
			"format": enum("", "text", "json", "markdown", "opml"),
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
		cur := t
		t, change := env.pageTree(cur, a.Str("cursor"), view.CursorRev)
		var root *outline.Item
		if n := a.Str("node"); n != "" {
			if root, err = t.Resolve(n); err != nil {
				return toolError(err)
			}
		}
		other := otherTrees(ctx, env)
		contrib, problems := view.Gather(t, other)
		if c := a.Str("cursor"); c != "" {
			change = contributionsChange(change, cur, view.CursorContributions(c), view.ContributionsPrint(contrib))
		}
		var v *view.View
		for {
			v, err = view.Read(t, root, view.Options{Depth: depth, Limit: limit, Cursor: a.Str("cursor"), Contributions: contrib})
			if errors.Is(err, view.ErrCursor) {
				return badArgs("%v; call read_outline without cursor to start again", err)
			} else if err != nil {
				return nil, err
			}
			// a page must fit in one result (~20,000 tokens): fewer rows
			// per page rather than a cut answer
			if limit <= 20 || pageBytes(v, a.Str("format")) <= maxPageBytes {
				break
			}
			limit /= 2
		}
		env.keepPage(t, cur, v.Cursor)
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
			return withChange(mcp.NewToolResultStructured(page, txt), change), nil
		case "json":
			out := v
			if flat {
				out = v.FlatView()
			}
			// the same JSON as text, for clients that show only text
			raw, err := json.Marshal(out)
			if err != nil {
				return nil, err
			}
			txt := string(raw)
			if c := v.Continue("read_outline"); c != "" {
				txt += "\n" + c
			}
			return withChange(mcp.NewToolResultStructured(out, txt), change), nil
		case "markdown":
			md := v.Markdown()
			page["markdown"] = md
			return withChange(mcp.NewToolResultStructured(page, md), change), nil
		case "opml":
			o := v.OPML()
			page["opml"] = o
			return withChange(mcp.NewToolResultStructured(page, o), change), nil
		}
		return badArgs("format must be text, json, markdown or opml")
	}

	return read
}

func listDetachedTool() Tool {
	detached := Tool{Name: "list_detached", Title: "List detached bullets", Family: FamilyRead, Output: detachedOutput,
		Ann:         Annotations{ReadOnly: true, Idempotent: true},
		Description: "List bullets whose parent does not resolve (re-attach: move_node parent=KEY|top).",
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
		owners := env.Engine.Owners()
		var b, c strings.Builder
		for _, it := range t.Detached {
			owner, err := owners.Of(ctx, t, it)
			if owner != "" {
				contributions = append(contributions, row{it.Key(), it.Str("text"), it.Str("parent"), "a contribution to " + owner + "'s outline"})
				fmt.Fprintf(&c, "- %s ·%s (in %s's shared outline: leave it there)\n", it.Str("text"), it.Key(), owner)
				continue
			}
			reason := it.Detached
			if strings.HasPrefix(reason, "parent is in another repository") {
				switch {
				case env.others() == nil || err != nil:
					reason += " (if that outline lists you as a contributor it is shared, not detached; it could not be checked here)"
				default:
					reason += " (no outline there admits you as a contributor under that bullet)"
				}
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
	return detached
}

// maxPageBytes bounds one read_outline page (text and structured content
// together stay under the server's result bound).
const maxPageBytes = 60_000

// pageBytes estimates a page's result size in format.
func pageBytes(v *view.View, format string) int {
	switch format {
	case "json":
		b, _ := json.Marshal(v)
		return 2 * len(b) // structured content and the same JSON as text
	case "markdown":
		return 2 * len(v.Markdown())
	case "opml":
		return 2 * len(v.OPML())
	}
	return 2*len(v.Text(false)) + 512
}
