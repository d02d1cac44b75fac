package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestReadmeExamples: every "bulleted-mcp call TOOL 'JSON'" example in the
// README and docs/*.md names a tool and passes that tool's input checks (the
// schema, unknown keys refused), and the README shows at least five tools
// with an example each (its card tools) and counts the tools right.
func TestReadmeExamples(t *testing.T) {
	t.Parallel()
	byName := map[string]tools.Tool{}
	for _, tl := range tools.All() {
		byName[tl.Name] = tl
	}
	files, _ := filepath.Glob("../docs/*.md")
	files = append([]string{"../README.md"}, files...)
	call := regexp.MustCompile(`bulleted-mcp call (?:--[a-z]+ [^ ]+ )*([a-z_]+)(?: '([^']*)')?`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, m := range call.FindAllStringSubmatch(string(raw), -1) {
			name, arg := m[1], m[2]
			tl, ok := byName[name]
			if !ok {
				t.Errorf("%s: example calls %q, which is no tool", f, name)
				continue
			}
			a := tools.Args{}
			if arg != "" {
				if err := json.Unmarshal([]byte(arg), &a); err != nil {
					t.Errorf("%s: %s example's arguments are not JSON: %v: %s", f, name, err, arg)
					continue
				}
			}
			if _, err := tl.Check(a); err != nil {
				t.Errorf("%s: %s example %s is refused: %v", f, name, arg, err)
			}
			seen[name] = true
		}
		if f != "../README.md" {
			continue
		}
		if len(seen) < 5 {
			t.Errorf("the README gives examples of %d tools (%v), want the five card tools", len(seen), seen)
		}
		if m := regexp.MustCompile(`The server has (\d+) tools`).FindStringSubmatch(string(raw)); m == nil || m[1] != strconv.Itoa(len(byName)) {
			t.Errorf("the README counts the tools as %v; there are %d", m, len(byName))
		}
	}
}
