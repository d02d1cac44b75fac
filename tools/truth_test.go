package tools_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestHiddenChildrenMarkedAtEveryDepth: a read with depth=1 (and a zoomed
// read) marks every line whose children are not on the page with its
// count, top-level lines included, in the text and in the structured
// content's text; lines whose children are shown carry no marker.
func TestHiddenChildrenMarkedAtEveryDepth(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	r.ok("insert_after", map[string]any{"markdown": "- Alpha\n  - a1\n  - a2\n- Beta\n- Gamma\n  - g1\n    - g1x\n    - g1y\n    - g1z"})
	check := func(args map[string]any, want map[string]string) {
		t.Helper()
		res, sc := call(t, r.c, "read_outline", args)
		if res.IsError {
			t.Fatalf("read_outline %v: %s", args, text(res))
		}
		sct, _ := sc["text"].(string)
		for name, out := range map[string]string{"text": text(res), "structured text": sct} {
			for bullet, marker := range want {
				re := regexp.MustCompile(`(?m)^\s*- ` + regexp.QuoteMeta(bullet) + `( \(\+\d+\))? ·`)
				m := re.FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("%v %s: no line for %q:\n%s", args, name, bullet, out)
				}
				if got := strings.TrimSpace(m[1]); got != marker {
					t.Fatalf("%v %s: %q is marked %q, want %q:\n%s", args, name, bullet, got, marker, out)
				}
			}
		}
	}
	check(map[string]any{"depth": 1}, map[string]string{"Alpha": "(+2)", "Beta": "", "Gamma": "(+1)"})
	check(map[string]any{"depth": 2}, map[string]string{"Alpha": "", "a1": "", "Gamma": "", "g1": "(+3)"})
	// zoomed: the root's children are the page, so the root is not marked
	check(map[string]any{"node": r.key("Gamma"), "depth": 1}, map[string]string{"Gamma": "", "g1": "(+3)"})
	// a mirror at the depth bound: its original's children
	r.ok("add_mirror", map[string]any{"original": r.uri("Alpha")})
	res, _ := call(t, r.c, "read_outline", map[string]any{"depth": 1})
	if !regexp.MustCompile(`↪ "Alpha" \(mirror of [^)]*\) \(\+2\) ·`).MatchString(text(res)) {
		t.Fatalf("a mirror at depth 1 does not show its original's 2 children:\n%s", text(res))
	}
}

// fakeResolver resolves the handles it knows.
type fakeResolver map[string]string

func (f fakeResolver) ResolveHandle(_ context.Context, h string) (syntax.DID, error) {
	if d, ok := f[h]; ok {
		return syntax.DID(d), nil
	}
	return "", errors.New("unknown handle " + h)
}

// TestCommentThreadInText: under policy mentioned, the comment the
// mentioned identity wrote on a bullet shows in the text read (zoomed on
// the bullet and from the top) with its author's handle, date and text,
// not only as a count; the json rows carry the same thread with the
// handle.
func TestCommentThreadInText(t *testing.T) {
	t.Parallel()
	const friend = "did:plc:friendofthetruth"
	l := openLocal(t)
	var friendTree *outline.Tree
	e, err := outline.Open(l, outline.Options{Resolver: fakeResolver{"friend.test": friend}, Others: func(ctx context.Context, ident string) (*outline.Tree, error) {
		if ident != friend || friendTree == nil {
			return nil, errors.New("unknown identity " + ident)
		}
		return friendTree, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	env := &tools.Env{Engine: e}
	r := &rulesRepo{t: t, l: l, c: inProcess(t, env)}
	r.ok("insert_after", map[string]any{"text": "Groceries for @friend.test"})
	r.ok("insert_after", map[string]any{"parent": r.key("Groceries for @friend.test"), "text": "Eggs"})
	r.ok("set_comment_policy", map[string]any{"allow": []any{"mentioned"}})
	friendTree = outline.Build(&store.Snapshot{DID: friend, Commit: "f1", Records: []store.Record{
		{Collection: "app.bulleted.comment", RKey: "3kcomment2222", CID: "c1", Value: store.MustValue(map[string]any{"$type": "app.bulleted.comment",
			"subject": r.uri("Eggs"), "text": "Free-range,\nplease?", "createdAt": "2026-07-30T09:30:00.000Z"})},
		{Collection: "app.bulleted.comment", RKey: "3kcomment1111", CID: "c2", Value: store.MustValue(map[string]any{"$type": "app.bulleted.comment",
			"subject": r.uri("Eggs"), "text": "A dozen", "createdAt": "2026-07-29T08:00:00.000Z"})},
	}})
	want := "comment by @friend.test on 2026-07-29: A dozen\n"
	want2 := "comment by @friend.test on 2026-07-30: Free-range, please?\n"
	for _, args := range []map[string]any{{"node": r.key("Eggs")}, {}} {
		res, sc := call(t, r.c, "read_outline", args)
		sct, _ := sc["text"].(string)
		for name, out := range map[string]string{"text": text(res), "structured text": sct} {
			i, j := strings.Index(out, want), strings.Index(out, want2)
			if i < 0 || j < i {
				t.Fatalf("read %v, %s: the thread (in order) is not shown:\n%s", args, name, out)
			}
		}
	}
	// markdown and OPML: as comments, which import_outline skips
	for _, f := range []string{"markdown", "opml"} {
		res, _ := call(t, r.c, "read_outline", map[string]any{"format": f})
		out := text(res)
		i, j := strings.Index(out, "<!-- "+strings.TrimSuffix(want, "\n")+" -->"), strings.Index(out, "<!-- "+strings.TrimSuffix(want2, "\n")+" -->")
		if i < 0 || j < i {
			t.Fatalf("read format=%s: the thread (in order) is not shown:\n%s", f, out)
		}
		// read back: the bullets, and the thread skipped with a word
		ires, isc := call(t, r.c, "import_outline", map[string]any{"format": f, "content": out, "parent": r.key("Groceries for @friend.test"), "dry_run": true})
		if created, _ := isc["created"].([]any); ires.IsError || len(created) != 2 || !strings.Contains(text(ires), "skipped 2") {
			t.Fatalf("import_outline format=%s of the export: %v\n%s", f, isc["created"], text(ires))
		}
	}
	_, sc := call(t, r.c, "read_outline", map[string]any{"node": r.key("Eggs"), "format": "json"})
	root, _ := sc["root"].(map[string]any)
	cs, _ := root["comments"].([]any)
	if len(cs) != 2 || cs[0].(map[string]any)["handle"] != "friend.test" || cs[0].(map[string]any)["text"] != "A dozen" {
		t.Fatalf("json comments: %v", root["comments"])
	}
}

// TestNoteHitShowsBulletText: a search hit in a note shows the bullet's
// own text (in the text result and the structured hit's text) and the
// matching note excerpt beside it, marked as the note.
func TestNoteHitShowsBulletText(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	long := strings.Repeat("background and context, ", 6)
	r.ok("insert_after", map[string]any{"text": "Quarterly plan", "note": long + "remember the budget spreadsheet in the shared drive"})
	res, sc := call(t, r.c, "search", map[string]any{"text": "spreadsheet"})
	hits := flatHits(sc)
	if len(hits) != 1 {
		t.Fatalf("hits: %v", sc["hits"])
	}
	h := hits[0]
	if h["text"] != "Quarterly plan" {
		t.Fatalf("structured hit: text %q (want the bullet's)", h["text"])
	}
	note, _ := h["note"].(string)
	if !strings.Contains(note, "budget spreadsheet in the shared drive") || !strings.HasPrefix(note, "…") {
		t.Fatalf("structured hit: note excerpt %q", note)
	}
	txt := text(res)
	if !strings.Contains(txt, "- Quarterly plan (match in its note: \""+note+"\") ·"+r.key("Quarterly plan")) {
		t.Fatalf("text result:\n%s", txt)
	}
}

// TestDidYouMeanSynonyms: names models guess for arguments called
// otherwise here (rkey for node, index for after/position, query for
// text) are refused with the argument they mean, in the text and in the
// structured error, and nothing is written.
func TestDidYouMeanSynonyms(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	r.ok("insert_after", map[string]any{"text": "Alpha"})
	k := r.key("Alpha")
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"read_outline", map[string]any{"rkey": k}, "unknown argument rkey (did you mean node?)"},
		{"update_node", map[string]any{"rkey": k, "text": "x"}, "unknown argument rkey (did you mean node?)"},
		{"add_comment", map[string]any{"rkey": k, "text": "x"}, "unknown argument rkey (did you mean subject?)"},
		{"insert_after", map[string]any{"text": "Beta", "index": 1}, "unknown argument index (did you mean after or position?"},
		{"move_node", map[string]any{"node": k, "index": 0}, "unknown argument index (did you mean after or position?"},
		{"search", map[string]any{"query": "alpha"}, "unknown argument query (did you mean text?)"},
	} {
		txt := r.refused("invalid", c.tool, c.args)
		_, sc := call(t, r.c, c.tool, c.args)
		msg, _ := sc["error"].(map[string]any)["message"].(string)
		if !strings.Contains(txt, c.want) || !strings.Contains(msg, c.want) {
			t.Fatalf("%s %v:\ntext: %s\nstructured: %s\nwant %q", c.tool, c.args, txt, msg, c.want)
		}
	}
}

// structuredHas reports whether a string in v (structured content, at any
// depth) contains s.
func structuredHas(v any, s string) bool {
	switch x := v.(type) {
	case string:
		return strings.Contains(x, s)
	case map[string]any:
		for _, e := range x {
			if structuredHas(e, s) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if structuredHas(e, s) {
				return true
			}
		}
	}
	return false
}

// TestUnrenderedLayoutNotice: a create or update with a layout or display
// Bulleted does not render is written as given (the sets are open), and
// the result says so in one line naming the rendered values, in the text
// and the structured content (once per value, with a count), also inside
// apply_batch and in a dry run; rendered values get no notice.
func TestUnrenderedLayoutNotice(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	const rendered = "(bullet, todo, h1, h2, h3, codeBlock, quoteBlock)"
	value := func(txt string) map[string]any {
		t.Helper()
		for _, rec := range r.records() {
			if rec.Collection == "app.bulleted.node" && rec.Value.Get("text") == txt {
				return rec.Value.Map()
			}
		}
		t.Fatalf("no bullet %q", txt)
		return nil
	}
	noticed := func(name string, args map[string]any, want ...string) {
		t.Helper()
		res, sc := call(t, r.c, name, args)
		if res.IsError {
			t.Fatalf("%s %v: %s", name, args, text(res))
		}
		for _, w := range want {
			if !strings.Contains(text(res), w) || !structuredHas(sc, w) {
				t.Fatalf("%s %v: want %q in text and structured content:\n%s\n%v", name, args, w, text(res), sc)
			}
		}
		if len(want) == 0 && (strings.Contains(text(res), "Bulleted renders") || structuredHas(sc, "Bulleted renders")) {
			t.Fatalf("%s %v: a notice for rendered values:\n%s", name, args, text(res))
		}
	}
	noticed("insert_after", map[string]any{"text": "Tick me", "layout": "checkbox"},
		`layout "checkbox" is not one Bulleted renders `+rendered+`: written as given (an open set), shown as a plain bullet`)
	if v := value("Tick me"); v["layout"] != "checkbox" {
		t.Fatalf("layout stored as %v, want checkbox as given", v["layout"])
	}
	noticed("insert_after", map[string]any{"text": "Folded", "display": "folded"},
		`display "folded" is not one Bulleted renders (expanded, collapsed): written as given (an open set), shown expanded`)
	if v := value("Folded"); v["display"] != "folded" {
		t.Fatalf("display stored as %v, want folded as given", v["display"])
	}
	noticed("insert_after", map[string]any{"nodes": []any{
		map[string]any{"text": "c1", "layout": "checkbox", "children": []any{map[string]any{"text": "c2", "layout": "checkbox"}}},
		map[string]any{"text": "t1", "layout": "todo"}}},
		`layout "checkbox" (2 bullets) is not one Bulleted renders`)
	noticed("update_node", map[string]any{"node": r.key("t1"), "layout": "heading", "display": "folded"},
		`layout "heading" is not one Bulleted renders `+rendered, `display "folded" is not one Bulleted renders (expanded, collapsed): written as given (an open set), shown expanded`)
	if v := value("t1"); v["layout"] != "heading" || v["display"] != "folded" {
		t.Fatalf("t1 stored as %v / %v, want heading / folded", v["layout"], v["display"])
	}
	noticed("update_node", map[string]any{"node": r.key("t1"), "layout": "h2", "display": "collapsed"})
	noticed("apply_batch", map[string]any{"ops": []any{map[string]any{"tool": "update_node", "args": map[string]any{"node": r.key("c1"), "layout": "kanban"}}}},
		`layout "kanban" is not one Bulleted renders`)
	noticed("insert_after", map[string]any{"text": "dry", "layout": "toggle", "dry_run": true}, `layout "toggle" is not one Bulleted renders`)
}

// TestSearchUnknownLayoutSaysWhatExists: a search by a layout Bulleted
// does not render says so, with the rendered layouts, what it may mean
// (heading: h1, h2 or h3) and the layouts the outline has, in the text and
// the structured notices, and still finds bullets stored with that layout
// (the set is open); a rendered layout gets no notice.
func TestSearchUnknownLayoutSaysWhatExists(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	r.ok("insert_after", map[string]any{"nodes": []any{
		map[string]any{"text": "Title", "layout": "h1"},
		map[string]any{"text": "Part", "layout": "h2"},
		map[string]any{"text": "Do it", "layout": "todo"},
		map[string]any{"text": "Plain"},
		map[string]any{"text": "Odd one", "layout": "checkbox"},
	}})
	want := []string{
		`layout "heading" is not one Bulleted renders (bullet, todo, h1, h2, h3, codeBlock, quoteBlock)`,
		"did you mean h1, h2 or h3?",
		"layouts in this outline: bullet (1), checkbox (1), h1 (1), h2 (1), todo (1)",
	}
	res, sc := call(t, r.c, "search", map[string]any{"layout": "heading"})
	notices, _ := sc["notices"].([]any)
	if len(notices) != 1 {
		t.Fatalf("structured notices: %v\n%s", sc["notices"], text(res))
	}
	for _, w := range want {
		if !strings.Contains(text(res), w) || !strings.Contains(notices[0].(string), w) {
			t.Fatalf("want %q in text and notices:\n%s\n%v", w, text(res), notices)
		}
	}
	res, sc = call(t, r.c, "search", map[string]any{"layout": "checkbox"})
	if hits := flatHits(sc); len(hits) != 1 || !strings.Contains(text(res), `layout "checkbox" is not one Bulleted renders`) || !strings.Contains(text(res), "did you mean todo?") {
		t.Fatalf("checkbox: %v\n%s", sc["hits"], text(res))
	}
	res, sc = call(t, r.c, "search", map[string]any{"layout": "h1"})
	if sc["notices"] != nil || strings.Contains(text(res), "Bulleted renders") {
		t.Fatalf("a rendered layout got a notice:\n%s", text(res))
	}
}

// TestGuessedParamsDescribed: the parameters a model would otherwise guess
// (date formats, under, regex, state, cursor, layout, repo) carry a short
// description in the schema itself, since several clients never show the
// server instructions; the dates name their format. (TestSchemaLint keeps
// tools/list under 12 KB.)
func TestGuessedParamsDescribed(t *testing.T) {
	want := map[string][]string{
		"search":       {"text", "regex", "state", "layout", "created_from", "created_to", "completed_from", "completed_to", "under", "repo", "cursor"},
		"read_outline": {"cursor", "repo"},
		"insert_after": {"layout", "display"},
		"update_node":  {"layout", "display"},
	}
	for name, params := range want {
		tl, ok := tools.Find(name)
		if !ok {
			t.Fatalf("no tool %s", name)
		}
		props := tl.Schema["properties"].(map[string]any)
		for _, p := range params {
			d, _ := props[p].(map[string]any)["description"].(string)
			if d == "" {
				t.Errorf("%s.%s has no description", name, p)
			}
			if strings.HasSuffix(p, "_from") || strings.HasSuffix(p, "_to") {
				if !strings.Contains(d, "YYYY-MM-DD") {
					t.Errorf("%s.%s: %q does not give the date format", name, p, d)
				}
			}
		}
	}
}

// TestDryRunPreviewValidatesAsWritten: a dry run's after-view shows a new
// bullet with a mention (a facet) as the written record will read, not as
// "[invalid record]" (the planned value's Go types are not the decoded
// record's).
func TestDryRunPreviewValidatesAsWritten(t *testing.T) {
	t.Parallel()
	l := openLocal(t)
	e, err := outline.Open(l, outline.Options{Resolver: fakeResolver{"friend.test": "did:plc:friendofthetruth"}})
	if err != nil {
		t.Fatal(err)
	}
	r := &rulesRepo{t: t, l: l, c: inProcess(t, &tools.Env{Engine: e})}
	r.ok("insert_after", map[string]any{"text": "Groceries"})
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"insert_after", map[string]any{"parent": r.key("Groceries"), "text": "Ask @friend.test about eggs #shop", "dry_run": true}},
		{"import_outline", map[string]any{"parent": r.key("Groceries"), "content": "- Milk for @friend.test\n  - [ ] oat #shop\n", "dry_run": true}},
	} {
		res, _ := call(t, r.c, tc.tool, tc.args)
		out := text(res)
		if res.IsError || !strings.Contains(out, "After:") {
			t.Fatalf("%s: no after-view:\n%s", tc.tool, out)
		}
		if strings.Contains(out, "invalid record") {
			t.Fatalf("%s: the dry run's after-view calls the new bullet invalid:\n%s", tc.tool, out)
		}
	}
}
