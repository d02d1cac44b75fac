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
	t := Tool{Name: "search", Title: "Search the outline", Family: FamilyRead, Output: searchOutput,
		Ann:         Annotations{ReadOnly: true, Idempotent: true},
		Description: "Find bullets by text (regex=true: RE2), tags, mentions, layout, state, dates (YYYY-MM-DD), subtree (under); all must match.",
		Schema: obj(map[string]any{
			"text":           pRef,
			"regex":          boolean(""),
			"tags":           strList(""),
			"mentions":       strList(""),
			"layout":         pRef,
			"state":          enum("", "open", "done"),
			"created_from":   pRef,
			"created_to":     pRef,
			"completed_from": pRef,
			"completed_to":   pRef,
			"under":          pRef,
			"repo":           pRef,
			"limit":          map[string]any{"type": "integer", "maximum": 200},
			"cursor":         pRef,
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
