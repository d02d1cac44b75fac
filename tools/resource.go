package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
)

// ResourceDepth is how deep a resource page reads below its root: the
// deepest read_outline allows (the page is bounded by rows and bytes,
// not by depth; rows below it are counted and said).
const ResourceDepth = 50

// Page is one page of the outline or a subtree, rendered for an MCP
// resource (package server).
type Page struct {
	Text   string // text/markdown or application/json
	DID    string
	Key    string // the root's record key ("" for the whole outline)
	Cursor string // the next page's cursor ("" on the last page)
	// Tree is the tree the page was read from.
	Tree *outline.Tree
	// Notices are what the page leaves out or could not read (also in
	// Text: Markdown comments, or the JSON's "notices").
	Notices []string
}

// pageJSON is a JSON page: read_outline's format=json view, with how to
// get the next page and the notices beside it.
type pageJSON struct {
	*view.View
	Next     string   `json:"next,omitempty"`
	Continue string   `json:"continue,omitempty"`
	Notices  []string `json:"notices,omitempty"`
}

// ReadPage renders one page of the outline (node "": the whole outline; a
// record key or at:// URI: that subtree) as read_outline renders it with
// format=markdown, or format=json when asJSON, at most maxBytes long:
// rows per page are halved until the page fits (a single row too large
// alone is cut, and the page says so). next(cursor) names the next page
// (a resource URI), said at the end of the page. Errors are the engine's
// (a node that does not resolve: outline.ErrNodeNotFound) or
// view.ErrCursor.
func ReadPage(ctx context.Context, env *Env, node, cursor string, asJSON bool, maxBytes int, next func(cursor string) string) (*Page, error) {
	// what the repository says of this read (a followed stream gone quiet:
	// how stale the page may be) is said on the page, as on a tool's result
	ctx, calls := store.WithCallNotes(ctx)
	t, err := env.Engine.Tree(ctx)
	if err != nil {
		return nil, err
	}
	var root *outline.Item
	if node != "" {
		if root, err = t.Resolve(node); err != nil {
			return nil, err
		}
	}
	other := otherTrees(ctx, env)
	contrib, problems := view.Gather(t, other)
	problems = append(calls.Take(), problems...)
	for limit := view.DefaultLimit; ; limit = max(1, limit/2) {
		v, err := view.Read(t, root, view.Options{Depth: ResourceDepth, Limit: limit, Cursor: cursor, Contributions: contrib})
		if err != nil {
			return nil, err
		}
		p := &Page{Tree: t, DID: v.DID, Cursor: v.Cursor, Notices: append(append([]string(nil), problems...), v.Enrich(t, other)...)}
		if root != nil {
			p.Key = root.Key()
		}
		nextURI := ""
		if v.Cursor != "" {
			nextURI = next(v.Cursor)
		}
		p.Text = renderPage(v, p.Notices, nextURI, asJSON)
		if len(p.Text) <= maxBytes {
			return p, nil
		}
		if limit == 1 {
			// one row (a bullet with a very long note, or a large
			// mirrored subtree) is over the bound on its own
			cut := fmt.Sprintf("this page is %d bytes, over the %d-byte bound of a resource page, with a single row: it is cut; read that bullet with read_outline (node=KEY) and its note with notes=true", len(p.Text), maxBytes)
			p.Notices = append(p.Notices, cut)
			if asJSON {
				cutNotes(v, maxBytes/2)
				p.Text = renderPage(v, p.Notices, nextURI, true)
				if len(p.Text) > maxBytes {
					v.Nodes, v.Root = []*view.Row{}, nil
					p.Text = renderPage(v, p.Notices, nextURI, true)
				}
				return p, nil
			}
			p.Text = cutText(p.Text, maxBytes-1024) + "\n<!-- " + comment(cut) + " -->\n" + nextLine(nextURI)
			return p, nil
		}
	}
}

func renderPage(v *view.View, notices []string, next string, asJSON bool) string {
	if asJSON {
		raw, err := json.Marshal(pageJSON{View: v, Next: next, Continue: v.Continue("read_outline with format=json"), Notices: notices})
		if err != nil {
			return fmt.Sprintf(`{"error":%q}`, err.Error())
		}
		return string(raw)
	}
	var b strings.Builder
	b.WriteString(v.Markdown())
	if b.Len() == 0 {
		b.WriteString("<!-- no bullets here -->\n")
	}
	for _, n := range notices {
		b.WriteString("<!-- Note: " + comment(n) + " -->\n")
	}
	b.WriteString(nextLine(next))
	return b.String()
}

func nextLine(next string) string {
	if next == "" {
		return ""
	}
	return "<!-- next page: " + comment(next) + " -->\n"
}

// comment makes s safe inside an HTML comment.
func comment(s string) string { return strings.ReplaceAll(s, "--", "- -") }

// cutText cuts s to at most n bytes, at a line end when there is one in
// the second half, never inside a UTF-8 sequence.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if i := strings.LastIndexByte(s[:n], '\n'); i > n/2 {
		n = i
	}
	return s[:n]
}

// cutNotes shortens the notes of a page's rows (nested, and mirrored
// subtrees) to at most n bytes each.
func cutNotes(v *view.View, n int) {
	var walk func(rows []*view.Row)
	walk = func(rows []*view.Row) {
		for _, r := range rows {
			if r == nil {
				continue
			}
			if len(r.Note) > n {
				kept := cutText(r.Note, n)
				r.Note = kept + fmt.Sprintf(" [cut: %d more bytes]", len(r.Note)-len(kept))
			}
			if r.Mirror != nil {
				walk(r.Mirror.Rows)
			}
			walk(r.Children)
		}
	}
	walk([]*view.Row{v.Root})
	walk(v.Nodes)
}
