package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// export writes every row (no 500-row or depth cap), read back from the
// written file.
func TestExportWholeOutline(t *testing.T) {
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := outline.New(l)
	top := intent.NewNode{Text: "Top"}
	for i := 0; i < 600; i++ {
		top.Children = append(top.Children, intent.NewNode{Text: fmt.Sprintf("item %d", i), Layout: "todo",
			Children: []intent.NewNode{{Text: "a", Children: []intent.NewNode{{Text: "b", Children: []intent.NewNode{{Text: "deep"}}}}}}})
	}
	if _, err := e.DoFunc(context.Background(), false, func(p *outline.Planner) error {
		return (intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{top}}).Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	for _, f := range []string{"json", "markdown", "opml"} {
		out := filepath.Join(t.TempDir(), "out."+f)
		var so, se bytes.Buffer
		if code := run([]string{"export", "--store", dir, "--format", f, out}, nil, &so, &se); code != 0 {
			t.Fatalf("%s: exit %d: %s", f, code, se.String())
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		switch f {
		case "json":
			var v struct {
				Nodes []map[string]any `json:"nodes"`
				Stop  string           `json:"stop"`
			}
			if err := json.Unmarshal(raw, &v); err != nil {
				t.Fatal(err)
			}
			if len(v.Nodes) != 1+600*4 || v.Stop != "complete" || v.Nodes[len(v.Nodes)-1]["text"] != "deep" {
				t.Fatalf("json: %d rows, stop %s", len(v.Nodes), v.Stop)
			}
		case "markdown":
			if n := strings.Count(string(raw), "\n"); n != 1+600*4 || !strings.Contains(string(raw), "  - [ ] item 599\n    - a\n      - b\n        - deep\n") {
				t.Fatalf("markdown: %d lines", n)
			}
		case "opml":
			if n := strings.Count(string(raw), `<outline text="deep">`); n != 600 {
				t.Fatalf("opml: %d deep rows", n)
			}
		}
	}
	var so, se bytes.Buffer
	if code := run([]string{"export", "--store", dir, "--format", "car", "--node", "x"}, nil, &so, &se); code != 2 {
		t.Fatalf("car with --node: exit %d", code)
	}
}
