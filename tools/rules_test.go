package tools_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
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
		if rec.Collection == "app.bulleted.node" && rec.Value.Get("text") == txt {
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
			if rec.RKey == m && rec.Value.Get("parent") != r.uri("Y") {
				t.Fatalf("the mirror did not move under Y: %v", rec.Value)
			}
		}
	})
}

// Deleting a bullet deletes the outline and comment-policy records whose
// root names it (whatever their record key), and with children=subtree
// those rooted at every deleted bullet; a dry run lists them and writes
// nothing; undo restores them. Checked on the repository as read back.
func TestDeleteTakesRootedRecords(t *testing.T) {
	r := newRulesRepo(t)
	ctx := context.Background()
	r.ok("import_outline", map[string]any{"content": "- T\n  - C\n    - D\n- keep"})
	r.ok("set_outline", map[string]any{"root": r.key("T"), "title": "Tee"})
	r.ok("set_outline", map[string]any{"root": r.key("D"), "title": "Dee"})
	r.ok("set_outline", map[string]any{"root": r.key("keep"), "title": "Kept"})
	r.ok("set_comment_policy", map[string]any{"root": r.key("C"), "allow": []any{"mentioned"}})
	mirror := createdKeys(r.ok("add_mirror", map[string]any{"original": r.key("D"), "parent": r.key("keep")}))[0]
	// another client's outline record with its own key
	if _, err := r.l.Apply(ctx, "", []store.Write{{Op: store.Create, Collection: "app.bulleted.outline", RKey: "cee", Value: map[string]any{
		"$type": "app.bulleted.outline", "root": r.uri("C"), "title": "See", "createdAt": "2026-03-10T09:00:00.000Z"}}}); err != nil {
		t.Fatal(err)
	}
	rooted := func(recs []store.Record) map[string]string { // collection/rkey → root, of the records with a root
		out := map[string]string{}
		for _, rec := range recs {
			if root, _ := rec.Value.Text("root"); root != "" {
				out[rec.Collection+"/"+rec.RKey] = root
			}
		}
		return out
	}
	deletes := func(sc map[string]any) []string {
		var out []string
		ws, _ := sc["writes"].([]any)
		for _, w := range ws {
			w := w.(map[string]any)
			if w["op"] == string(store.Delete) && (w["collection"] == "app.bulleted.outline" || w["collection"] == "app.bulleted.commentPolicy") {
				out = append(out, w["collection"].(string)+"/"+w["rkey"].(string))
			}
		}
		return out
	}
	all := r.records()
	kD := r.key("D")
	outD, outT := "app.bulleted.outline/"+r.key("D"), "app.bulleted.outline/"+r.key("T")

	t.Run("one bullet", func(t *testing.T) {
		sc := r.ok("delete_node", map[string]any{"node": r.key("D"), "dry_run": true})
		if got := deletes(sc); !reflect.DeepEqual(got, []string{outD}) {
			t.Fatalf("the dry run lists deletes %v, want %v:\n%s", got, []string{outD}, sc)
		}
		if !reflect.DeepEqual(r.records(), all) {
			t.Fatal("a dry run wrote")
		}
		res, sc := call(t, r.c, "delete_node", map[string]any{"node": r.key("D")})
		if res.IsError {
			t.Fatal(text(res))
		}
		d := strings.Join(strs(sc["diagnostics"]), "\n")
		if !strings.Contains(d, "outline "+kD+" (title \"Dee\")") {
			t.Fatalf("diagnostics: %v", sc["diagnostics"])
		}
		// the mirror of it stays, and the result says so
		if !strings.Contains(d, "left in place, now naming a deleted bullet: mirror record(s)") || !strings.Contains(d, mirror) || !strings.Contains(text(res), mirror) {
			t.Fatalf("the mirror left naming the deleted bullet is not reported: %v", sc["diagnostics"])
		}
		if _, ok := rooted(r.records())[outD]; ok {
			t.Fatal("the outline record rooted at the deleted bullet is still there")
		}
		r.ok("undo", map[string]any{})
		if !reflect.DeepEqual(r.records(), all) {
			t.Fatal("undo did not restore the repository")
		}

	})
	t.Run("a subtree", func(t *testing.T) {
		want := []string{"app.bulleted.commentPolicy/" + r.key("C"), "app.bulleted.outline/cee", outD, outT}
		sc := r.ok("delete_node", map[string]any{"node": r.key("T"), "children": "subtree", "dry_run": true})
		got := deletes(sc)
		if !sameSet(got, want) {
			t.Fatalf("the dry run lists deletes %v, want %v", got, want)
		}
		if d := strings.Join(strs(sc["diagnostics"]), "\n"); !strings.Contains(d, "outline cee (title \"See\")") {
			t.Fatalf("the dry run does not say which records go with it: %s", d)
		}
		if !reflect.DeepEqual(r.records(), all) {
			t.Fatal("a dry run wrote")
		}
		r.ok("delete_node", map[string]any{"node": r.key("T"), "children": "subtree"})
		left := r.records()
		nodes := map[string]bool{}
		for _, rec := range left {
			if rec.Collection == "app.bulleted.node" {
				nodes["at://"+r.l.DID().String()+"/app.bulleted.node/"+rec.RKey] = true
			}
		}
		for path, root := range rooted(left) {
			if !nodes[root] {
				t.Fatalf("%s still names the deleted bullet %s", path, root)
			}
		}
		if len(rooted(left)) != 1 {
			t.Fatalf("rooted records left: %v (want only the one of the kept bullet)", rooted(left))
		}
		r.ok("undo", map[string]any{})
		if !reflect.DeepEqual(r.records(), all) {
			t.Fatal("undo did not restore the repository")
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

// A contributor reorders its contribution within the shared parent it sits
// in (move_node without parent, or with the same parent; after= a bullet
// shown there, or first/last): only the contribution's sortKey changes, in
// this repository, placed among the bullets the owner's outline shows
// there; a dry run writes nothing; moving it to a parent that does not
// admit it is still refused. Order checked as the owner's outline reads.
func TestContributionReorder(t *testing.T) {
	const owner = "did:plc:owneroftheplan"
	l := openLocal(t)
	me := l.DID().String()
	ownerNode := func(rkey, parent, sortKey, text string) store.Record {
		v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}
		if parent != "" {
			v["parent"] = "at://" + owner + "/app.bulleted.node/" + parent
		}
		return store.Record{Collection: "app.bulleted.node", RKey: rkey, CID: "c" + rkey, Value: store.MustValue(v)}
	}
	shared := "at://" + owner + "/app.bulleted.node/3kshared22222"
	kid := func(k string) string { return "at://" + owner + "/app.bulleted.node/" + k }
	ownerTree := outline.Build(&store.Snapshot{DID: owner, Commit: "o1", Records: []store.Record{
		ownerNode("3kshared22222", "", "a", "Shared"),
		ownerNode("3kownerkid222", "3kshared22222", "g", "owner one"),
		ownerNode("3kownerkid333", "3kshared22222", "p", "owner two"),
		ownerNode("3kprivate2222", "", "b", "Private"),
		{Collection: "app.bulleted.outline", RKey: "3kshared22222", CID: "c3", Value: store.MustValue(map[string]any{"$type": "app.bulleted.outline", "root": shared,
			"contributors": []any{map[string]any{"did": me}}, "createdAt": "2026-03-10T09:00:00.000Z"})},
	}})
	env := sharedEnv(t, l, func(ctx context.Context, ident string) (*outline.Tree, error) {
		if ident == me { // the contributor, as the owner's outline reads it
			s, err := l.Snapshot(ctx)
			if err != nil {
				return nil, err
			}
			return outline.Build(s), nil
		}
		if ident != owner {
			return nil, errors.New("unknown identity " + ident)
		}
		return ownerTree, nil
	})
	r := &rulesRepo{t: t, l: l, c: inProcess(t, env)}
	r.ok("import_outline", map[string]any{"content": "- mine A\n  - under A\n- mine B", "parent": shared, "position": "first"})
	// the order under the shared bullet, as the owner's outline reads
	order := func() string {
		t.Helper()
		res, _ := call(t, r.c, "read_outline", map[string]any{"repo": owner, "node": "3kshared22222"})
		if res.IsError {
			t.Fatal(text(res))
		}
		var out []string
		for _, line := range strings.Split(text(res), "\n") {
			if strings.HasPrefix(line, "  - ") {
				line = strings.TrimPrefix(line, "  - ")
				if i := strings.IndexAny(line, "[·"); i > 0 {
					line = line[:i]
				}
				out = append(out, strings.TrimSpace(line))
			}
		}
		return strings.Join(out, ", ")
	}
	if got := order(); !strings.HasPrefix(got, "mine A") {
		t.Fatalf("before: %s", got)
	}
	a, b := r.key("mine A"), r.key("mine B")
	before := r.records()
	moved := func(want string, changed ...string) {
		t.Helper()
		if got := order(); got != want {
			t.Fatalf("the owner's outline shows %q, want %q", got, want)
		}
		after := r.records()
		was := map[string]store.Record{}
		for _, rec := range before {
			was[rec.Collection+"/"+rec.RKey] = rec
		}
		for _, rec := range after {
			old := was[rec.Collection+"/"+rec.RKey]
			if reflect.DeepEqual(old.Value, rec.Value) {
				continue
			}
			if !slices.Contains(changed, rec.RKey) {
				t.Fatalf("%s changed: %v -> %v", rec.RKey, old.Value, rec.Value)
			}
			for k, v := range rec.Value.Map() {
				if k != "sortKey" && !reflect.DeepEqual(old.Value.Get(k), v) {
					t.Fatalf("%s: %s changed (%v -> %v); only the sortKey may", rec.RKey, k, old.Value.Get(k), v)
				}
			}
		}
		if len(after) != len(before) {
			t.Fatalf("%d records, want %d", len(after), len(before))
		}
		before = after
	}
	r.ok("move_node", map[string]any{"node": a, "after": kid("3kownerkid222"), "dry_run": true})
	moved("mine A, mine B, owner one, owner two")
	r.ok("move_node", map[string]any{"node": a, "after": kid("3kownerkid222")})
	moved("mine B, owner one, mine A, owner two", a)
	r.ok("move_node", map[string]any{"node": b, "parent": shared, "position": "last"})
	moved("owner one, mine A, owner two, mine B", b)
	r.ok("move_node", map[string]any{"node": b, "after": a})
	moved("owner one, mine A, mine B, owner two", b)
	r.ok("move_node", map[string]any{"nodes": []any{a, b}, "position": "first"})
	moved("mine A, mine B, owner one, owner two", a, b)
	sc := r.ok("move_node", map[string]any{"node": b, "after": a})
	if !strings.Contains(strings.Join(strs(sc["diagnostics"]), " "), "already there") {
		t.Fatalf("a move to where it stands: %v", sc)
	}
	moved("mine A, mine B, owner one, owner two")
	r.refused("cross_repo", "move_node", map[string]any{"node": a, "parent": kid("3kprivate2222")})
	r.refused("cross_repo", "move_node", map[string]any{"node": a, "parent": "top"})
	r.refused("anchor_missing", "move_node", map[string]any{"node": a, "after": kid("3kprivate2222")})
}

// TestUndoMirrorCycleRefused: undoing an older operation alone can put a
// mirror back where later operations made it a cycle (the mirror moved
// out of P, then P moved inside the original; undoing the first puts the
// mirror back under P): refused with kind cycle, nothing written.
func TestUndoMirrorCycleRefused(t *testing.T) {
	r := newRulesRepo(t)
	r.ok("import_outline", map[string]any{"content": "- Q\n  - X\n    - X1\n- P\n- Y"})
	m := createdKeys(r.ok("add_mirror", map[string]any{"original": r.key("X"), "parent": r.key("P")}))[0]
	out := r.ok("move_node", map[string]any{"node": m, "parent": "top"})
	id, _ := out["operation"].(string)
	if id == "" {
		t.Fatalf("no operation id in %v", out)
	}
	r.ok("move_node", map[string]any{"node": r.key("P"), "parent": r.key("X1")})
	before := r.records()
	msg := r.refused("cycle", "undo", map[string]any{"operation": id})
	if !strings.Contains(msg, "cannot undo") {
		t.Fatalf("the refusal does not say the undo is refused: %s", msg)
	}
	if after := r.records(); !reflect.DeepEqual(before, after) {
		t.Fatal("a refused undo wrote")
	}
}
