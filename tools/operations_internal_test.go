package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// TestOperationsListFits: a journal of operations with long summaries is
// listed newest first, as many as fit one result; the rest is said in both
// parts with a cursor, and paging shows every operation exactly once.
func TestOperationsListFits(t *testing.T) {
	t.Parallel()
	var ops []outline.OpReport
	for i := range outline.JournalSize {
		ops = append(ops, outline.OpReport{ID: fmt.Sprintf("3n%011d", 99_999_999-i), State: "done",
			Summary: fmt.Sprintf("batch %d: %s", i, strings.Repeat("move a bullet under another; ", 40)), Batches: 1, Landed: 1, Writes: 3, LandedWrites: 3})
	}
	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		res := opsPage(ops, false, cursor)
		if res.IsError {
			t.Fatalf("page %d: %v", pages, res.Content)
		}
		if n := ResultSize(res); n > MaxResult {
			t.Fatalf("page %d: %d bytes, over %d", pages, n, MaxResult)
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var sc struct {
			Operations []outline.OpReport
			Cursor     string
			Notices    []string
		}
		if err := json.Unmarshal(raw, &sc); err != nil {
			t.Fatal(err)
		}
		pages++
		for _, op := range sc.Operations {
			seen[op.ID]++
		}
		txt := res.Content[0].(mcp.TextContent).Text
		if sc.Cursor == "" {
			if strings.Contains(txt, "not shown") {
				t.Fatalf("the last page says operations are not shown: %s", txt[len(txt)-200:])
			}
			break
		}
		said := "older operation(s) not shown"
		if !strings.Contains(txt, said) || !strings.Contains(strings.Join(sc.Notices, " "), said) || !strings.Contains(txt, sc.Cursor) {
			t.Fatalf("a shortened page does not say so in both parts with its cursor: notices %v", sc.Notices)
		}
		cursor = sc.Cursor
	}
	if pages < 2 {
		t.Fatal("everything fit one page: make the summaries longer")
	}
	if len(seen) != len(ops) {
		t.Fatalf("paging showed %d operations of %d", len(seen), len(ops))
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("operation %s shown %d times", id, c)
		}
	}
	if res := opsPage(ops, false, "op.nope"); !res.IsError {
		t.Fatal("an unknown cursor was accepted")
	}
}
