package tools_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestDryRunChanges: a dry run lists each bullet it touches with what
// happens to it (the diff view marks them from this): a move, a text edit, a
// delete and an insert, each once, with the before text of the edit and
// both parents of the move; the text says the counts too.
func TestDryRunChanges(t *testing.T) {
	l := openLocal(t)
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	_, sc := call(t, c, "insert_after", map[string]any{"nodes": []any{
		map[string]any{"text": "Groceries", "children": []any{
			map[string]any{"text": "Eggs", "layout": "todo"},
			map[string]any{"text": "Bread", "layout": "todo", "completed": true},
		}},
		map[string]any{"text": "Work", "layout": "h1"},
	}})
	k := createdKeys(sc)
	groceries, eggs, bread, work := k[0], k[1], k[2], k[3]
	res, sc := call(t, c, "apply_batch", map[string]any{"dry_run": true, "ops": []any{
		map[string]any{"tool": "move_node", "args": map[string]any{"node": eggs, "parent": work}},
		map[string]any{"tool": "update_node", "args": map[string]any{"node": work, "text": "Work this week"}},
		map[string]any{"tool": "delete_node", "args": map[string]any{"node": bread}},
		map[string]any{"tool": "insert_after", "args": map[string]any{"text": "New"}},
	}})
	if res.IsError {
		t.Fatal(text(res))
	}
	got := map[string]map[string]any{}
	list, _ := sc["changes"].([]any)
	for _, x := range list {
		m := x.(map[string]any)
		got[m["rkey"].(string)] = m
	}
	if len(list) != 4 || len(got) != 4 {
		t.Fatalf("changes %v", sc["changes"])
	}
	if m := got[eggs]; m["change"] != "moved" || m["from"] != groceries || m["parent"] != work || m["layout"] != "todo" || m["under"] != "Work this week" || m["wasUnder"] != "Groceries" {
		t.Fatalf("move: %v", m)
	}
	if m := got[work]; m["change"] != "changed" || m["was"] != "Work" || m["text"] != "Work this week" {
		t.Fatalf("edit: %v", m)
	}
	if m := got[bread]; m["change"] != "deleted" || m["done"] != true || m["text"] != "Bread" || m["wasUnder"] != "Groceries" {
		t.Fatalf("delete: %v", m)
	}
	added := 0
	for _, m := range got {
		if m["change"] == "added" && m["text"] == "New" {
			added++
		}
	}
	if added != 1 {
		t.Fatalf("insert missing: %v", sc["changes"])
	}
	if !strings.Contains(text(res), "Bullets touched: 1 added, 1 moved, 1 changed, 1 deleted.") {
		t.Fatalf("the text does not count the changes: %s", text(res))
	}
}

// TestDryRunChangesBounded: a dry run touching more bullets than a result
// lists keeps the first ones, counts them all (changesTotal) and says so in
// both parts.
func TestDryRunChangesBounded(t *testing.T) {
	l := openLocal(t)
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	var kids []any
	for i := range 400 {
		kids = append(kids, map[string]any{"text": fmt.Sprintf("item %d", i)})
	}
	_, sc := call(t, c, "insert_after", map[string]any{"nodes": []any{map[string]any{"text": "Big", "children": kids}}})
	root := createdKeys(sc)[0]
	res, sc := call(t, c, "delete_node", map[string]any{"node": root, "children": "subtree", "dry_run": true})
	if res.IsError {
		t.Fatal(text(res))
	}
	list, _ := sc["changes"].([]any)
	total, _ := sc["changesTotal"].(float64)
	if len(list) == 0 || len(list) >= 401 || total != 401 {
		t.Fatalf("%d changes listed, total %v", len(list), sc["changesTotal"])
	}
	want := fmt.Sprintf("changes lists the first %d of the 401 bullets touched, a dry run lists at most %d (401 deleted in all)", len(list), len(list))
	if !strings.Contains(text(res), want) || !strings.Contains(fmt.Sprint(sc["diagnostics"]), want) {
		t.Fatalf("the cut is not said: %s / %v", text(res), sc["diagnostics"])
	}
	if size := tools.ResultSize(res); size > tools.MaxResult {
		t.Fatalf("result of %d bytes", size)
	}
}
