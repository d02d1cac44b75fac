package tools_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestPlanIDThroughTools: a write tool's dry run returns a plan id; the
// same call with plan=ID writes exactly the records the dry run listed
// (read back), once; apply_batch likewise; a plan with other arguments is
// refused and writes nothing.
func TestPlanIDThroughTools(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	args := map[string]any{"text": "call the plumber", "layout": "todo"}

	dry, sc := call(t, c, "insert_after", map[string]any{"text": "call the plumber", "layout": "todo", "dry_run": true})
	id, _ := sc["plan"].(string)
	if dry.IsError || id == "" {
		t.Fatalf("a dry run gave no plan id: %s", text(dry))
	}
	writes, _ := sc["writes"].([]any)
	if len(writes) != 1 {
		t.Fatalf("dry run writes %v", sc["writes"])
	}
	rkey := writes[0].(map[string]any)["rkey"].(string)

	if res, _ := call(t, c, "insert_after", map[string]any{"text": "something else", "plan": id}); !res.IsError {
		t.Fatal("a plan applied with other arguments")
	}
	args["plan"] = id
	if res, _ := call(t, c, "insert_after", args); res.IsError {
		t.Fatalf("apply: %s", text(res))
	}
	s, _ := l.Snapshot(context.Background())
	found := 0
	for _, r := range s.Records {
		if r.Collection == "app.bulleted.node" {
			found++
			if r.RKey != rkey || r.Value.Get("text") != "call the plumber" {
				t.Fatalf("the repository holds %s %v, not the dry run's %s", r.RKey, r.Value, rkey)
			}
		}
	}
	if found != 1 {
		t.Fatalf("%d bullets, want 1", found)
	}
	if res, _ := call(t, c, "insert_after", args); !res.IsError {
		t.Fatal("a plan applied twice")
	}

	batch := map[string]any{"ops": []any{
		map[string]any{"tool": "complete_todo", "args": map[string]any{"node": rkey}},
		map[string]any{"tool": "insert_after", "args": map[string]any{"text": "pay him"}},
	}}
	batch["dry_run"] = true
	_, sc = call(t, c, "apply_batch", batch)
	id, _ = sc["plan"].(string)
	if id == "" {
		t.Fatal("apply_batch dry run: no plan id")
	}
	delete(batch, "dry_run")
	batch["plan"] = id
	if res, _ := call(t, c, "apply_batch", batch); res.IsError {
		t.Fatalf("apply_batch with plan: %s", text(res))
	}
	tr, _ := e.Tree(context.Background())
	if tr.Roots.Len() != 2 || tr.Nodes.Get(rkey).Str("completedAt") == "" {
		t.Fatal("the batch's plan is not in the repository")
	}
}

// TestPlanOnEveryDryRunThatOffersOne: import_outline's dry run offers
// plan=ID and the same call with plan=ID applies exactly its records
// (read back); every tool with dry_run takes plan, except those whose dry
// run offers none (checked: undo's dry run gives no plan id).
func TestPlanOnEveryDryRunThatOffersOne(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	md := "- Groceries\n  - milk\n  - bread\n"
	dry, sc := call(t, c, "import_outline", map[string]any{"content": md, "dry_run": true})
	id, _ := sc["plan"].(string)
	if dry.IsError || id == "" || !strings.Contains(text(dry), "plan="+id) {
		t.Fatalf("import_outline's dry run offers no plan: %s", text(dry))
	}
	var want []string
	for _, w := range sc["writes"].([]any) {
		want = append(want, w.(map[string]any)["rkey"].(string))
	}
	res, _ := call(t, c, "import_outline", map[string]any{"content": md, "plan": id})
	if res.IsError {
		t.Fatalf("import_outline plan=%s: %s", id, text(res))
	}
	tr, _ := e.Tree(context.Background())
	if tr.Nodes.Len() != 3 || len(want) != 3 {
		t.Fatalf("%d bullets after the import, dry run listed %d writes", tr.Nodes.Len(), len(want))
	}
	for _, k := range want {
		if tr.Nodes.Get(k) == nil {
			t.Fatalf("the dry run's %s is not in the repository", k)
		}
	}
	if res, _ := call(t, c, "import_outline", map[string]any{"content": md, "plan": id, "dry_run": true}); !res.IsError {
		t.Fatal("plan with dry_run accepted")
	}

	undo, sc := call(t, c, "undo", map[string]any{"dry_run": true})
	if undo.IsError || sc["plan"] != nil {
		t.Fatalf("undo's dry run: %s (plan %v): it offers a plan, so undo must take plan", text(undo), sc["plan"])
	}
	noPlan := map[string]bool{"undo": true, "operations": true} // their dry runs keep no plan
	for _, tl := range tools.All() {
		props := tl.Schema["properties"].(map[string]any)
		_, dry := props["dry_run"]
		_, plan := props["plan"]
		if dry && !plan && !noPlan[tl.Name] {
			t.Errorf("%s has dry_run but no plan", tl.Name)
		}
	}
}

// TestUnknownOperationKind: an operation id that names no operation (undo
// operation=…, operations resume=…) is refused with a kind of its own,
// operation_missing, not node_missing, and says to list the operations.
func TestUnknownOperationKind(t *testing.T) {
	c := inProcess(t, &tools.Env{Engine: outline.New(openLocal(t))})
	if res, _ := call(t, c, "insert_after", map[string]any{"text": "one"}); res.IsError {
		t.Fatal(text(res))
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"undo", map[string]any{"operation": "3nonexistent22"}},
		{"undo", map[string]any{"operation": "3nonexistent22", "dry_run": true}},
		{"operations", map[string]any{"resume": "3nonexistent22"}},
	} {
		res, sc := call(t, c, tc.tool, tc.args)
		e, _ := sc["error"].(map[string]any)
		if !res.IsError || e["kind"] != "operation_missing" || !strings.Contains(fmt.Sprint(e["next"]), "call operations") {
			t.Errorf("%s %v: %v / %s", tc.tool, tc.args, e, text(res))
		}
	}
}

// TestErrorPathsNameWhatWasSent: an over-long field is reported at the
// argument the model sent: insert_after text= at text (not nodes[0].text)
// and its note at note; nodes= at nodes[i]; markdown= and
// import_outline's content at their input line; update_node's note at
// note (not note.text).
func TestErrorPathsNameWhatWasSent(t *testing.T) {
	c := inProcess(t, &tools.Env{Engine: outline.New(openLocal(t))})
	long := strings.Repeat("x", 20_000)
	res, sc := call(t, c, "insert_after", map[string]any{"text": "a"})
	if res.IsError {
		t.Fatal(text(res))
	}
	key := createdKeys(sc)[0]
	for _, tc := range []struct {
		tool      string
		args      map[string]any
		want, not string
	}{
		{"insert_after", map[string]any{"text": long}, "record: text: 20,000 bytes", "nodes["},
		{"insert_after", map[string]any{"text": "fine", "note": long + long}, "record: note: 40,000 graphemes", "nodes["},
		{"insert_after", map[string]any{"nodes": []any{map[string]any{"text": "a"}, map[string]any{"text": long}}}, "nodes[1].text: 20,000 bytes", "nodes[0]"},
		{"insert_after", map[string]any{"markdown": "- a\n  - b\n  - " + long}, "markdown line 3: 20,000 bytes", "nodes["},
		{"import_outline", map[string]any{"content": "- a\n- b\n  - " + long}, "content line 3: 20,000 bytes", "nodes["},
		{"import_outline", map[string]any{"content": "- a\n  " + long + long}, "content line 1 (its note): 40,000 graphemes", "nodes["},
		{"update_node", map[string]any{"node": key, "note": strings.Repeat("y", 30_000)}, "record: note: 30,000 graphemes", "note.text"},
	} {
		res, sc := call(t, c, tc.tool, tc.args)
		e, _ := sc["error"].(map[string]any)
		msg := fmt.Sprint(e["message"])
		if !res.IsError || e["kind"] != "invalid" || !strings.Contains(msg, tc.want) || strings.Contains(msg, tc.not) || !strings.Contains(text(res), tc.want) {
			t.Errorf("%s: %q, want %q and no %q", tc.tool, msg, tc.want, tc.not)
		}
	}
}

// TestNearestKeyThroughTools: a record key one character off is refused
// (node_missing) naming the existing key, in the text and in the error's
// details.
func TestNearestKeyThroughTools(t *testing.T) {
	c := inProcess(t, &tools.Env{Engine: outline.New(openLocal(t))})
	res, sc := call(t, c, "insert_after", map[string]any{"text": "call the plumber", "layout": "todo"})
	if res.IsError {
		t.Fatal(text(res))
	}
	key := createdKeys(sc)[0]
	typo := key[:len(key)-1]
	res, sc = call(t, c, "complete_todo", map[string]any{"node": typo})
	e, _ := sc["error"].(map[string]any)
	d, _ := e["details"].(map[string]any)
	if !res.IsError || e["kind"] != "node_missing" || !strings.Contains(text(res), key) || fmt.Sprint(d["nearest"]) != "["+key+"]" {
		t.Fatalf("%s: %s / %v", typo, text(res), e)
	}
}

// TestBatchErrorPathsNameTheOp: within apply_batch an over-long field is
// reported at the op and the argument sent: ops[1].args.text, not
// nodes[0].text (which op?).
func TestBatchErrorPathsNameTheOp(t *testing.T) {
	c := inProcess(t, &tools.Env{Engine: outline.New(openLocal(t))})
	res, sc := call(t, c, "insert_after", map[string]any{"text": "a"})
	if res.IsError {
		t.Fatal(text(res))
	}
	key := createdKeys(sc)[0]
	long := strings.Repeat("x", 20_000)
	for _, tc := range []struct {
		ops  []any
		want string
	}{
		{[]any{map[string]any{"tool": "insert_after", "args": map[string]any{"text": "fine"}}, map[string]any{"tool": "insert_after", "args": map[string]any{"text": long}}}, "record: ops[1].args.text: 20,000 bytes"},
		{[]any{map[string]any{"tool": "insert_after", "args": map[string]any{"markdown": "- a\n- " + long}}}, "record: ops[0].args.markdown line 2: 20,000 bytes"},
		{[]any{map[string]any{"tool": "insert_after", "args": map[string]any{"text": "fine"}}, map[string]any{"tool": "update_node", "args": map[string]any{"node": key, "text": long}}}, "record: ops[1].args.text: 20,000 bytes"},
	} {
		res, sc := call(t, c, "apply_batch", map[string]any{"ops": tc.ops})
		e, _ := sc["error"].(map[string]any)
		if msg := fmt.Sprint(e["message"]); !res.IsError || !strings.Contains(msg, tc.want) || strings.Contains(msg, "nodes[") {
			t.Errorf("%q, want %q", msg, tc.want)
		}
	}
}
