package tools_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// nodeRecords reads the repository back: every node's value by text.
func nodeRecords(t *testing.T, l *store.Local) map[string]map[string]any {
	t.Helper()
	s, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, r := range s.Records {
		if r.Collection == "app.bulleted.node" {
			out[r.Value.Str("text")] = r.Value.Map()
		}
	}
	return out
}

// TestInsertBetweenForeignKeys: another client wrote siblings with keys
// "a", "a!", "a0"; no key of the alphabet 0-9A-Za-z fits between "a!" and
// "a0", but a graphic one does ("a(V"): inserting there writes one new
// record and rewrites none of that client's keys. Between "a" and "a!"
// every key starts "a " (it used to mint "a V", which a client that trims
// keys misorders): the insert respaces a few siblings instead. Every key
// minted holds no space, and the repository as read back keeps the order.
func TestInsertBetweenForeignKeys(t *testing.T) {
	l := openLocal(t)
	ctx := context.Background()
	node := func(rkey, sortKey, text string) store.Write {
		return store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: rkey, Value: map[string]any{"$type": "app.bulleted.node",
			"text": text, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}}
	}
	if _, err := l.Apply(ctx, "", []store.Write{
		node("3kforeignaaaa", "a", "first"),
		node("3kforeign2222", "a!", "second"),
		node("3kforeign3333", "a0", "third"),
	}); err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	order := []string{"first", "second", "third"}
	for _, tc := range []struct {
		after, text, before string
		keep                bool
	}{
		{"3kforeign2222", "between second and third", "third", true},
		{"3kforeignaaaa", "between first and second", "second", false},
	} {
		res, sc := call(t, c, "insert_after", map[string]any{"after": tc.after, "text": tc.text})
		if res.IsError {
			t.Fatalf("insert_after %s: %s", tc.after, text(res))
		}
		i := slices.Index(order, tc.before)
		order = slices.Insert(order, i, tc.text)
		r := nodeRecords(t, l)
		for name, want := range map[string]string{"first": "a", "second": "a!", "third": "a0"} {
			if got := r[name]["sortKey"]; tc.keep && got != want {
				t.Fatalf("%s: the other client's key %q was rewritten to %v (%s)", tc.text, want, got, text(res))
			}
		}
		for j, name := range order {
			k, _ := r[name]["sortKey"].(string)
			if strings.ContainsRune(k, ' ') {
				t.Fatalf("%s: minted sortKey %q holds a space", name, k)
			}
			if j > 0 && r[order[j-1]]["sortKey"].(string) >= k {
				t.Fatalf("%s: read back out of order: %q then %q (%v)", tc.text, r[order[j-1]]["sortKey"], k, order)
			}
		}
		if n := len(sc["created"].([]any)); n != 1 {
			t.Fatalf("%s: %d records created", tc.text, n)
		}
	}
}

// TestNonASCIILinks: a link with non-ASCII characters used to be refused as
// invalid at nodes[0].facets[0].features[0].uri (a field the agent never
// sent), and one such link refused a whole import. Now the facet's uri is
// percent-encoded (the text unchanged, the byte range still over the link as
// written) and every record read back is lexicon-valid.
func TestNonASCIILinks(t *testing.T) {
	l := openLocal(t)
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	const link = "https://en.wikipedia.org/wiki/Zürich"
	const uri = "https://en.wikipedia.org/wiki/Z%C3%BCrich"
	check := func(name string, v map[string]any, link, uri string) {
		t.Helper()
		if err := validate.Default().Data(v, "app.bulleted.node", nil); err != nil {
			t.Fatalf("%s: record read back is not lexicon-valid: %v", name, err)
		}
		text, _ := v["text"].(string)
		spans := facet.Record(v)
		if len(spans) != 1 || spans[0].Kind != facet.Link {
			t.Fatalf("%s: facets %v, want one link", name, v["facets"])
		}
		if spans[0].Value != uri {
			t.Fatalf("%s: facet uri %q, want %q", name, spans[0].Value, uri)
		}
		if got := text[spans[0].Start:spans[0].End]; got != link {
			t.Fatalf("%s: facet bytes %d-%d cover %q, want %q", name, spans[0].Start, spans[0].End, got, link)
		}
	}

	res, _ := call(t, c, "insert_after", map[string]any{"text": "see " + link + " for the city"})
	if res.IsError {
		t.Fatalf("insert_after: %s", text(res))
	}
	r := nodeRecords(t, l)
	v := r["see "+link+" for the city"]
	if v == nil {
		t.Fatalf("the bullet was not written: %v", r)
	}
	check("insert_after", v, link, uri)

	// an import with such links lands whole
	links := []string{"https://de.wikipedia.org/wiki/Köln", "https://ja.wikipedia.org/wiki/東京", "https://example.org/naïve?q=café"}
	var md strings.Builder
	for i, l := range links {
		fmt.Fprintf(&md, "- city %d: %s\n  - child %d\n", i, l, i)
	}
	res, sc := call(t, c, "import_outline", map[string]any{"content": md.String()})
	if res.IsError {
		t.Fatalf("import_outline: %s", text(res))
	}
	if n := len(sc["created"].([]any)); n != 2*len(links) {
		t.Fatalf("import created %d records, want %d", n, 2*len(links))
	}
	r = nodeRecords(t, l)
	for i, l := range links {
		name := fmt.Sprintf("city %d: %s", i, l)
		if r[name] == nil || r[fmt.Sprintf("child %d", i)] == nil {
			t.Fatalf("%q or its child missing after the import", name)
		}
		check(name, r[name], l, facet.LinkURI(l))
	}
}

// badResolver resolves every handle to a string that is not a DID: the
// mention facet it makes would not be valid.
type badResolver struct{}

func (badResolver) ResolveHandle(context.Context, string) (syntax.DID, error) {
	return syntax.DID("not-a-did"), nil
}

// TestInvalidDerivedFacetDropped: a facet this server derives that cannot
// be made valid (here a mention whose resolver gave no DID) does not refuse
// the agent's write: it is left out, and the result says so in its text and
// its structured diagnostics. The other facets of the text stay.
func TestInvalidDerivedFacetDropped(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	e.Resolver = badResolver{}
	c := inProcess(t, &tools.Env{Engine: e})
	const txt = "ask @bob.test about #plans"
	res, sc := call(t, c, "insert_after", map[string]any{"text": txt})
	if res.IsError {
		t.Fatalf("insert_after refused: %s", text(res))
	}
	v := nodeRecords(t, l)[txt]
	if v == nil {
		t.Fatal("the bullet was not written")
	}
	if err := validate.Default().Data(v, "app.bulleted.node", nil); err != nil {
		t.Fatalf("record read back is not lexicon-valid: %v", err)
	}
	if got := facet.Values(v, facet.Tag); len(got) != 1 || got[0] != "plans" {
		t.Fatalf("tags %v, want [plans]", got)
	}
	if got := facet.Values(v, facet.Mention); len(got) != 0 {
		t.Fatalf("the invalid mention facet was written: %v", got)
	}
	const notice = `mention "bob.test" (bytes 4-13) left as plain text`
	if !strings.Contains(text(res), notice) {
		t.Fatalf("result text does not say the mention was left out: %s", text(res))
	}
	diags := fmt.Sprint(sc["diagnostics"])
	if !strings.Contains(diags, notice) {
		t.Fatalf("structured diagnostics do not say the mention was left out: %s", diags)
	}
}

// TestValidateRecordOpenSets: the lexicons' knownValues are open sets
// (comment-policy rules, layouts, displays): validate_record used to call a
// record with an unknown comment-policy rule invalid. Now such values are
// valid, with a note in the text and in structured notes that Bulleted does
// not render them (or that the rule grants nothing); a record that breaks a
// real rule is still invalid.
func TestValidateRecordOpenSets(t *testing.T) {
	c := inProcess(t, &tools.Env{Engine: outline.New(openLocal(t))})
	for _, tc := range []struct {
		name   string
		record map[string]any
		path   string
		note   string
	}{
		{"unknown rule", map[string]any{"$type": "app.bulleted.commentPolicy", "allow": []any{"everyone", "mentioned"}, "createdAt": "2026-07-30T09:30:00.000Z"}, "allow[0]", "grants nothing"},
		{"unknown layout", map[string]any{"$type": "app.bulleted.node", "text": "x", "sortKey": "a", "layout": "kanban", "createdAt": "2026-07-30T09:30:00.000Z"}, "layout", "not one of the values Bulleted renders"},
		{"unknown display", map[string]any{"$type": "app.bulleted.node", "text": "x", "sortKey": "a", "display": "peek", "createdAt": "2026-07-30T09:30:00.000Z"}, "display", "kept as written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, sc := call(t, c, "validate_record", map[string]any{"record": tc.record})
			if res.IsError || sc["valid"] != true {
				t.Fatalf("want valid, got %s", text(res))
			}
			notes, _ := sc["notes"].([]any)
			if len(notes) != 1 {
				t.Fatalf("notes %v, want one", sc["notes"])
			}
			n := notes[0].(map[string]any)
			if n["path"] != tc.path || !strings.Contains(n["message"].(string), tc.note) {
				t.Fatalf("note %v, want at %s containing %q", n, tc.path, tc.note)
			}
			if !strings.Contains(text(res), "note: "+tc.path+": ") {
				t.Fatalf("the text does not carry the note: %s", text(res))
			}
		})
	}
	res, sc := call(t, c, "validate_record", map[string]any{"record": map[string]any{"$type": "app.bulleted.commentPolicy", "allow": []any{"everyone"}}})
	if sc["valid"] != false || !strings.Contains(text(res), "createdAt") {
		t.Fatalf("a policy without createdAt: %s", text(res))
	}
}

// TestImportSkipsDetachedSection: an export's Detached section (markdown
// and opml) is not turned into ordinary bullets by import_outline: only the
// outline is created, and the result says in its text and diagnostics
// that the detached bullets were skipped, and how many.
func TestImportSkipsDetachedSection(t *testing.T) {
	src := openLocal(t)
	ctx := context.Background()
	did := src.DID().String()
	if _, err := src.Apply(ctx, "", []store.Write{
		{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kroot1111111", Value: map[string]any{"$type": "app.bulleted.node", "text": "Kept", "sortKey": "a0", "createdAt": "2026-03-10T09:00:00.000Z"}},
		{Op: store.Create, Collection: "app.bulleted.node", RKey: "3korphan11111", Value: map[string]any{"$type": "app.bulleted.node", "text": "Orphan", "sortKey": "a0",
			"parent": "at://" + did + "/app.bulleted.node/3kgone1111111", "createdAt": "2026-03-10T09:00:00.000Z"}},
	}); err != nil {
		t.Fatal(err)
	}
	tr, err := outline.New(src).Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	v, err := view.Read(tr, nil, view.Options{Depth: 100, Limit: -1, Detached: true})
	if err != nil {
		t.Fatal(err)
	}
	for format, content := range map[string]string{"markdown": v.Markdown(), "opml": v.OPML()} {
		t.Run(format, func(t *testing.T) {
			l := openLocal(t)
			c := inProcess(t, &tools.Env{Engine: outline.New(l)})
			res, sc := call(t, c, "import_outline", map[string]any{"content": content, "format": format})
			if res.IsError {
				t.Fatalf("import: %s", text(res))
			}
			r := nodeRecords(t, l)
			if len(r) != 1 || r["Kept"] == nil {
				t.Fatalf("imported %d bullets (%v), want only Kept", len(r), r)
			}
			const notice = "skipped the export's Detached section"
			if !strings.Contains(text(res), notice) || !strings.Contains(fmt.Sprint(sc["diagnostics"]), notice+" ("+format+"): 1 detached bullet(s)") {
				t.Fatalf("the result does not say the section was skipped: %s / %v", text(res), sc["diagnostics"])
			}
		})
	}
}

// TestForeignIRILinkKept: another client wrote a link facet whose uri has
// non-ASCII characters (the reference validator accepts it). The bullet is
// not flagged invalid, and moving or ticking it (writes that keep its
// facets) is not refused at a field the agent never sent; the facet is
// kept as that client wrote it.
func TestForeignIRILinkKept(t *testing.T) {
	l := openLocal(t)
	ctx := context.Background()
	const txt = "see https://de.wikipedia.org/wiki/Köln"
	const iri = "https://de.wikipedia.org/wiki/Köln"
	if _, err := l.Apply(ctx, "", []store.Write{
		{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2", Value: map[string]any{"$type": "app.bulleted.node", "text": txt, "sortKey": "a0", "layout": "todo", "createdAt": "2026-03-10T09:00:00.000Z",
			"facets": []any{map[string]any{"index": map[string]any{"byteStart": 4, "byteEnd": len(txt)}, "features": []any{map[string]any{"$type": facet.TypeLink, "uri": iri}}}}}},
		{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaab2", Value: map[string]any{"$type": "app.bulleted.node", "text": "other", "sortKey": "a1", "createdAt": "2026-03-10T09:00:00.000Z"}},
	}); err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	if res, _ := call(t, c, "read_outline", map[string]any{}); strings.Contains(text(res), "invalid") {
		t.Fatalf("the bullet is flagged: %s", text(res))
	}
	for _, step := range []struct {
		tool string
		args map[string]any
	}{
		{"move_node", map[string]any{"node": "3kaaaaaaaaaa2", "parent": "3kaaaaaaaaab2"}},
		{"complete_todo", map[string]any{"node": "3kaaaaaaaaaa2"}},
	} {
		if res, _ := call(t, c, step.tool, step.args); res.IsError {
			t.Fatalf("%s refused: %s", step.tool, text(res))
		}
	}
	v := nodeRecords(t, l)[txt]
	if v["completedAt"] == nil || v["parent"] == nil {
		t.Fatalf("not moved and ticked: %v", v)
	}
	if s := facet.Record(v); len(s) != 1 || s[0].Value != iri {
		t.Fatalf("facet not kept as written: %v", v["facets"])
	}
}

// TestSortBetweenForeignKeys: a sort that must place a bullet between
// another client's "a" and "a!" (no key without a space fits there) gives
// the level fresh keys; read back, the order is the sorted one and no
// minted key holds a space.
func TestSortBetweenForeignKeys(t *testing.T) {
	l := openLocal(t)
	ctx := context.Background()
	var ws []store.Write
	for _, n := range []struct{ rkey, key, text string }{{"3kforeignaaaa", "a", "A"}, {"3kforeign2222", "a!", "C"}, {"3kforeign3333", "a0", "D"}, {"3kforeign4444", "a1", "B"}} {
		ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: n.rkey, Value: map[string]any{"$type": "app.bulleted.node",
			"text": n.text, "sortKey": n.key, "createdAt": "2026-03-10T09:00:00.000Z"}})
	}
	if _, err := l.Apply(ctx, "", ws); err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	if res, _ := call(t, c, "sort_children", map[string]any{"by": "text"}); res.IsError {
		t.Fatalf("sort_children: %s", text(res))
	}
	r := nodeRecords(t, l)
	prev := ""
	for _, name := range []string{"A", "B", "C", "D"} {
		k, _ := r[name]["sortKey"].(string)
		if k <= prev || strings.ContainsRune(k, ' ') {
			t.Fatalf("%s: sortKey %q after %q (want increasing, no space)", name, k, prev)
		}
		prev = k
	}
}
