package markup_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
)

func TestImportVectors(t *testing.T) {
	raw, err := os.ReadFile("testdata/import.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name   string           `json:"name"`
		Format string           `json:"format"`
		Input  string           `json:"input"`
		Nodes  []intent.NewNode `json:"nodes"`
		Lines  map[string]int   `json:"lines"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			parse := markup.Markdown
			if c.Format == "opml" {
				parse = markup.OPML
			}
			d, err := parse(c.Input)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(d.Nodes, c.Nodes) {
				g, _ := json.Marshal(d.Nodes)
				w, _ := json.Marshal(c.Nodes)
				t.Fatalf("nodes\n got %s\nwant %s", g, w)
			}
			for lab, line := range c.Lines {
				if d.Lines[lab] != line {
					t.Fatalf("%s: line %d, want %d (all %v)", lab, d.Lines[lab], line, d.Lines)
				}
			}
		})
	}
	if _, err := markup.OPML("<opml><body></body></opml>"); !errors.Is(err, markup.ErrSyntax) {
		t.Fatalf("empty OPML: %v", err)
	}
}

const sample = `- # Project
  - [ ] Buy milk
    remember oat
  - [x] Call Bob
  - ## Details
    - > quoted
      > twice
    - ` + "```" + `
      x := 1
        y
      ` + "```" + `
    - plain with #tag
- Second
`

// Export Markdown → import → export gives the same Markdown, read back from
// the repository.
func TestMarkdownRoundTrip(t *testing.T) {
	ctx := context.Background()
	export := func(md string) string {
		l, err := store.OpenLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		e := outline.New(l)
		d, err := markup.Markdown(md)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return (intent.Insert{Pos: outline.Position{}, Nodes: d.Nodes}).Plan(p)
		}); err != nil {
			t.Fatal(err)
		}
		tr, err := e.Tree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := view.Read(tr, nil, view.Options{Depth: 50, Limit: -1})
		if err != nil {
			t.Fatal(err)
		}
		return v.Markdown()
	}
	first := export(sample)
	if first != sample {
		t.Fatalf("export of the import differs from the input:\n%s\nwant\n%s", first, sample)
	}
	if second := export(first); second != first {
		t.Fatalf("round trip differs:\n%s\nwant\n%s", second, first)
	}
}

// TestDetachedSectionSkipped: the Detached section of an export (view's
// marker comment, or OPML outline elements with _detached) is counted and
// named in Notes, never imported; an export with nothing else is refused,
// saying why.
func TestDetachedSectionSkipped(t *testing.T) {
	md := "- a\n  - b\n\n" + markup.DetachedMarker + " 1 detached bullet -->\n## Detached\n\n- lost _(detached: parent x does not exist)_\n  - its child\n"
	d, err := markup.Markdown(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Nodes) != 1 || len(d.Nodes[0].Children) != 1 || d.SkippedDetached != 1 || d.SkippedRows != 2 || len(d.Notes) != 1 || !strings.Contains(d.Notes[0], "1 detached bullet(s), 2 row(s)") {
		t.Fatalf("%+v", d)
	}
	// no closing "-->": the rest is still the section, still said
	d, err = markup.Markdown("- a\n" + markup.DetachedMarker + "\n- lost\n")
	if err != nil || len(d.Nodes) != 1 || len(d.Notes) != 1 {
		t.Fatalf("%+v %v", d, err)
	}
	if _, err := markup.Markdown(markup.DetachedMarker + " -->\n## Detached\n- lost\n"); err == nil || !strings.Contains(err.Error(), "Detached section (1 detached bullet(s), skipped)") {
		t.Fatalf("only detached bullets: %v", err)
	}
	o := `<opml version="2.0"><body><outline text="a"/><outline text="stray" _detached="parent x does not exist"><outline text="kid"/></outline>` +
		`<outline text="Detached" _detached="section"><outline text="one" _detached="r"/><outline text="two" _detached="r"><outline text="kid"/></outline></outline></body></opml>`
	d, err = markup.OPML(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Nodes) != 1 || d.Nodes[0].Text != "a" || d.SkippedDetached != 3 || d.SkippedRows != 5 || len(d.Notes) != 1 {
		t.Fatalf("%+v", d)
	}
}
