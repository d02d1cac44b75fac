package tools_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestPreviewLongList: a dry run in a list of 300 siblings renders only a
// window around what it touches: the new bullet after its anchor, the
// siblings before and after the window counted, in both parts; a small
// list is rendered as before (every sibling block counted or shown).
func TestPreviewLongList(t *testing.T) {
	c := newClient(t, false)
	var md strings.Builder
	md.WriteString("- List\n")
	for i := range 300 {
		fmt.Fprintf(&md, "  - item %03d\n", i)
	}
	res, _ := call(t, c, "import_outline", map[string]any{"content": md.String(), "all_keys": true})
	keys := map[string]string{} // input line → key
	for _, m := range regexp.MustCompile(`(\d+)→(\w+)`).FindAllStringSubmatch(text(res), -1) {
		keys[m[1]] = m[2]
	}
	list, anchor := keys["1"], keys["202"] // "item 200" is line 202
	if list == "" || anchor == "" {
		t.Fatalf("import: %v", text(res))
	}
	res, sc := call(t, c, "insert_after", map[string]any{"parent": list, "after": anchor, "text": "the new one", "dry_run": true})
	if res.IsError {
		t.Fatal(text(res))
	}
	after, _ := sc["after"].(string)
	before, _ := sc["before"].(string)
	for _, want := range []string{"item 200", "the new one", "item 201", "… 200 bullet(s)", "… 98 bullet(s)"} {
		if !strings.Contains(after, want) {
			t.Fatalf("after lacks %q:\n%s", want, after)
		}
	}
	if strings.Contains(after, "item 150") || strings.Contains(after, "item 250") {
		t.Fatalf("after shows bullets far from the change:\n%s", after)
	}
	if !strings.Contains(before, "item 200") || !strings.Contains(before, "… 200 bullet(s)") || !strings.Contains(before, "… 98 bullet(s)") {
		t.Fatalf("before:\n%s", before)
	}
	if !strings.Contains(text(res), "the new one") {
		t.Fatalf("the text part lacks the preview:\n%s", text(res))
	}
}
