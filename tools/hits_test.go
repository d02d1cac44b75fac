package tools_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// flatHits is a search result's hits in order (the compact tree walked, or
// fields=full's flat list), each with "path": the texts of the ancestors
// ([text, entries...]) around it, joined by " › ".
func flatHits(sc map[string]any) []map[string]any {
	var out []map[string]any
	var walk func(entries []any, path []string)
	walk = func(entries []any, path []string) {
		for _, e := range entries {
			if g, ok := e.([]any); ok {
				walk(g[1:], append(path[:len(path):len(path)], g[0].(string)))
				continue
			}
			m := e.(map[string]any)
			m["path"] = strings.Join(path, " › ")
			out = append(out, m)
		}
	}
	hs, _ := sc["hits"].([]any)
	walk(hs, nil)
	return out
}

// TestSearchTextGroupsByPlace: hits come as the outline's subtree that holds
// them, in both parts: each ancestor once for the run of hits under it
// (not repeated on every hit), nested like the outline, and every hit is
// listed. Two ancestors with the same text stay two.
func TestSearchTextGroupsByPlace(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	out, err := e.Do(context.Background(), intent.Insert{Nodes: []intent.NewNode{
		{Text: "Garden", Children: []intent.NewNode{{Text: "water the roses"}, {Text: "water the figs"}, {Text: "water the beans"}}},
		{Text: "Garden", Children: []intent.NewNode{{Text: "Shed", Children: []intent.NewNode{{Text: "water can"}}}}},
		{Text: "water bill"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, &tools.Env{Engine: e})
	res, sc := call(t, c, "search", map[string]any{"text": "water"})
	txt := text(res)
	k := map[string]string{}
	for _, cr := range out.Plan.Created {
		k[cr.Text] = cr.RKey
	}
	want := "Garden:\n  - water the roses ·" + k["water the roses"] + "\n  - water the figs ·" + k["water the figs"] +
		"\n  - water the beans ·" + k["water the beans"] + "\nGarden:\n  Shed:\n    - water can ·" + k["water can"] +
		"\n- water bill ·" + k["water bill"] + "\n"
	if txt != want {
		t.Fatalf("text:\n%s\nwant:\n%s", txt, want)
	}
	// the structured part: the same tree
	hs, _ := sc["hits"].([]any)
	if len(hs) != 3 || hs[0].([]any)[0] != "Garden" || len(hs[0].([]any)) != 4 || hs[2].(map[string]any)["rkey"] != k["water bill"] {
		t.Fatalf("structured hits: %v", sc["hits"])
	}
	var got []string
	for _, h := range flatHits(sc) {
		got = append(got, h["path"].(string)+"|"+h["text"].(string))
	}
	if w := "Garden|water the roses Garden|water the figs Garden|water the beans Garden › Shed|water can |water bill"; strings.Join(got, " ") != w {
		t.Fatalf("hits in order:\n%s\nwant:\n%s", strings.Join(got, " "), w)
	}
}
