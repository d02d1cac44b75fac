package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bluesky-social/indigo/atproto/syntax"
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
	// a repo that can never be read is the caller's to fix, not to retry
	if _, perr := syntax.ParseAtIdentifier(r); perr != nil {
		return nil, "", typed("invalid", fmt.Sprintf("repo %q is not a handle or a DID: %v", repo, perr), "give repo as a handle (alice.example.com) or a DID (did:plc:…), or leave it out to read your own outline; nothing was read", false, nil), nil
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
		Description: "Read the outline or node's subtree: depth (default 3), limit rows (default 500); cursor to go on.",
		Schema: obj(map[string]any{
			"repo":   pRepo,
			"node":   pRef,
			"depth":  integer(1, 50, ""),
			"limit":  integer(1, 5000, ""),
			"cursor": pCursor,
			"notes":  boolean(""),
			"flat":   boolean(""),
			"format": enum("", "text", "json", "markdown", "opml"),
			"fields": enum("", "compact", "full"),
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
		format, fields := a.Str("format"), a.Str("fields")
		switch format {
		case "", "text", "json", "markdown", "opml":
		default:
			return badArgs("format must be text, json, markdown or opml")
		}
		if fields == "full" && format != "json" {
			return badArgs("fields=full applies to format=json (rows with every record field, as the app view's getOutline rows)")
		}
		other := otherTrees(ctx, env)
		contrib, gathered := view.Gather(t, other)
		if c := a.Str("cursor"); c != "" {
			change = contributionsChange(change, cur, view.CursorContributions(c), view.ContributionsPrint(contrib))
		}
		// the page's tree is kept for the cursor it gives (paging.go)
		done := func(v *view.View, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
			env.keepPage(t, cur, v.Cursor)
			return withChange(res, change), nil
		}
		// a page must fit in one result: fewer rows per page rather than a
		// cut answer (never a row cut in the middle). Hardly a page of more
		// than firstTry rows fits (each row is a line in the text and one in
		// the structured content): that many are tried first, and the full
		// limit only if they fit.
		asked := limit
		limit = min(limit, firstTry)
		var fits *mcp.CallToolResult
		var fitsV *view.View
		for {
			v, err := view.Read(t, root, view.Options{Depth: depth, Limit: limit, Cursor: a.Str("cursor"), Contributions: contrib, Fields: fields == "full"})
			if errors.Is(err, view.ErrCursor) {
				return badArgs("%v; call read_outline without cursor to start again", err)
			} else if err != nil {
				return nil, err
			}
			v.Handle = handle
			problems := append(append([]string(nil), gathered...), v.Enrich(t, other)...)
			if limit < asked && v.Cursor != "" {
				problems = append(problems, fmt.Sprintf("this page holds %d row(s), fewer than limit=%d, to fit one result (%d KB); the cursor continues after them", v.Total, asked, MaxResult/1000))
			}
			res, err := readResult(v, format, fields == "full", flat, notes, problems)
			if err != nil {
				return nil, err
			}
			size := shownSize(ctx, res, "read_outline") // the part the client is shown
			if size <= ResultBudget && limit < asked && v.Cursor != "" && fits == nil {
				fits, fitsV, limit = res, v, asked // they fit: try them all
				continue
			}
			if size <= ResultBudget {
				return done(v, res)
			}
			if fits != nil {
				return done(fitsV, fits)
			}
			if v.Total <= 1 {
				// one row alone does not fit (a long note, many comments):
				// its longest texts are shortened, and the result says so
				problems = append(problems, clipRows(v, ResultBudget/8)...)
				res, err := readResult(v, format, fields == "full", flat, notes, problems)
				if err != nil {
					return nil, err
				}
				return done(v, res)
			}
			limit = max(1, min(v.Total-1, v.Total*ResultBudget/size))
		}
	}

	return read
}

// firstTry is the most rows a read_outline page is first rendered with.
const firstTry = 1000

// readResult is one read_outline page in format: the text content is the
// rendering asked for, the structured content the page (json: the same
// JSON; text, markdown, opml: the page's paging fields and the rendering).
func readResult(v *view.View, format string, full, flat, notes bool, problems []string) (*mcp.CallToolResult, error) {
	page := map[string]any{"did": v.DID, "truncated": v.Truncated, "stop": v.Stop, "total": v.Total}
	if v.Cursor != "" {
		page["cursor"] = v.Cursor
	}
	if v.Outline != nil {
		page["outline"] = v.Outline
	}
	if v.Handle != "" {
		page["handle"] = v.Handle
	}
	if c := v.Continue("read_outline"); c != "" {
		page["next"] = c
	}
	if len(problems) > 0 {
		page["notices"] = problems
	}
	switch format {
	case "", "text":
		txt := v.Text(notes)
		for _, p := range problems {
			txt += "Note: " + p + "\n"
		}
		page["text"] = txt
		return mcp.NewToolResultStructured(page, txt), nil
	case "json":
		var out any = v.Compact(flat, notes)
		if full {
			out = v
			if flat {
				out = v.FlatView()
			}
		}
		raw, err := json.Marshal(out)
		if err != nil {
			return nil, err
		}
		if len(problems) > 0 {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, err
			}
			m["notices"] = problems
			out = m
			if raw, err = json.Marshal(m); err != nil {
				return nil, err
			}
		}
		// the same JSON as text: clients that show the model only the text
		// content (Claude Desktop) see what was asked for
		txt := string(raw)
		if c := v.Continue("read_outline"); c != "" {
			txt += "\n" + c
		}
		return mcp.NewToolResultStructured(out, txt), nil
	case "markdown":
		md := v.Markdown()
		for _, p := range problems {
			md += "<!-- note: " + strings.ReplaceAll(p, "--", "- -") + " -->\n"
		}
		page["markdown"] = md
		return mcp.NewToolResultStructured(page, md), nil
	}
	o := v.OPML()
	for _, p := range problems {
		o += "<!-- note: " + strings.ReplaceAll(p, "--", "- -") + " -->\n"
	}
	page["opml"] = o
	return mcp.NewToolResultStructured(page, o), nil
}

// clipRows shortens the notes and comments of v's rows to at most n bytes
// each (a marker says how much is left out) and says which it shortened.
func clipRows(v *view.View, n int) []string {
	var clipped []string
	clip := func(s string) (string, bool) {
		if len(s) <= n {
			return s, false
		}
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut] + fmt.Sprintf(" …[%d more bytes not shown]", len(s)-cut), true
	}
	var walk func(rows []*view.Row)
	walk = func(rows []*view.Row) {
		for _, r := range rows {
			var c1, c2 bool
			r.Note, c1 = clip(r.Note)
			r.Text, c2 = clip(r.Text)
			for i := range r.Comments {
				var c bool
				r.Comments[i].Text, c = clip(r.Comments[i].Text)
				c2 = c2 || c
			}
			if c1 || c2 {
				clipped = append(clipped, r.RKey)
			}
			if r.Mirror != nil {
				walk(r.Mirror.Rows)
			}
			walk(r.Children)
		}
	}
	if v.Root != nil {
		walk([]*view.Row{v.Root})
	}
	walk(v.Nodes)
	if len(clipped) == 0 {
		return nil
	}
	return []string{fmt.Sprintf("the page is one row too large for a result: the long texts, notes and comments of %s are shortened to %d bytes here (marked \"more bytes not shown\"); the records are unchanged", strings.Join(clipped, ", "), n)}
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
		for it := range t.Detached.Items() {
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
		res := mcp.NewToolResultStructured(map[string]any{"detached": rows, "contributions": contributions}, b.String())
		// a list too long for one result: the first ones, said in both
		// parts (re-attaching or deleting them shortens the list)
		for n := len(rows); ResultSize(res) > ResultBudget && n > 1; {
			n = max(1, min(n-1, n*ResultBudget/ResultSize(res)))
			var lb strings.Builder
			for _, r := range rows[:n] {
				fmt.Fprintf(&lb, "- %s ·%s (%s)\n", r.Text, r.RKey, r.Reason)
			}
			note := fmt.Sprintf("this lists %d of the %d detached bullets, all that fit one result; re-attach or delete them, then call list_detached again for the rest", n, len(rows))
			lb.WriteString("Note: " + note + "\n")
			if len(contributions) > 0 {
				lb.WriteString("Contributions to shared outlines (not detached, do not move):\n" + c.String())
			}
			res = mcp.NewToolResultStructured(map[string]any{"detached": rows[:n], "detachedTotal": len(rows), "contributions": contributions, "notices": []string{note}}, lb.String())
		}
		return res, nil
	}
	return detached
}
