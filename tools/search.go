package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/search"
)

// indexes keeps one search index per repository (by DID) for the life of
// the process; each is brought up to date incrementally on use.
var indexes = struct {
	sync.Mutex
	m map[string]*search.Index
}{m: map[string]*search.Index{}}

// maxIndexes bounds the other identities' indexes kept.
const maxIndexes = 16

func indexFor(did string) *search.Index {
	indexes.Lock()
	defer indexes.Unlock()
	x := indexes.m[did]
	if x == nil {
		if len(indexes.m) >= maxIndexes {
			for k := range indexes.m {
				delete(indexes.m, k)
				break
			}
		}
		x = search.New()
		indexes.m[did] = x
	}
	return x
}

func searchTool() Tool {
	t := Tool{Name: "search", Title: "Search the outline", ReadOnly: true, Idempotent: true,
		Description: "Find bullets by text (case-insensitive substring of the text or note; regex=true for a regular expression), tags, mentions (handle or DID), layout, todo state (open/done) and created/completed date ranges, optionally under one bullet, in your repository or another identity's (read-only). Every given filter must match. Each hit has the record key (·RKEY), the text shortened around the match, the breadcrumb of ancestor texts and the parent key; hits come in outline order, limit per page (default 20), and cursor continues a cut result.",
		Schema: obj(map[string]any{
			"text":           str("Case-insensitive text to find in a bullet's text or note."),
			"regex":          boolean("Treat text as a regular expression (RE2 syntax, case-insensitive; default false)."),
			"tags":           map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Tags the bullet must all carry (with or without #)."},
			"mentions":       map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Identities the bullet must all mention: DIDs, or handles (matched as @handle in the text)."},
			"layout":         enum("Only bullets of this layout.", "bullet", "todo", "h1", "h2", "h3", "codeBlock", "quoteBlock"),
			"state":          enum("Only todos that are open or done.", "open", "done"),
			"created_from":   str("Created on or after (YYYY-MM-DD or RFC 3339)."),
			"created_to":     str("Created on or before (YYYY-MM-DD covers the whole day, UTC)."),
			"completed_from": str("Completed on or after (YYYY-MM-DD or RFC 3339)."),
			"completed_to":   str("Completed on or before."),
			"under":          str("Only this bullet's subtree (" + refDesc + ")."),
			"repo":           str("Handle or DID of the repository to search (default: your own; others need the PDS backend)."),
			"limit":          map[string]any{"type": "integer", "minimum": 1, "maximum": 200, "description": "Hits per page (default 20)."},
			"cursor":         str("Continue a cut result: the cursor it returned, with the same filters."),
		})}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		limit, err := a.Int("limit", 20)
		if err != nil {
			return badArgs("%v", err)
		}
		regex, err := a.Bool("regex", false)
		if err != nil {
			return badArgs("%v", err)
		}
		tags, _, err := a.Strings("tags")
		if err != nil {
			return badArgs("%v", err)
		}
		ments, _, err := a.Strings("mentions")
		if err != nil {
			return badArgs("%v", err)
		}
		tr, _, res, err := readTree(ctx, env, a.Str("repo"))
		if res != nil || err != nil {
			return res, err
		}
		q := search.Query{Text: a.Str("text"), Regex: regex, Tags: tags, Layout: a.Str("layout"), State: a.Str("state"),
			CreatedFrom: a.Str("created_from"), CreatedTo: a.Str("created_to"), CompletedFrom: a.Str("completed_from"), CompletedTo: a.Str("completed_to"),
			Limit: limit, Cursor: a.Str("cursor")}
		for _, m := range ments {
			m = strings.TrimPrefix(strings.TrimSpace(m), "@")
			if !strings.HasPrefix(m, "did:") && env.Engine.Resolver != nil {
				if did, err := env.Engine.Resolver.ResolveHandle(ctx, m); err == nil {
					m = did.String()
				}
			}
			q.Mentions = append(q.Mentions, m)
		}
		if u := a.Str("under"); u != "" {
			if q.Under, err = tr.Resolve(u); err != nil {
				return toolError(err)
			}
		}
		if q.Text == "" && len(q.Tags) == 0 && len(q.Mentions) == 0 && q.Layout == "" && q.State == "" &&
			q.CreatedFrom == "" && q.CreatedTo == "" && q.CompletedFrom == "" && q.CompletedTo == "" {
			return badArgs("give at least one filter (text, tags, mentions, layout, state or a date); to list bullets use read_outline")
		}
		r, err := indexFor(tr.DID.String()).Search(tr, q)
		if errors.Is(err, search.ErrQuery) || errors.Is(err, search.ErrCursor) {
			return badArgs("%v", err)
		} else if err != nil {
			return nil, err
		}
		return mcp.NewToolResultStructured(map[string]any{"did": tr.DID.String(), "hits": r.Hits, "cursor": r.Cursor}, hitsText(tr, r)), nil
	}
	return t
}

func hitsText(t *outline.Tree, r *search.Result) string {
	var b strings.Builder
	if len(r.Hits) == 0 {
		b.WriteString("No bullets match.")
		return b.String()
	}
	for _, h := range r.Hits {
		mark := ""
		switch {
		case h.Layout == "todo" && h.Done:
			mark = "[x] "
		case h.Layout == "todo":
			mark = "[ ] "
		}
		where := strings.Join(h.Breadcrumb, " › ")
		if where == "" {
			where = "top level"
		}
		note := ""
		if h.InNote {
			note = " (in note)"
		}
		fmt.Fprintf(&b, "- %s%s%s ·%s — in %s\n", mark, h.Text, note, h.RKey, where)
	}
	if r.Cursor != "" {
		fmt.Fprintf(&b, "(more matches: call search again with the same filters and cursor=%q)\n", r.Cursor)
	}
	return b.String()
}
