package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// index returns the search index of repository did, kept in env's cache
// (Env.Search, made on first use when the caller set none).
func (env *Env) index(did string) *search.Index {
	env.searchMu.Lock()
	if env.Search == nil {
		env.Search = search.NewCache(0)
	}
	c := env.Search
	env.searchMu.Unlock()
	return c.For(did)
}

func searchTool() Tool {
	t := Tool{Name: "search", Title: "Search the outline", Family: FamilyRead, Output: searchOutput,
		Ann:         Annotations{ReadOnly: true, Idempotent: true},
		Description: "Find bullets: every filter given must match (dates inclusive).",
		Schema: obj(map[string]any{
			"text":           str("In text or note, any case."),
			"regex":          boolean("text is RE2."),
			"tags":           strList(""),
			"mentions":       strList("Handles or DIDs."),
			"layout":         pLayout,
			"state":          enum("Todos only.", "open", "done"),
			"created_from":   pDate,
			"created_to":     pDate,
			"completed_from": pDate,
			"completed_to":   pDate,
			"under":          str("Subtree root."),
			"depth":          map[string]any{"type": "integer", "minimum": 1, "description": "Levels below under (1: children)."},
			"repo":           pRepo,
			"limit":          map[string]any{"type": "integer", "maximum": 200},
			"cursor":         pCursor,
			"fields":         enum("", "compact", "full"),
			"since":          str("Rev or time: what changed since."),
		})}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		limit, err := a.Int("limit", 20)
		if err != nil {
			return badArgs("%v", err)
		}
		if a.Str("since") != "" {
			return searchSince(ctx, env, a, limit) // since.go
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
		cur := tr
		tr, change := env.pageTree(cur, a.Str("cursor"), searchCursorRev)
		var contribCur string
		q := search.Query{Text: a.Str("text"), Regex: regex, Tags: tags, Layout: a.Str("layout"), State: a.Str("state"),
			CreatedFrom: a.Str("created_from"), CreatedTo: a.Str("created_to"), CompletedFrom: a.Str("completed_from"), CompletedTo: a.Str("completed_to"),
			Limit: limit, Cursor: a.Str("cursor")}
		if strings.HasPrefix(q.Cursor, contribPrefix) {
			q.Cursor, contribCur = "", q.Cursor
		}
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
		if q.Depth, err = a.Int("depth", 0); err != nil {
			return badArgs("%v", err)
		}
		if x, given := a["depth"]; given && x != nil && q.Depth < 1 {
			return badArgs("depth must be a whole number of at least 1 (1: under's children only), got %v", a["depth"])
		}
		if q.Depth > 0 && q.Under == nil {
			return badArgs("depth needs under: it counts the levels below that bullet")
		}
		if q.Text == "" && len(q.Tags) == 0 && len(q.Mentions) == 0 && q.Layout == "" && q.State == "" &&
			q.CreatedFrom == "" && q.CreatedTo == "" && q.CompletedFrom == "" && q.CompletedTo == "" {
			return badArgs("give at least one filter (text, tags, mentions, layout, state or a date), or since; to list bullets use read_outline")
		}
		fp := queryPrint(q)
		skip, inContrib, err := contribCursor(contribCur, fp)
		if err != nil {
			return badArgs("%v", err)
		}
		// a page must fit in one result: fewer hits rather than a cut answer
		asked := q.Limit
		pg := searchPaging{cur: cur, contribCur: contribCur, change: change, full: a.Str("fields") == "full"}
		for {
			res, n, err := searchPage(ctx, env, tr, q, skip, inContrib, fp, asked, &pg)
			if err != nil || res.IsError {
				return res, err
			}
			if size := shownSize(ctx, res, "search"); size > ResultBudget && n > 1 {
				q.Limit = max(1, min(n-1, n*ResultBudget/size))
				continue
			}
			env.keepPage(tr, cur, pg.cursor)
			return withChange(res, pg.change), nil
		}
	}
	return t
}

// hit is a search hit in the compact form: what the agent cannot derive.
// Its URI is the result's uriPrefix + rkey (a contributor's, Author set:
// at://AUTHOR/app.bulleted.node/ + rkey); state is set on todos only (so a
// todo's layout is not repeated), layout when it is neither bullet nor todo,
// note (the matching excerpt) when the match is in the note. Where it is:
// the hitGroup entries around it. fields=full gives search.Hit instead.
type hit struct {
	RKey   string `json:"rkey"`
	Text   string `json:"text"`
	State  string `json:"state,omitempty"`
	Layout string `json:"layout,omitempty"`
	Note   string `json:"note,omitempty"`
	Author string `json:"author,omitempty"`
}

// hitGroup is an ancestor of the hits in it: a search result's hits are
// the outline's subtree that holds them, each ancestor given once for a run
// of hits under it, not on every hit (hits come in the outline's order). It
// is sent as an array, [text, entries...], its text clipped (crumbRunes).
type hitGroup struct {
	In   string
	Hits []any
}

func (g *hitGroup) MarshalJSON() ([]byte, error) {
	return json.Marshal(append([]any{g.In}, g.Hits...))
}

// crumbRunes is how many characters of an ancestor's text a search result
// shows (in both parts).
const crumbRunes = 24

func crumb(s string) string {
	r := []rune(s)
	if len(r) <= crumbRunes {
		return s
	}
	return string(r[:crumbRunes-1]) + "…"
}

// hitTree is hits under their ancestors, as structured content (entries:
// hit or *hitGroup) and as text (an ancestor's line "text:", a hit's line
// "- [ ] text ·rkey", indented two spaces a level).
func hitTree(t *outline.Tree, hits []search.Hit) ([]any, string) {
	type open struct {
		id string
		g  *hitGroup
	}
	var (
		stack []open
		root  = []any{}
		b     strings.Builder
	)
	for _, h := range hits {
		ids := ancestorIDs(t, h)
		k := 0
		for k < len(stack) && k < len(ids) && stack[k].id == ids[k] {
			k++
		}
		stack = stack[:k]
		for i := k; i < len(ids); i++ {
			g := &hitGroup{In: crumb(h.Breadcrumb[i])}
			if i == 0 {
				root = append(root, g)
			} else {
				stack[i-1].g.Hits = append(stack[i-1].g.Hits, g)
			}
			stack = append(stack, open{ids[i], g})
			fmt.Fprintf(&b, "%s%s:\n", strings.Repeat("  ", i), g.In)
		}
		c := hit{RKey: h.RKey, Text: h.Text, Layout: h.Layout, Note: h.Note, Author: h.Author}
		mark := ""
		switch {
		case h.Done:
			c.State, c.Layout, mark = "done", "", "[x] "
		case h.Layout == "todo":
			c.State, c.Layout, mark = "open", "", "[ ] "
		case h.Layout == "bullet":
			c.Layout = ""
		}
		if len(stack) == 0 {
			root = append(root, c)
		} else {
			stack[len(stack)-1].g.Hits = append(stack[len(stack)-1].g.Hits, c)
		}
		note := ""
		if h.InNote {
			note = fmt.Sprintf(" (match in its note: %q)", h.Note)
		}
		by := ""
		if h.Author != "" {
			by = " (by " + h.Author + ", a contributor)"
		}
		fmt.Fprintf(&b, "%s- %s%s%s ·%s%s\n", strings.Repeat("  ", len(ids)), mark, h.Text, note, h.RKey, by)
	}
	return root, b.String()
}

// ancestorIDs names each of h's ancestors (one per breadcrumb entry), so
// that two ancestors with the same clipped text are not taken for one: the
// record keys of the outline's own bullets; for a contributor's bullet (or
// a tree that disagrees with the breadcrumb) the breadcrumb's texts, the
// last one named by the hit's author and parent.
func ancestorIDs(t *outline.Tree, h search.Hit) []string {
	n := len(h.Breadcrumb)
	ids := make([]string, n)
	if h.Author == "" {
		it := t.Nodes.Get(h.Parent)
		i := n - 1
		for ; i >= 0 && it != nil; i-- {
			ids[i] = it.Key()
			it = t.Parent(it)
		}
		if i < 0 && it == nil {
			return ids
		}
	}
	for i, c := range h.Breadcrumb {
		ids[i] = "\x00" + c
	}
	if n > 0 {
		ids[n-1] = "\x00" + h.Author + "/" + h.Parent
	}
	return ids
}

// searchPage runs q (the outline's own hits, then contributors' bullets
// shown in it) and returns the result and how many hits it holds.
// searchPaging is what a search page carries between tries: the current
// tree and the contributors' cursor it came with, the change to report, and
// the cursor the page gives (its tree is kept for it).
type searchPaging struct {
	cur        *outline.Tree
	contribCur string
	change     *pageChange
	cursor     string
	// contribSeen: the contributors' change was worked out (once a call)
	contribSeen bool
	// full: fields=full, every hit as search.Hit (flat, with its URI,
	// parent, breadcrumb and child count) instead of the compact tree
	full bool
}

func searchPage(ctx context.Context, env *Env, tr *outline.Tree, q search.Query, skip int, inContrib bool, fp string, asked int, pg *searchPaging) (*mcp.CallToolResult, int, error) {
	r := &search.Result{Hits: []search.Hit{}}
	var err error
	if !inContrib {
		if r, err = env.index(tr.DID.String()).Search(tr, q); errors.Is(err, search.ErrQuery) || errors.Is(err, search.ErrCursor) {
			res, err := badArgs("%v", err)
			return res, 0, err
		} else if err != nil {
			return nil, 0, err
		}
	}
	var problems []string
	change := pg.change
	if r.Cursor == "" && env.others() != nil {
		// the owner's own hits are done: contributors' bullets shown
		// in this outline follow, in the outline's order
		room := max(0, q.Limit-len(r.Hits))
		hits, more, probs, cprint := contributionHits(ctx, env, tr, q, skip, room)
		r.Hits = append(r.Hits, hits...)
		problems = probs
		if more {
			r.Cursor = contribPrefix + fmt.Sprintf("%d.%s.%s.%s", skip+len(hits), fp, tr.Rev, cprint)
		}
		if inContrib && !pg.contribSeen {
			// once per call, however often the page is shortened to fit
			pg.contribSeen = true
			_, was := contribParts(pg.contribCur)
			change = contributionsChange(change, pg.cur, was, cprint)
		}
	}
	pg.cursor = r.Cursor
	if q.Limit < asked && r.Cursor != "" {
		problems = append(problems, fmt.Sprintf("this page holds %d hit(s), fewer than limit=%d, to fit one result (%d KB); the cursor continues after them", len(r.Hits), asked, MaxResult/1000))
	}
	tree, lines := hitTree(tr, r.Hits)
	text := hitsText(r, lines) // says the search's own notices (r.Notices)
	for _, p := range problems {
		text += "\nnote: " + p
	}
	problems = append(append([]string(nil), r.Notices...), problems...)
	var hits any = tree
	if pg.full {
		hits = append([]search.Hit{}, r.Hits...) // [] rather than null when none
	}
	sc := map[string]any{"did": tr.DID.String(), "uriPrefix": "at://" + tr.DID.String() + "/" + lexicon.Node + "/", "hits": hits}
	if r.Cursor != "" {
		sc["cursor"] = r.Cursor
	}
	if len(problems) > 0 {
		sc["notices"] = problems
	}
	pg.change = change
	return mcp.NewToolResultStructured(sc, text), len(r.Hits), nil
}

// hitsText is a search page's text: the search's notices, the hits' lines
// (hitTree) and the cursor.
func hitsText(r *search.Result, lines string) string {
	var b strings.Builder
	for _, n := range r.Notices {
		b.WriteString("Note: " + n + "\n")
	}
	if len(r.Hits) == 0 {
		b.WriteString("No bullets match.")
		return b.String()
	}
	// hits come in the outline's order: each ancestor is said once for the
	// run of hits under it, indented like the outline
	b.WriteString(lines)
	if r.Cursor != "" {
		fmt.Fprintf(&b, "(more matches: call search again with the same filters and cursor=%q)\n", r.Cursor)
	}
	return b.String()
}

// contribPrefix starts a cursor that continues among contributors' bullets
// (after the outline's own hits): "~SKIP.QUERYPRINT.REV", REV the revision
// of the owner's tree searched.
const contribPrefix = "~"

// contribCursor reads a contributors' cursor ("" : none).
func contribCursor(c, fp string) (skip int, ok bool, err error) {
	if c == "" {
		return 0, false, nil
	}
	n, q, found := strings.Cut(strings.TrimPrefix(c, contribPrefix), ".")
	q, _, _ = strings.Cut(q, ".") // the revision: searchCursorRev
	if _, serr := fmt.Sscanf(n, "%d", &skip); !found || serr != nil || skip < 0 {
		return 0, false, fmt.Errorf("%w: not a cursor from this server", search.ErrCursor)
	}
	if q != fp {
		return 0, false, fmt.Errorf("%w: it continues a different query; repeat the same filters", search.ErrCursor)
	}
	return skip, true, nil
}

// queryPrint identifies a query's filters (not its cursor or limit).
func queryPrint(q search.Query) string {
	under := ""
	if q.Under != nil {
		under = q.Under.Key()
	}
	s := fmt.Sprintf("%q|%v|%q|%q|%q|%q|%q|%q|%q|%q|%q|%q", q.Text, q.Regex, q.Tags, q.Mentions, q.Layout, q.State,
		q.CreatedFrom, q.CreatedTo, q.CompletedFrom, q.CompletedTo, under, "")
	if q.Depth > 0 {
		s += fmt.Sprintf("|%d", q.Depth)
	}
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}

// contributionHits searches the contributors' bullets that t's outline
// shows (view.Gather), under q.Under when set, in the outline's order: each
// contribution's subtree in the contributor's own index, its breadcrumb
// continued from the owner's bullets. It skips the first skip hits and
// returns at most limit, and whether more follow, with problems worth
// telling (a contributor's repository that could not be read) and the
// contributions' view.ContributionsPrint (for the cursor).
func contributionHits(ctx context.Context, env *Env, t *outline.Tree, q search.Query, skip, limit int) ([]search.Hit, bool, []string, string) {
	contrib, problems := view.Gather(t, otherTrees(ctx, env))
	cprint := view.ContributionsPrint(contrib)
	if len(contrib) == 0 {
		return nil, false, problems, cprint
	}
	want := skip + limit
	var out []search.Hit
	more := false
	var walk func(it *outline.Item, crumbs []string, level int) bool
	walk = func(it *outline.Item, crumbs []string, level int) bool {
		if it.Mirror {
			return true
		}
		crumbs = append(crumbs[:len(crumbs):len(crumbs)], clip(it.Str("text"), 40))
		for _, c := range contrib[it.Key()] {
			if q.Depth > 0 && level+1 > q.Depth {
				break // the contribution is shown as its child, below depth
			}
			hits, cut, err := contributionSearch(env, c, q, level+1, want-len(out)+1)
			if err != nil {
				problems = append(problems, "could not search "+c.Tree.DID.String()+"'s contribution: "+err.Error())
				continue
			}
			for _, h := range hits {
				if len(out) == want {
					more = true
					return false
				}
				h.Breadcrumb = append(append([]string(nil), crumbs...), h.Breadcrumb...)
				if h.RKey == c.Item.Key() {
					h.Parent = it.Key()
				}
				h.Author = c.Tree.DID.String()
				out = append(out, h)
			}
			if cut {
				more = true
				return false
			}
		}
		if q.Depth > 0 && level+2 > q.Depth {
			return true // the children's contributions are below depth
		}
		for ch := range it.Children.Items() {
			if !walk(ch, crumbs, level+1) {
				return false
			}
		}
		return true
	}
	if q.Under != nil {
		var crumbs []string
		for p := t.Parent(q.Under); p != nil; p = t.Parent(p) {
			crumbs = append([]string{clip(p.Str("text"), 40)}, crumbs...)
		}
		walk(q.Under, crumbs, 0)
	} else {
		for it := range t.Roots.Items() {
			if !walk(it, nil, 0) {
				break
			}
		}
	}
	if skip >= len(out) {
		return nil, more, problems, cprint
	}
	return out[skip:], more, problems, cprint
}

// contributionSearch is the first limit hits of q in contribution c, whose
// root is shown level levels below q.Under (with q.Depth: the root and
// what is within depth of under, the root's own match the first hit of a
// search of its subtree), and whether more follow.
func contributionSearch(env *Env, c view.Contribution, q search.Query, level, limit int) ([]search.Hit, bool, error) {
	x := env.index(c.Tree.DID.String())
	cq := q
	cq.Under, cq.Cursor, cq.Limit, cq.Depth = c.Item, "", limit, 0
	if q.Depth == 0 {
		r, err := x.Search(c.Tree, cq)
		if err != nil {
			return nil, false, err
		}
		return r.Hits, r.Cursor != "", nil
	}
	cq.Limit = 1
	r, err := x.Search(c.Tree, cq)
	if err != nil {
		return nil, false, err
	}
	var hits []search.Hit
	if len(r.Hits) > 0 && r.Hits[0].RKey == c.Item.Key() {
		hits = r.Hits[:1]
	}
	if level == q.Depth {
		return hits, false, nil
	}
	cq.Limit, cq.Depth = limit, q.Depth-level
	if r, err = x.Search(c.Tree, cq); err != nil {
		return nil, false, err
	}
	return append(hits, r.Hits...), r.Cursor != "", nil
}
