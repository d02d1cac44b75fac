package tools_test

import (
	"strings"
	"testing"
)

// import_outline inserts a Markdown plan as one operation and maps created
// keys to input lines; search then finds a bullet by text with its
// breadcrumb; read_outline pages with a cursor.
func TestImportSearchAndPageTools(t *testing.T) {
	c := newClient(t, false)
	md := "# Plan\n- [ ] Budget review\n  with finance\n- Travel\n  - Book flights\n"
	res, sc := call(t, c, "import_outline", map[string]any{"content": md, "dry_run": true})
	if res.IsError || sc["dryRun"] != true {
		t.Fatalf("dry run: %s", text(res))
	}
	if _, sc := call(t, c, "read_outline", nil); !strings.Contains(sc["text"].(string), "empty outline") {
		t.Fatalf("dry run wrote: %v", sc["text"])
	}
	res, sc = call(t, c, "import_outline", map[string]any{"content": md})
	if res.IsError {
		t.Fatal(text(res))
	}
	created, _ := sc["created"].([]any)
	byLine := map[float64]string{}
	for _, l := range created {
		m := l.(map[string]any)
		byLine[m["line"].(float64)] = m["rkey"].(string)
	}
	if len(byLine) != 4 || byLine[2] == "" || byLine[5] == "" {
		t.Fatalf("created %v", created)
	}
	res, sc = call(t, c, "search", map[string]any{"text": "budget REVIEW", "state": "open"})
	hits := flatHits(sc)
	if res.IsError || len(hits) != 1 {
		t.Fatalf("search: %s", text(res))
	}
	h := hits[0]
	if path, _ := h["path"].(string); h["rkey"] != byLine[2] || h["text"] != "Budget review" || h["state"] != "open" || !strings.HasPrefix(path, "Plan") {
		t.Fatalf("hit %v", h)
	}
	// the note was read back from the repository
	_, sc = call(t, c, "read_outline", map[string]any{"notes": true, "limit": 2})
	txt := sc["text"].(string)
	if !strings.Contains(txt, "> with finance") || sc["stop"] != "limit" || sc["cursor"] == nil {
		t.Fatalf("page 1:\n%s", txt)
	}
	_, sc = call(t, c, "read_outline", map[string]any{"limit": 2, "cursor": sc["cursor"]})
	if txt := sc["text"].(string); !strings.Contains(txt, "Travel ·"+byLine[4]) || !strings.Contains(txt, "Book flights ·"+byLine[5]) || sc["stop"] != "complete" {
		t.Fatalf("page 2:\n%s", txt)
	}
}
