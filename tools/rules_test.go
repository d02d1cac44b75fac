package tools_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// rulesRepo is an embedded repository with an in-process client, and
// helpers that read the repository back.
type rulesRepo struct {
	t *testing.T
	l *store.Local
	c *client.Client
}

func newRulesRepo(t *testing.T) *rulesRepo {
	l := openLocal(t)
	return &rulesRepo{t: t, l: l, c: inProcess(t, &tools.Env{Engine: outline.New(l)})}
}

func (r *rulesRepo) records() []store.Record {
	r.t.Helper()
	s, err := r.l.Snapshot(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	return append([]store.Record(nil), s.Records...)
}

// key is the record key of the node with text txt.
func (r *rulesRepo) key(txt string) string {
	r.t.Helper()
	for _, rec := range r.records() {
		if rec.Collection == "app.bulleted.node" && rec.Value["text"] == txt {
			return rec.RKey
		}
	}
	r.t.Fatalf("no bullet %q", txt)
	return ""
}

func (r *rulesRepo) uri(txt string) string {
	return "at://" + r.l.DID().String() + "/app.bulleted.node/" + r.key(txt)
}

func (r *rulesRepo) ok(name string, args map[string]any) map[string]any {
	r.t.Helper()
	res, sc := call(r.t, r.c, name, args)
	if res.IsError {
		r.t.Fatalf("%s %v: %s", name, args, text(res))
	}
	return sc
}

// refused checks that the call fails with kind and that the repository,
// read back, did not change.
func (r *rulesRepo) refused(kind, name string, args map[string]any) string {
	r.t.Helper()
	before := r.records()
	res, sc := call(r.t, r.c, name, args)
	e, _ := sc["error"].(map[string]any)
	if got, _ := e["kind"].(string); !res.IsError || got != kind {
		r.t.Fatalf("%s %v: want error kind %q, got %q: %s", name, args, kind, got, text(res))
	}
	if after := r.records(); !reflect.DeepEqual(before, after) {
		r.t.Fatalf("%s %v was refused, but the repository changed", name, args)
	}
	return text(res)
}

// A mirror never ends up inside its own original's subtree, by any move:
// the mirror under its original or a descendant of it, the mirror's
// parent under the original, the original's parent under the mirror, two
// mirrors that would render each other, inside apply_batch and as a dry
// run. Each is refused with kind cycle and nothing is written.
func TestMirrorCycleRefused(t *testing.T) {
	// Q > X > X1, P > m (a mirror of X), Y
	setup := func(t *testing.T) (*rulesRepo, string) {
		r := newRulesRepo(t)
		r.ok("import_outline", map[string]any{"content": "- Q\n  - X\n    - X1\n- P\n- Y"})
		sc := r.ok("add_mirror", map[string]any{"original": r.key("X"), "parent": r.key("P")})
		return r, createdKeys(sc)[0]
	}
	cases := []struct {
		name string
		prep func(r *rulesRepo, m string)
		call func(r *rulesRepo, m string) (string, map[string]any)
	}{
		{"the mirror under its original", nil, func(r *rulesRepo, m string) (string, map[string]any) {
			return "move_node", map[string]any{"node": m, "parent": r.key("X")}
		}},
		{"the mirror under a descendant of its original", nil, func(r *rulesRepo, m string) (string, map[string]any) {
			return "move_node", map[string]any{"node": m, "parent": r.key("X1")}
		}},
		{"the same as a dry run", nil, func(r *rulesRepo, m string) (string, map[string]any) {
			return "move_node", map[string]any{"node": m, "parent": r.key("X1"), "dry_run": true}
		}},
		{"the mirror's parent under the original's descendant", nil, func(r *rulesRepo, m string) (string, map[string]any) {
			return "move_node", map[string]any{"node": r.key("P"), "parent": r.key("X1")}
		}},
		{"the original's parent under the mirror", nil, func(r *rulesRepo, m string) (string, map[string]any) {
			return "move_node", map[string]any{"node": r.key("Q"), "parent": m}
		}},
		{"apply_batch: moved away, then under the original", nil, func(r *rulesRepo, m string) (string, map[string]any) {
			return "apply_batch", map[string]any{"ops": []any{
				map[string]any{"tool": "move_node", "args": map[string]any{"node": m, "parent": "top"}},
				map[string]any{"tool": "move_node", "args": map[string]any{"node": m, "parent": r.key("X")}},
			}}
		}},
		{"apply_batch: an insert, then the mirror's parent under the original", nil, func(r *rulesRepo, m string) (string, map[string]any) {
			return "apply_batch", map[string]any{"ops": []any{
				map[string]any{"tool": "insert_after", "args": map[string]any{"text": "new", "parent": r.key("X1")}},
				map[string]any{"tool": "move_node", "args": map[string]any{"node": r.key("P"), "parent": r.key("X")}},
			}}
		}},
		{"two mirrors rendering each other (move)", func(r *rulesRepo, m string) {
			r.ok("add_mirror", map[string]any{"original": r.key("Y"), "parent": r.key("X1")})
		}, func(r *rulesRepo, m string) (string, map[string]any) {
			return "move_node", map[string]any{"node": m, "parent": r.key("Y")}
		}},
		{"two mirrors rendering each other (add_mirror)", func(r *rulesRepo, m string) {
			r.ok("add_mirror", map[string]any{"original": r.key("Y"), "parent": r.key("X1")})
		}, func(r *rulesRepo, m string) (string, map[string]any) {
			return "add_mirror", map[string]any{"original": r.key("X"), "parent": r.key("Y")}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, m := setup(t)
			if c.prep != nil {
				c.prep(r, m)
			}
			name, args := c.call(r, m)
			msg := r.refused("cycle", name, args)
			if !strings.Contains(msg, "nothing was written") {
				t.Fatalf("the refusal does not say nothing was written: %s", msg)
			}
		})
	}
	t.Run("away from its original it moves", func(t *testing.T) {
		r, m := setup(t)
		r.ok("move_node", map[string]any{"node": m, "parent": r.key("Y")})
		for _, rec := range r.records() {
			if rec.RKey == m && rec.Value["parent"] != r.uri("Y") {
				t.Fatalf("the mirror did not move under Y: %v", rec.Value)
			}
		}
	})
}

func strs(v any) []string {
	var out []string
	xs, _ := v.([]any)
	for _, x := range xs {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}
