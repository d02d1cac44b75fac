package tools_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestImportMarkdownMarkersSaid: import_outline reads an export's markers
// (display, another layout, a mirror of a bullet of this repository) into
// the records, skips the rows a mirror shows, and keeps a marker it does
// not understand as text; what it skipped or kept is said in the result's
// text and its structured diagnostics. insert_after markdown= says it too.
func TestImportMarkdownMarkersSaid(t *testing.T) {
	ctx := context.Background()
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	res, _ := call(t, c, "insert_after", map[string]any{"text": "Recipes"})
	if res.IsError {
		t.Fatal(text(res))
	}
	tr, _ := e.Tree(ctx)
	orig := tr.NodeURI(tr.Roots.At(0).Key())
	md := "- Shop {display=collapsed}\n  - Card {layout=kanban%20card}\n  - ↪ Recipes {mirror=" + orig + "}\n    - Soup _(mirrored, read-only)_\n- Odd {color=red}\n"
	res, sc := call(t, c, "import_outline", map[string]any{"content": md})
	if res.IsError {
		t.Fatal(text(res))
	}
	for _, s := range []string{"skipped 1 row(s) nested under 1 mirror line(s)", "line 5 {color=red} (unknown key color)"} {
		if !strings.Contains(text(res), s) || !strings.Contains(fmt.Sprint(sc["diagnostics"]), s) {
			t.Errorf("the result does not say %q: %s / %v", s, text(res), sc["diagnostics"])
		}
	}
	// the repository as read back
	tr, _ = e.Tree(ctx)
	if tr.Roots.Len() != 3 {
		t.Fatalf("%d top-level bullets", tr.Roots.Len())
	}
	shop, odd := tr.Roots.At(1), tr.Roots.At(2)
	if shop.Str("text") != "Shop" || shop.Str("display") != "collapsed" || shop.Children.Len() != 2 || odd.Str("text") != "Odd {color=red}" {
		t.Fatalf("read back: %v / %v", shop.Rec.Value, odd.Rec.Value)
	}
	if card, m := shop.Children.At(0), shop.Children.At(1); card.Str("layout") != "kanban card" || !m.Mirror || m.Str("original") != orig || m.Children.Len() != 0 {
		t.Fatalf("read back: %v / %v", card.Rec.Value, m.Rec.Value)
	}
	if tr.Nodes.Len() != 4 {
		t.Fatalf("%d nodes, want 4 (the mirrored row is not copied)", tr.Nodes.Len())
	}
	res, sc = call(t, c, "insert_after", map[string]any{"markdown": "- a {color=red}"})
	if res.IsError || !strings.Contains(text(res), "markdown: 1 line(s) end in a {…} marker that is not understood") || !strings.Contains(fmt.Sprint(sc["diagnostics"]), "{color=red}") {
		t.Fatalf("insert_after markdown: %s / %v", text(res), sc["diagnostics"])
	}
}
