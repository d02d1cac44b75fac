package markup_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// trickyTexts are texts that start or end with what the importer reads
// specially (prefixes, escapes, markers, whitespace, line breaks), and a
// few that look so but are not.
var trickyTexts = []string{
	"plain", "", "# not a heading", "## two", "### three", "#### four hashes", "#", "#hashtag", "[ ] not a todo", "[x] not done",
	"[X] upper", "[ ]", "[x]y", "> not a quote", ">", ">> double", "```", "``` go", "````", `\ backslash`, `\`, `\\two`,
	" leading space", "  two spaces", "\ttab", "trailing space ", "trailing tab\t", "text {display=collapsed}", "{layout=x}",
	"f() {}", "{}", "a {b", "a {b=c d=e}", "a {b=%zz}", "a{b=c}", "{mirror=at://did:plc:x/app.bulleted.node/3kabc}",
	"x <br> y", "line one\nline two", "a\\\nb", `\<br>`, "<br>", "a\\<br>b", "\n", "a\n", "\nb", "- dash", "1. one", "2) two",
	"* star", "+ plus", "<!-- comment -->", "<!-- bulleted:detached x -->", "↪ arrow", "_emphasis_ and **bold** `code`",
	"---", "title: x", "| a | b |", "x_(mirrored, read-only)_", "x _(by did:plc:x, read-only)_", "\r", "a\rb", "ünïcödé 🎉 {k=v}",
	"\r```", "\u00a0```\n````",
}

var trickyNotes = []string{
	"", "one line", "- a list\n- in a note", "1. numbered\n2) too", "* star\n+ plus", "<!-- a comment -->", "  <!-- indented -->",
	"\n\nleading blanks", "a\n\nb\n\n\nc", "trailing blank\n", "trailing two\n\n", "  indented\n\tand tab", `\ back`, "> quoted",
	"   ", "```\ncode\n```", "# heading\n[ ] todo", "x {display=collapsed}", "\n", "\n\n", "end\n \n",
	"\r<!-- after a carriage return", "a\n\u00a0<!-- after a no-break space", "\u2003> em space", "\u0085- next line",
}

type want struct {
	Text, Layout, Display, Note string
	Completed                   bool
}

func key(clock *syntax.TIDClock) string { return clock.Next().String() }

const did = "did:plc:markuptest00000000000000"

func nodeRec(rk, parent, sortKey string, w want) store.Record {
	v := map[string]any{"$type": lexicon.Node, "text": w.Text, "sortKey": sortKey, "createdAt": "2026-01-01T00:00:00.000Z"}
	if parent != "" {
		v["parent"] = "at://" + did + "/" + lexicon.Node + "/" + parent
	}
	if w.Layout != "" {
		v["layout"] = w.Layout
	}
	if w.Display != "" {
		v["display"] = w.Display
	}
	if w.Completed {
		v["completedAt"] = "2026-01-02T00:00:00.000Z"
	}
	return store.Record{Collection: lexicon.Node, RKey: rk, CID: "c" + rk, Value: store.MustValue(v)}
}

func noteRec(rk, text string) store.Record {
	return store.Record{Collection: lexicon.Note, RKey: rk, CID: "n" + rk, Value: store.MustValue(map[string]any{"$type": lexicon.Note,
		"subject": "at://" + did + "/" + lexicon.Node + "/" + rk, "text": text, "createdAt": "2026-01-01T00:00:00.000Z"})}
}

func exportAll(t *testing.T, tr *outline.Tree, other view.Trees) string {
	t.Helper()
	v, err := view.Read(tr, nil, view.Options{Depth: 50, Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	v.Enrich(tr, other)
	return v.Markdown()
}

// TestMarkdownTrickyTexts: every tricky text and note, in every layout
// (with and without display, completion and a note), exported and read
// back is what was stored.
func TestMarkdownTrickyTexts(t *testing.T) {
	clock := syntax.NewTIDClock(0)
	var cases []want
	layouts := []string{"", "todo", "h1", "h2", "h3", "quoteBlock", "codeBlock", "checkbox", "kanban board {x}", "50%"}
	for i, txt := range trickyTexts {
		for j, l := range layouts {
			w := want{Text: txt, Layout: l}
			if l == "codeBlock" {
				w.Text = txt + "\n```\n  ````\nend"
			}
			if l == "quoteBlock" {
				w.Text = txt + "\n" + txt + "\n\n  second " + txt
			}
			switch (i + j) % 4 {
			case 1:
				w.Display = "collapsed"
			case 2:
				w.Completed = true
			case 3:
				w.Display, w.Completed = "folded up", true
			}
			w.Note = trickyNotes[(i*len(layouts)+j)%len(trickyNotes)]
			cases = append(cases, w)
		}
	}
	for _, n := range trickyNotes {
		cases = append(cases, want{Text: "with note", Note: n}, want{Text: "quote", Layout: "quoteBlock", Note: n}, want{Text: "code", Layout: "codeBlock", Note: n})
	}
	parent := key(clock)
	recs := []store.Record{nodeRec(parent, "", "a", want{Text: "parent"})}
	for i, w := range cases {
		rk := key(clock)
		recs = append(recs, nodeRec(rk, parent, fmt.Sprintf("a%05d", i), w))
		if w.Note != "" {
			recs = append(recs, noteRec(rk, w.Note))
		}
	}
	tr := outline.Build(&store.Snapshot{DID: did, Commit: "c", Records: recs})
	md := exportAll(t, tr, nil)
	d, err := markup.Markdown(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Notes) != 0 {
		t.Errorf("import of an export says %q", d.Notes)
	}
	if len(d.Nodes) != 1 || len(d.Nodes[0].Children) != len(cases) {
		t.Fatalf("read back %d top bullets (%d children), want 1 (%d):\n%s", len(d.Nodes), len(d.Nodes[0].Children), len(cases), md)
	}
	for i, w := range cases {
		n := d.Nodes[0].Children[i]
		got := want{Text: n.Text, Layout: n.Layout, Display: n.Display, Note: n.Note, Completed: n.Completed}
		if w.Completed && w.Layout == "" {
			w.Layout = "bullet" // completedAt on a bullet: said with layout=bullet
		}
		if got != w || len(n.Children) != 0 {
			line := d.Lines[fmt.Sprintf("nodes[0].children[%d]", i)]
			ls := strings.Split(md, "\n")
			t.Errorf("case %d: read back\n %#v\nwant\n %#v\nfrom line %d: %q", i, got, w, line, ls[max(line-1, 0):min(line+3, len(ls))])
		}
	}
	// ordinary text stays as it is
	for _, s := range []string{"- plain\n", "- #hashtag\n", "- [x]y\n", "- a{b=c}\n", "- - dash\n", "- _emphasis_ and **bold** `code`\n", "- ↪ arrow\n", "- a {b\n", "- a {b=%zz}\n"} {
		if !strings.Contains(md, "\n  "+strings.TrimSuffix(s, "\n")) {
			t.Errorf("export escaped ordinary text %q", s)
		}
	}
}

// TestMarkdownImportVectors: what import reads from hand-written markers
// and escapes, and what it says about what it does not understand.
func TestMarkdownImportVectors(t *testing.T) {
	for _, c := range []struct {
		in    string
		nodes []intent.NewNode
		notes []string // substrings, in order of d.Notes
	}{
		{"- a {color=red}", []intent.NewNode{{Text: "a {color=red}"}}, []string{"1 line(s) end in a {…} marker that is not understood, kept as part of the text: line 1 {color=red} (unknown key color)"}},
		{"- a {display=collapsed color=red}", []intent.NewNode{{Text: "a {display=collapsed color=red}"}}, []string{"unknown key color"}},
		{"- a {mirror=https://x}", []intent.NewNode{{Text: "a {mirror=https://x}"}}, []string{"mirror is not an at://DID/app.bulleted.node/RKEY"}},
		{"- a {mirror=at://did:plc:x/app.bulleted.node/k layout=h1}", []intent.NewNode{{Text: "a {mirror=at://did:plc:x/app.bulleted.node/k layout=h1}"}}, []string{"a mirror has no layout"}},
		{"- a {completed=yes}", []intent.NewNode{{Text: "a {completed=yes}"}}, []string{"only true"}},
		{"- a {display=collapsed}\n- b {layout=my%20board display=collapsed}\n- {}", []intent.NewNode{{Text: "a", Display: "collapsed"}, {Text: "b", Layout: "my board", Display: "collapsed"}, {Text: ""}}, nil},
		{"- \\# x\n- [ ] \\ y\n- \\\\z\n- a<br>b\\<br>c", []intent.NewNode{{Text: "# x"}, {Text: " y", Layout: "todo"}, {Text: "\\z"}, {Text: "a\nb<br>c"}}, nil},
		{"- ↪ Recipes {mirror=at://did:plc:x/app.bulleted.node/k}\n  - Soup _(mirrored, read-only)_\n    - Leek\n  <!-- mirror cut: size -->\n- next",
			[]intent.NewNode{{Text: "Recipes", Mirror: "at://did:plc:x/app.bulleted.node/k"}, {Text: "next"}},
			[]string{"skipped 2 row(s) nested under 1 mirror line(s)", "skipped 1 HTML comment(s), not bullets (first: line 4 <!-- mirror cut: size -->)"}},
		{"- theirs {by=did:plc:friend}", []intent.NewNode{{Text: "theirs"}}, []string{"1 bullet(s) marked as another identity's (by=did:plc:friend…"}},
		{"---\ntitle: T\ndescription: D\n---\n- a", []intent.NewNode{{Text: "a"}}, []string{"skipped the front matter (lines 1-4; title, description)"}},
		{"- ```go\n  x\n  ```", []intent.NewNode{{Text: "x", Layout: "codeBlock"}}, []string{`ignored the info string of 1 code fence(s) (a codeBlock has no language): line 1 "go"`}},
		{"- a\n  note\n\n  more\n- b\n\n  loose", []intent.NewNode{{Text: "a", Note: "note\n\nmore"}, {Text: "b", Note: "loose"}}, nil},
		{"- a\r\n  note\r\n- b\r\n", []intent.NewNode{{Text: "a", Note: "note"}, {Text: "b"}}, nil},
		{"- [ ]\n- #\n- >", []intent.NewNode{{Text: "", Layout: "todo"}, {Text: "", Layout: "h1"}, {Text: "", Layout: "quoteBlock"}}, nil},
	} {
		d, err := markup.Markdown(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		g, w := fmt.Sprintf("%+v", d.Nodes), fmt.Sprintf("%+v", c.nodes)
		if g != w {
			t.Errorf("%q:\n got %s\nwant %s", c.in, g, w)
		}
		if len(d.Notes) != len(c.notes) {
			t.Errorf("%q: notes %q, want %d", c.in, d.Notes, len(c.notes))
			continue
		}
		for i, n := range c.notes {
			if !strings.Contains(d.Notes[i], n) {
				t.Errorf("%q: note %q does not say %q", c.in, d.Notes[i], n)
			}
		}
	}
}

// TestMirrorImportSameRepository: a mirror line whose original is in the
// repository imported into becomes a mirror of that same original; one
// naming a bullet of this repository that does not exist becomes a plain
// bullet with the line's text, and the result says so; one of another
// repository is created as given, and said.
func TestMirrorImportSameRepository(t *testing.T) {
	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := outline.New(l)
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "Recipes", Children: []intent.NewNode{{Text: "Soup"}}}, {Text: "Home"}}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	tr, _ := e.Tree(ctx)
	recipes, home := tr.Roots.At(0).Key(), tr.Roots.At(1).Key()
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Mirror{Original: recipes, Pos: outline.Position{Parent: home}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	tr, _ = e.Tree(ctx)
	md := exportAll(t, tr, nil)
	orig := "at://" + l.DID().String() + "/app.bulleted.node/" + recipes
	if !strings.Contains(md, "  - ↪ Recipes {mirror="+orig+"}\n    - Soup _(mirrored, read-only)_\n") {
		t.Fatalf("export:\n%s", md)
	}
	gone := "at://" + l.DID().String() + "/app.bulleted.node/3kgonegonegon"
	md += "- ↪ Gone {mirror=" + gone + "}\n- ↪ Theirs {mirror=at://did:plc:other/app.bulleted.node/3kabc}\n"
	d, err := markup.Markdown(md)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Pos: outline.Position{}, Nodes: d.Nodes}.Plan(p) })
	if err != nil {
		t.Fatal(err)
	}
	diags := strings.Join(out.Plan.Diagnostics, "\n")
	for _, s := range []string{"nodes[2]: the original " + gone + " of a mirror does not exist in this repository; created a plain bullet with the mirror's text \"Gone\" instead",
		"1 mirror(s) of bullets in other repositories created as given (first: at://did:plc:other/app.bulleted.node/3kabc)"} {
		if !strings.Contains(diags, s) {
			t.Errorf("diagnostics do not say %q:\n%s", s, diags)
		}
	}
	// the repository as read back
	tr, _ = e.Tree(ctx)
	if tr.Roots.Len() != 6 {
		t.Fatalf("%d top-level bullets", tr.Roots.Len())
	}
	m := tr.Roots.At(3).Children
	if m.Len() != 1 || !m.At(0).Mirror || m.At(0).Str("original") != orig {
		t.Fatalf("imported Home's child is not a mirror of %s: %+v", orig, m)
	}
	if it := tr.Roots.At(4); it.Mirror || it.Str("text") != "Gone" {
		t.Fatalf("missing original: %+v", it.Rec.Value)
	}
	if it := tr.Roots.At(5); !it.Mirror || it.Str("original") != "at://did:plc:other/app.bulleted.node/3kabc" {
		t.Fatalf("other repository's original: %+v", it.Rec.Value)
	}
}

// TestMarkdownRoundTripGenerated: a generated outline of 20,000 bullets
// (todos, notes, headings), with tricky texts and notes, quotes, code,
// other layouts, collapsed and other displays, completed headings and
// mirrors (of bullets of the same repository, one of another repository,
// one whose original shows more rows than a mirror renders) added on top;
// exported (Markdown, and OPML), imported into a fresh embedded store and
// exported again: the two exports are byte-identical (OPML: from <body>,
// the head names the repository), the records read back match, and the
// import says what it skipped (the rows mirrors show, the mirror cut).
func TestMarkdownRoundTripGenerated(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 6_000
	}
	ctx := context.Background()
	src := generated(t, n)
	// the records as read back
	type rec struct {
		Text, Layout, Display, Note, Mirror string
		Done                                bool
	}
	flat := func(tr *outline.Tree) []rec {
		var out []rec
		var walk func(items outline.Kids)
		walk = func(items outline.Kids) {
			for it := range items.Items() {
				r := rec{Mirror: it.Str("original")}
				if !it.Mirror {
					r = rec{Text: it.Str("text"), Layout: it.Str("layout"), Display: it.Str("display"), Done: it.Str("completedAt") != ""}
					if it.Note != nil {
						r.Note, _ = it.Note.Value.Text("text")
					}
					if r.Layout == "bullet" {
						r.Layout = ""
					}
					if r.Display == "expanded" {
						r.Display = ""
					}
				}
				out = append(out, r)
				walk(it.Children)
			}
		}
		walk(tr.Roots)
		return out
	}
	want := flat(src)
	mirrors := 0
	for _, r := range want {
		if r.Mirror != "" {
			mirrors++
		}
	}
	if len(want) < n || mirrors != 43 {
		t.Fatalf("%d records, %d mirrors", len(want), mirrors)
	}
	trees := func(did string) (*outline.Tree, error) {
		if did == outlinegen.DID {
			return src, nil
		}
		return nil, nil
	}
	for _, format := range []string{"markdown", "opml"} {
		t.Run(format, func(t *testing.T) {
			export, parse := exportAll, markup.Markdown
			if format == "opml" {
				// the OPML head names the repository; the body is compared
				export = func(t *testing.T, tr *outline.Tree, other view.Trees) string {
					v, err := view.Read(tr, nil, view.Options{Depth: 50, Limit: -1})
					if err != nil {
						t.Fatal(err)
					}
					v.Enrich(tr, other)
					o := v.OPML()
					return o[strings.Index(o, "<body>"):]
				}
				parse = func(s string) (*markup.Doc, error) { return markup.OPML("<opml>" + s) }
			}
			first := export(t, src, nil)
			d, err := parse(first)
			if err != nil {
				t.Fatal(err)
			}
			said := strings.Join(d.Notes, "\n")
			if !strings.Contains(said, "row(s) nested under") || !strings.Contains(said, "HTML comment(s), not bullets (first: line") ||
				!strings.Contains(said, "mirror cut: size: at most 100") || len(d.Notes) != 2 {
				t.Fatalf("import notes: %s", said)
			}
			l, err := store.OpenLocal(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			e := outline.New(l)
			out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Pos: outline.Position{}, Nodes: d.Nodes}.Plan(p) })
			if err != nil {
				t.Fatal(err)
			}
			if diags := strings.Join(out.Plan.Diagnostics, "\n"); !strings.Contains(diags, "43 mirror(s) of bullets in other repositories created as given") {
				t.Fatalf("diagnostics: %s", diags)
			}
			got, err := e.Tree(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if second := export(t, got, trees); second != first {
				a, b := strings.Split(first, "\n"), strings.Split(second, "\n")
				for i := range min(len(a), len(b)) {
					if a[i] != b[i] {
						t.Fatalf("exports differ at line %d:\n%q\n%q", i+1, a[i], b[i])
					}
				}
				t.Fatalf("exports differ in length: %d and %d lines", len(a), len(b))
			}
			b := flat(got)
			if len(b) != len(want) {
				t.Fatalf("%d records read back, want %d", len(b), len(want))
			}
			for i := range want {
				if want[i] != b[i] {
					t.Fatalf("record %d: read back %+v, want %+v", i, b[i], want[i])
				}
			}
		})
	}
}

// generated is outlinegen's outline of about n bullets with the tricky
// texts and notes, quotes, code, other layouts and displays, completed
// headings and 43 mirrors added on top.
func generated(t *testing.T, n int) *outline.Tree {
	t.Helper()
	recs := outlinegen.Generate(n, 7)
	src0 := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c", Records: recs})
	section := map[string]int{} // node key → its top-level section
	for i, r := range src0.Roots.All() {
		var walk func(it *outline.Item)
		walk = func(it *outline.Item) {
			section[it.Key()] = i
			for c := range it.Children.Items() {
				walk(c)
			}
		}
		walk(r)
	}
	notes := map[string]int{}
	for i, r := range recs {
		if r.Collection == lexicon.Note {
			notes[r.RKey] = i
		}
	}
	var extra []store.Record
	k := 0
	for i := range recs {
		r := &recs[i]
		if r.Collection != lexicon.Node {
			continue
		}
		k++
		v := r.Value.Map()
		if k%7 == 0 {
			v["text"] = trickyTexts[(k/7)%len(trickyTexts)]
			delete(v, "facets")
		}
		switch {
		case k%37 == 0:
			v["layout"] = "quoteBlock"
			v["text"] = v["text"].(string) + "\n> quoted\n"
		case k%41 == 0:
			v["layout"] = "codeBlock"
			v["text"] = "```\n" + v["text"].(string) + "\n\n  ````"
		case k%43 == 0:
			v["layout"] = "checkbox"
		case k%47 == 0:
			v["layout"] = "kanban board"
		case k%53 == 0:
			v["layout"], v["completedAt"] = "h2", "2026-01-02T00:00:00.000Z"
		case k%59 == 0:
			v["layout"] = "h3"
		}
		switch {
		case k%29 == 0:
			v["display"] = "collapsed"
		case k%31 == 0:
			v["display"] = "pinned open"
		case k%61 == 0:
			v["display"] = "expanded"
		}
		r.Value = store.MustValue(v)
		if k%13 == 0 {
			note := trickyNotes[(k/13)%len(trickyNotes)]
			if note == "" {
				continue
			}
			if j, ok := notes[r.RKey]; ok {
				m := recs[j].Value.Map()
				m["text"] = note
				recs[j].Value = store.MustValue(m)
			} else {
				extra = append(extra, store.Record{Collection: lexicon.Note, RKey: r.RKey, CID: "x" + r.RKey, Value: store.MustValue(map[string]any{"$type": lexicon.Note,
					"subject": "at://" + outlinegen.DID + "/" + lexicon.Node + "/" + r.RKey, "text": note, "createdAt": "2026-01-01T00:00:00.000Z"})})
			}
		}
	}
	// mirrors: under bullets of the first two sections, of bullets in the
	// others (so none renders itself); the bullet with the most rows under
	// it (more than a mirror renders); one of another repository; one at the
	// top level
	clock := syntax.NewTIDClock(1)
	var size func(it *outline.Item) int
	size = func(it *outline.Item) int {
		n := 1
		for c := range it.Children.Items() {
			n += size(c)
		}
		return n
	}
	var biggest *outline.Item
	var origs, parents []*outline.Item
	for _, it := range src0.Nodes.All() {
		switch s := section[it.Key()]; {
		case s < 2:
			parents = append(parents, it)
		default:
			origs = append(origs, it)
			if biggest == nil || size(it) > size(biggest) {
				biggest = it
			}
		}
	}
	slices.SortFunc(parents, func(a, b *outline.Item) int { return strings.Compare(a.Key(), b.Key()) })
	slices.SortFunc(origs, func(a, b *outline.Item) int { return strings.Compare(a.Key(), b.Key()) })
	if size(biggest) <= view.MirrorRows+1 {
		t.Fatalf("no bullet with more than %d rows under it outside the first sections (%d: %d, %d roots)", view.MirrorRows, len(origs), size(biggest), src0.Roots.Len())
	}
	mirror := func(parent *outline.Item, original, sortKey string) {
		rk := clock.Next().String()
		v := map[string]any{"$type": lexicon.Mirror, "original": original, "sortKey": sortKey, "createdAt": "2026-01-01T00:00:00.000Z"}
		if parent != nil {
			v["parent"] = "at://" + outlinegen.DID + "/" + lexicon.Node + "/" + parent.Key()
		}
		extra = append(extra, store.Record{Collection: lexicon.Mirror, RKey: rk, CID: "m" + rk, Value: store.MustValue(v)})
	}
	uri := func(it *outline.Item) string { return "at://" + outlinegen.DID + "/" + lexicon.Node + "/" + it.Key() }
	for i := 0; i < 40; i++ {
		mirror(parents[(i*7919)%len(parents)], uri(origs[(i*104729)%len(origs)]), fmt.Sprintf("zm%02d", i))
	}
	mirror(parents[1], uri(biggest), "zz0")
	mirror(parents[2], "at://did:plc:someoneelse0000000000000/app.bulleted.node/3kabcdefghij2", "zz1")
	mirror(nil, uri(origs[3]), "zzzz")
	src := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c", Records: append(recs, extra...)})
	if src.Detached.Len() != 0 {
		t.Fatalf("%d detached", src.Detached.Len())
	}
	return src
}

// TestMarkdownRandomTexts: texts and notes drawn from the characters the
// importer reads specially, in every layout, read back as stored (from
// Markdown, and from OPML).
func TestMarkdownRandomTexts(t *testing.T) {
	pieces := []string{"#", "# ", "[", "]", "[ ]", "[x]", " ", "\t", "\n", "\r", ">", "> ", "`", "```", `\`, "{", "}", "{}", "=", "%", "%20",
		"<br>", "<!--", "-->", "- ", "1.", "2)", "* ", "+", "a", "b", "{display=collapsed}", " {x=y}", "↪", "_", "---", "layout="}
	layouts := []string{"", "todo", "h1", "h2", "h3", "quoteBlock", "codeBlock", "checkbox"}
	r := rand.New(rand.NewPCG(3, 2))
	word := func() string {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		return b.String()
	}
	n := 3000
	if testing.Short() {
		n = 500
	}
	clock := syntax.NewTIDClock(0)
	parent := key(clock)
	recs := []store.Record{nodeRec(parent, "", "a", want{Text: "parent"})}
	cases := make([]want, n)
	for i := range cases {
		w := want{Text: word(), Layout: layouts[r.IntN(len(layouts))], Completed: r.IntN(4) == 0}
		if r.IntN(3) == 0 {
			w.Display = []string{"collapsed", "odd {value}"}[r.IntN(2)]
		}
		if r.IntN(3) == 0 {
			w.Note = word() + "\n" + word()
		}
		cases[i] = w
		rk := key(clock)
		recs = append(recs, nodeRec(rk, parent, fmt.Sprintf("a%05d", i), w))
		if w.Note != "" {
			recs = append(recs, noteRec(rk, w.Note))
		}
	}
	tr := outline.Build(&store.Snapshot{DID: did, Commit: "c", Records: recs})
	v, err := view.Read(tr, nil, view.Options{Depth: 5, Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"markdown", "opml"} {
		src, parse := v.Markdown(), markup.Markdown
		if format == "opml" {
			src, parse = v.OPML(), markup.OPML
		}
		d, err := parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Notes) != 0 || len(d.Nodes) != 1 || len(d.Nodes[0].Children) != n {
			t.Fatalf("%s: notes %q, %d nodes", format, d.Notes, len(d.Nodes))
		}
		for i, w := range cases {
			c := d.Nodes[0].Children[i]
			if w.Completed && w.Layout == "" {
				w.Layout = "bullet"
			}
			if got := (want{Text: c.Text, Layout: c.Layout, Display: c.Display, Note: c.Note, Completed: c.Completed}); got != w {
				line := d.Lines[fmt.Sprintf("nodes[0].children[%d]", i)]
				ls := strings.Split(src, "\n")
				t.Fatalf("%s case %d: read back\n %#v\nwant\n %#v\nfrom %q", format, i, got, w, ls[max(line-1, 0):min(line+3, len(ls))])
			}
		}
	}
}

// TestOPMLSaysWhatXMLCannotCarry: a text or note holding a character XML
// 1.0 cannot carry (a form feed, invalid UTF-8) is exported as U+FFFD, and
// the export says how many values lost characters so.
func TestOPMLSaysWhatXMLCannotCarry(t *testing.T) {
	clock := syntax.NewTIDClock(0)
	a, b, c := key(clock), key(clock), key(clock)
	tr := outline.Build(&store.Snapshot{DID: did, Commit: "c", Records: []store.Record{
		nodeRec(a, "", "a", want{Text: "page\fbreak"}), nodeRec(b, "", "b", want{Text: "fine\ttab\r\n"}), noteRec(b, "bad \xff byte"),
		nodeRec(c, "", "c", want{Text: "ok"}),
	}})
	v, err := view.Read(tr, nil, view.Options{Depth: 5, Limit: -1})
	if err != nil {
		t.Fatal(err)
	}
	o := v.OPML()
	if !strings.Contains(o, "<!-- 2 value(s) hold characters XML cannot carry (control characters other than tab and line breaks, or invalid UTF-8), written as U+FFFD; format=json keeps them -->\n</body>") {
		t.Fatalf("the export does not say so:\n%s", o)
	}
	d, err := markup.OPML(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Nodes) != 3 || d.Nodes[0].Text != "page\uFFFDbreak" || d.Nodes[1].Text != "fine\ttab\r\n" || d.Nodes[1].Note != "bad \uFFFD byte" || len(d.Notes) != 1 || !strings.Contains(d.Notes[0], "XML cannot carry") {
		t.Fatalf("%+v %q", d.Nodes, d.Notes)
	}
}
