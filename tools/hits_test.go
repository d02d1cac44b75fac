package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestSearchTextGroupsByPlace: hits under one parent share one "in …:" line
// (the path is not repeated on every hit), and every hit is listed.
func TestSearchTextGroupsByPlace(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	out, err := e.Do(context.Background(), intent.Insert{Nodes: []outline.NewNode{
		{Text: "Garden", Children: []outline.NewNode{{Text: "water the roses"}, {Text: "water the figs"}, {Text: "water the beans"}}},
		{Text: "water bill"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, &tools.Env{Engine: e})
	res, sc := call(t, c, "search", map[string]any{"text": "water"})
	txt := text(res)
	if n := strings.Count(txt, "in Garden:"); n != 1 {
		t.Fatalf("the Garden path appears %d times:\n%s", n, txt)
	}
	if n := strings.Count(txt, "in the top level:"); n != 1 {
		t.Fatalf("the top level appears %d times:\n%s", n, txt)
	}
	for _, cr := range out.Plan.Created[1:] {
		if !strings.Contains(txt, "·"+cr.RKey) {
			t.Fatalf("hit %s missing:\n%s", cr.RKey, txt)
		}
	}
	if hits, _ := sc["hits"].([]any); len(hits) != 4 {
		t.Fatalf("%d structured hits, want 4", len(hits))
	}
}
