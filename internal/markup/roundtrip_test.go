package markup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
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
}

var trickyNotes = []string{
	"", "one line", "- a list\n- in a note", "1. numbered\n2) too", "* star\n+ plus", "<!-- a comment -->", "  <!-- indented -->",
	"\n\nleading blanks", "a\n\nb\n\n\nc", "trailing blank\n", "trailing two\n\n", "  indented\n\tand tab", `\ back`, "> quoted",
	"   ", "```\ncode\n```", "# heading\n[ ] todo", "x {display=collapsed}", "\n", "\n\n", "end\n \n",
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
	return store.Record{Collection: lexicon.Node, RKey: rk, CID: "c" + rk, Value: v}
}

func noteRec(rk, text string) store.Record {
	return store.Record{Collection: lexicon.Note, RKey: rk, CID: "n" + rk, Value: map[string]any{"$type": lexicon.Note,
		"subject": "at://" + did + "/" + lexicon.Node + "/" + rk, "text": text, "createdAt": "2026-01-01T00:00:00.000Z"}}
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
		nodes []outline.NewNode
		notes []string // substrings, in order of d.Notes
	}{
		{"- a {color=red}", []outline.NewNode{{Text: "a {color=red}"}}, []string{"1 line(s) end in a {…} marker that is not understood, kept as part of the text: line 1 {color=red} (unknown key color)"}},
		{"- a {display=collapsed color=red}", []outline.NewNode{{Text: "a {display=collapsed color=red}"}}, []string{"unknown key color"}},
		{"- a {mirror=https://x}", []outline.NewNode{{Text: "a {mirror=https://x}"}}, []string{"mirror is not an at://DID/app.bulleted.node/RKEY"}},
		{"- a {mirror=at://did:plc:x/app.bulleted.node/k layout=h1}", []outline.NewNode{{Text: "a {mirror=at://did:plc:x/app.bulleted.node/k layout=h1}"}}, []string{"a mirror has no layout"}},
		{"- a {completed=yes}", []outline.NewNode{{Text: "a {completed=yes}"}}, []string{"only true"}},
		{"- a {display=collapsed}\n- b {layout=my%20board display=collapsed}\n- {}", []outline.NewNode{{Text: "a", Display: "collapsed"}, {Text: "b", Layout: "my board", Display: "collapsed"}, {Text: ""}}, nil},
		{"- \\# x\n- [ ] \\ y\n- \\\\z\n- a<br>b\\<br>c", []outline.NewNode{{Text: "# x"}, {Text: " y", Layout: "todo"}, {Text: "\\z"}, {Text: "a\nb<br>c"}}, nil},
		{"- ↪ Recipes {mirror=at://did:plc:x/app.bulleted.node/k}\n  - Soup _(mirrored, read-only)_\n    - Leek\n  <!-- mirror cut: size -->\n- next",
			[]outline.NewNode{{Text: "Recipes", Mirror: "at://did:plc:x/app.bulleted.node/k"}, {Text: "next"}},
			[]string{"skipped 2 row(s) nested under 1 mirror line(s)", "skipped 1 HTML comment(s), not bullets (first: line 4 <!-- mirror cut: size -->)"}},
		{"- theirs {by=did:plc:friend}", []outline.NewNode{{Text: "theirs"}}, []string{"1 bullet(s) marked as another identity's (by=did:plc:friend…"}},
		{"---\ntitle: T\ndescription: D\n---\n- a", []outline.NewNode{{Text: "a"}}, []string{"skipped the front matter (lines 1-4; title, description)"}},
		{"- ```go\n  x\n  ```", []outline.NewNode{{Text: "x", Layout: "codeBlock"}}, []string{`ignored the info string of 1 code fence(s) (a codeBlock has no language): line 1 "go"`}},
		{"- a\n  note\n\n  more\n- b\n\n  loose", []outline.NewNode{{Text: "a", Note: "note\n\nmore"}, {Text: "b", Note: "loose"}}, nil},
		{"- a\r\n  note\r\n- b\r\n", []outline.NewNode{{Text: "a", Note: "note"}, {Text: "b"}}, nil},
		{"- [ ]\n- #\n- >", []outline.NewNode{{Text: "", Layout: "todo"}, {Text: "", Layout: "h1"}, {Text: "", Layout: "quoteBlock"}}, nil},
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
	if _, err := e.Do(ctx, false, func(p *outline.Planner) error {
		return p.Insert(outline.Position{}, []outline.NewNode{{Text: "Recipes", Children: []outline.NewNode{{Text: "Soup"}}}, {Text: "Home"}})
	}); err != nil {
		t.Fatal(err)
	}
	tr, _ := e.Tree(ctx)
	recipes, home := tr.Roots[0].Key(), tr.Roots[1].Key()
	if _, err := e.Do(ctx, false, func(p *outline.Planner) error {
		return p.Mirror(recipes, outline.Position{Parent: home})
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
	out, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.Insert(outline.Position{}, d.Nodes) })
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
	if len(tr.Roots) != 6 {
		t.Fatalf("%d top-level bullets", len(tr.Roots))
	}
	m := tr.Roots[3].Children
	if len(m) != 1 || !m[0].Mirror || m[0].Str("original") != orig {
		t.Fatalf("imported Home's child is not a mirror of %s: %+v", orig, m)
	}
	if it := tr.Roots[4]; it.Mirror || it.Str("text") != "Gone" {
		t.Fatalf("missing original: %+v", it.Rec.Value)
	}
	if it := tr.Roots[5]; !it.Mirror || it.Str("original") != "at://did:plc:other/app.bulleted.node/3kabc" {
		t.Fatalf("other repository's original: %+v", it.Rec.Value)
	}
}
