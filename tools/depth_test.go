package tools_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// depthFixture is L with done todos among its children and a done
// grandchild under an open child, and an empty Archive; keys by text.
func depthFixture(t *testing.T) (*whereFixture, string) {
	t.Helper()
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	md := `- L
  - [x] done child 1
  - [ ] open child
    - [x] done grandchild
      - [x] done great-grandchild
  - [x] done child 2
- Archive
`
	if res, _ := call(t, c, "insert_after", map[string]any{"markdown": md}); res.IsError {
		t.Fatal(text(res))
	}
	f := &whereFixture{c: c, e: e, repo: l, keys: map[string]string{}}
	for k, it := range f.tree(t).Nodes.All() {
		f.keys[it.Str("text")] = k
	}
	return f, f.keys["L"]
}

func hitTexts(t *testing.T, sc map[string]any) []string {
	t.Helper()
	hs, _ := sc["hits"].([]any)
	var out []string
	for _, h := range hs {
		out = append(out, h.(map[string]any)["text"].(string))
	}
	return out
}

// TestSearchDepth: search with under and depth finds the matches 1 to
// depth levels below under (under's children for 1), page by page; a
// cursor is refused for another depth.
func TestSearchDepth(t *testing.T) {
	f, L := depthFixture(t)
	for _, c := range []struct {
		depth any
		want  []string
	}{
		{nil, []string{"done child 1", "done grandchild", "done great-grandchild", "done child 2"}},
		{1, []string{"done child 1", "done child 2"}},
		{"2", []string{"done child 1", "done grandchild", "done child 2"}},
	} {
		// twice: the first search walks the tree (a cold index), later
		// ones scan the index once it is built beside them (the search
		// package tests each way on its own)
		for round := 0; round < 2; round++ {
			args := map[string]any{"state": "done", "under": L, "fields": "full", "limit": 1}
			if c.depth != nil {
				args["depth"] = c.depth
			}
			var got []string
			for {
				res, sc := call(t, f.c, "search", args)
				if res.IsError {
					t.Fatalf("depth %v: %s", c.depth, text(res))
				}
				got = append(got, hitTexts(t, sc)...)
				cur, _ := sc["cursor"].(string)
				if cur == "" {
					break
				}
				args["cursor"] = cur
				other := map[string]any{"state": "done", "under": L, "depth": 3, "cursor": cur}
				if res, _ := call(t, f.c, "search", other); !res.IsError || !strings.Contains(text(res), "cursor") {
					t.Fatalf("a cursor of depth %v taken for depth 3: %s", c.depth, text(res))
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("depth %v round %d: %q, want %q", c.depth, round, got, c.want)
			}
		}
	}
}

// TestWhereDepth: move_node where={state:done, under:L, depth:1} moves
// L's done children only, not the done grandchild (read back); a bad
// depth is refused naming it, on search and on where, and nothing is
// written.
func TestWhereDepth(t *testing.T) {
	f, L := depthFixture(t)
	rev := f.tree(t).Rev
	bad := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"search", map[string]any{"state": "done", "under": L, "depth": 0}, "depth: minimum"},
		{"search", map[string]any{"state": "done", "under": L, "depth": -1}, "depth: minimum"},
		{"search", map[string]any{"state": "done", "under": L, "depth": "x"}, "depth must be integer"},
		{"search", map[string]any{"state": "done", "depth": 1}, "depth needs under"},
	}
	for _, d := range []any{0, -1, "x"} {
		bad = append(bad, struct {
			tool string
			args map[string]any
			want string
		}{"move_node", map[string]any{"where": map[string]any{"state": "done", "under": L, "depth": d}, "parent": f.keys["Archive"]}, "where.depth must be a whole number"})
	}
	bad = append(bad, []struct {
		tool string
		args map[string]any
		want string
	}{
		{"move_node", map[string]any{"where": map[string]any{"state": "done", "depth": 1}, "parent": f.keys["Archive"]}, "where.depth needs where.under"},
		{"complete_todo", map[string]any{"where": map[string]any{"state": "done", "depth": 1}, "completed": false}, "where.depth needs where.under"},
		{"apply_batch", map[string]any{"ops": []any{map[string]any{"tool": "delete_node", "args": map[string]any{"where": map[string]any{"state": "done", "under": L, "depth": 0}}}}}, "ops[0] (delete_node): where.depth must be"},
	}...)
	for _, c := range bad {
		res, sc := call(t, f.c, c.tool, c.args)
		e, _ := sc["error"].(map[string]any)
		if !res.IsError || e["kind"] != "invalid" || !strings.Contains(text(res), c.want) {
			t.Errorf("%s %v: %s (kind %v), want invalid naming %q", c.tool, c.args, text(res), e["kind"], c.want)
		}
	}
	if now := f.tree(t).Rev; now != rev {
		t.Fatalf("a refused call wrote: rev %s, was %s", now, rev)
	}
	res, sc := call(t, f.c, "move_node", map[string]any{"where": map[string]any{"state": "done", "under": L, "depth": 1}, "parent": f.keys["Archive"]})
	if res.IsError {
		t.Fatal(text(res))
	}
	if s := selectionOf(sc); !strings.HasPrefix(s, "where selected 2 bullet(s)") {
		t.Fatalf("selection %q, want L's 2 done children", s)
	}
	tr := f.tree(t)
	if got := childTexts(tr, L); !slices.Equal(got, []string{"open child"}) {
		t.Fatalf("L keeps %q, want its open child only", got)
	}
	if got := childTexts(tr, f.keys["Archive"]); !slices.Equal(got, []string{"done child 1", "done child 2"}) {
		t.Fatalf("Archive holds %q", got)
	}
	if got := childTexts(tr, f.keys["open child"]); !slices.Equal(got, []string{"done grandchild"}) {
		t.Fatalf("the done grandchild moved: open child holds %q", got)
	}
}
