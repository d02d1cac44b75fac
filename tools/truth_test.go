package tools_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestHiddenChildrenMarkedAtEveryDepth: a read with depth=1 (and a zoomed
// read) marks every line whose children are not on the page with its
// count, top-level lines included, in the text and in the structured
// content's text; lines whose children are shown carry no marker.
func TestHiddenChildrenMarkedAtEveryDepth(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	r.ok("insert_after", map[string]any{"markdown": "- Alpha\n  - a1\n  - a2\n- Beta\n- Gamma\n  - g1\n    - g1x\n    - g1y\n    - g1z"})
	check := func(args map[string]any, want map[string]string) {
		t.Helper()
		res, sc := call(t, r.c, "read_outline", args)
		if res.IsError {
			t.Fatalf("read_outline %v: %s", args, text(res))
		}
		sct, _ := sc["text"].(string)
		for name, out := range map[string]string{"text": text(res), "structured text": sct} {
			for bullet, marker := range want {
				re := regexp.MustCompile(`(?m)^\s*- ` + regexp.QuoteMeta(bullet) + `( \(\+\d+\))? ·`)
				m := re.FindStringSubmatch(out)
				if m == nil {
					t.Fatalf("%v %s: no line for %q:\n%s", args, name, bullet, out)
				}
				if got := strings.TrimSpace(m[1]); got != marker {
					t.Fatalf("%v %s: %q is marked %q, want %q:\n%s", args, name, bullet, got, marker, out)
				}
			}
		}
	}
	check(map[string]any{"depth": 1}, map[string]string{"Alpha": "(+2)", "Beta": "", "Gamma": "(+1)"})
	check(map[string]any{"depth": 2}, map[string]string{"Alpha": "", "a1": "", "Gamma": "", "g1": "(+3)"})
	// zoomed: the root's children are the page, so the root is not marked
	check(map[string]any{"node": r.key("Gamma"), "depth": 1}, map[string]string{"Gamma": "", "g1": "(+3)"})
}
