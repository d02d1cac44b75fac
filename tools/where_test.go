package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"

	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// whereFixture is an outline with a level of todos and bullets under
// "Level", an empty "Archive" and a "Q" with todos of its own; keys by
// text.
type whereFixture struct {
	c    *client.Client
	e    *outline.Engine
	repo *store.Local
	keys map[string]string
}

func newWhereFixture(t *testing.T) *whereFixture {
	t.Helper()
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	md := `- Level
  - done 1 #old
  - open 1 #older
  - done 2
  - plain #old
  - open 2
  - done 3 #Old
- Archive
- Q
  - q open
  - q done
`
	res, _ := call(t, c, "insert_after", map[string]any{"markdown": md})
	if res.IsError {
		t.Fatal(text(res))
	}
	f := &whereFixture{c: c, e: e, repo: l, keys: map[string]string{}}
	for k, it := range f.tree(t).Nodes.All() {
		f.keys[it.Str("text")] = k
	}
	for _, txt := range []string{"done 1 #old", "done 2", "done 3 #Old", "q done"} {
		if r, _ := call(t, c, "complete_todo", map[string]any{"node": f.keys[txt]}); r.IsError {
			t.Fatal(text(r))
		}
	}
	for _, txt := range []string{"open 1 #older", "open 2", "q open"} {
		if r, _ := call(t, c, "update_node", map[string]any{"node": f.keys[txt], "layout": "todo"}); r.IsError {
			t.Fatal(text(r))
		}
	}
	return f
}

func (f *whereFixture) tree(t *testing.T) *outline.Tree {
	t.Helper()
	tr, err := f.e.Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func childTexts(tr *outline.Tree, key string) []string {
	var out []string
	for it := range tr.ChildrenOf(tr.Nodes.Get(key)).Items() {
		out = append(out, it.Str("text"))
	}
	return out
}

// selectionOf is the "where selected" note of a result.
func selectionOf(sc map[string]any) string {
	ds, _ := sc["diagnostics"].([]any)
	for _, d := range ds {
		if s, _ := d.(string); strings.HasPrefix(s, "where selected ") {
			return s
		}
	}
	return ""
}

// TestWhereOnEveryTool: move_node, complete_todo, update_node and
// delete_node take where (search's filters) instead of keys; the dry run
// says how many it selected and which (a sample), and plan=ID lands
// exactly that set, read back.
func TestWhereOnEveryTool(t *testing.T) {
	f := newWhereFixture(t)
	level, archive := f.keys["Level"], f.keys["Archive"]

	// move every done todo of Level under Archive: dry run, then plan=ID
	args := map[string]any{"where": map[string]any{"state": "done", "under": level}, "parent": archive, "dry_run": true}
	res, sc := call(t, f.c, "move_node", args)
	if res.IsError {
		t.Fatal(text(res))
	}
	sel := selectionOf(sc)
	if !strings.HasPrefix(sel, "where selected 3 bullet(s)") {
		t.Fatalf("dry run's selection: %q", sel)
	}
	for _, txt := range []string{"done 1 #old", "done 2", "done 3 #Old"} {
		if !strings.Contains(sel, f.keys[txt]) {
			t.Errorf("the dry run's sample %q lacks %s (%s)", sel, f.keys[txt], txt)
		}
	}
	delete(args, "dry_run")
	args["plan"] = sc["plan"]
	res, sc = call(t, f.c, "move_node", args)
	if res.IsError {
		t.Fatal(text(res))
	}
	// the plan's result names the set by count and id (its dry run listed
	// the sample), in both parts
	short := strings.SplitAfter(sel, ")")[0] + ", as its dry run listed"
	if got := selectionOf(sc); got != short || !strings.Contains(text(res), short) || strings.Contains(text(res), f.keys["done 2"]) {
		t.Errorf("the plan's result names its set %q (want %q):\n%s", got, short, text(res))
	}
	tr := f.tree(t)
	if got := childTexts(tr, archive); !slices.Equal(got, []string{"done 1 #old", "done 2", "done 3 #Old"}) {
		t.Fatalf("Archive holds %q", got)
	}
	if got := childTexts(tr, level); !slices.Equal(got, []string{"open 1 #older", "plain #old", "open 2"}) {
		t.Fatalf("Level holds %q", got)
	}

	// tick every open todo under Level
	if res, sc := call(t, f.c, "complete_todo", map[string]any{"where": map[string]any{"state": "open", "under": level}}); res.IsError || !strings.Contains(fmt.Sprint(sc["summary"]), "complete 2 bullet(s)") {
		t.Fatalf("complete_todo where: %s", text(res))
	}
	tr = f.tree(t)
	for _, txt := range []string{"open 1 #older", "open 2"} {
		if tr.Nodes.Get(f.keys[txt]).Str("completedAt") == "" {
			t.Errorf("%s not ticked", txt)
		}
	}
	if tr.Nodes.Get(f.keys["q open"]).Str("completedAt") != "" {
		t.Error("a todo outside under was ticked")
	}

	// a layout on every bullet tagged #old (tags match case-insensitively)
	if res, _ := call(t, f.c, "update_node", map[string]any{"where": map[string]any{"tags": []any{"old"}}, "layout": "h3"}); res.IsError {
		t.Fatal(text(res))
	}
	tr = f.tree(t)
	for txt, want := range map[string]string{"done 1 #old": "h3", "plain #old": "h3", "done 3 #Old": "h3", "open 1 #older": "todo"} {
		if got := tr.Nodes.Get(f.keys[txt]).Str("layout"); got != want {
			t.Errorf("%s: layout %q, want %q", txt, got, want)
		}
	}

	// delete the done todos of Q
	if res, _ := call(t, f.c, "delete_node", map[string]any{"where": map[string]any{"state": "done", "under": f.keys["Q"]}}); res.IsError {
		t.Fatal(text(res))
	}
	tr = f.tree(t)
	if got := childTexts(tr, f.keys["Q"]); !slices.Equal(got, []string{"q open"}) {
		t.Fatalf("Q holds %q", got)
	}

	// in apply_batch, an op's where sees the ops before it
	ops := []any{
		map[string]any{"tool": "insert_after", "args": map[string]any{"parent": f.keys["Q"], "text": "fresh #batch"}},
		map[string]any{"tool": "move_node", "args": map[string]any{"where": map[string]any{"tags": []any{"batch"}}, "parent": archive, "position": "first"}},
	}
	if res, _ := call(t, f.c, "apply_batch", map[string]any{"ops": ops}); res.IsError {
		t.Fatal(text(res))
	}
	if got := childTexts(f.tree(t), archive); len(got) != 4 || got[0] != "fresh #batch" {
		t.Fatalf("Archive after the batch: %q", got)
	}
}

// TestWhereArguments: where and keys together, neither, an unknown
// filter, a bad value: each refused as invalid, naming the argument.
func TestWhereArguments(t *testing.T) {
	f := newWhereFixture(t)
	k := f.keys["Level"]
	for _, c := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"move_node", map[string]any{"node": k, "where": map[string]any{"state": "done"}, "parent": "top"}, "not node and where together"},
		{"move_node", map[string]any{"from": k}, "from and to together"},
		{"complete_todo", map[string]any{}, "pass one of node, where"},
		{"delete_node", map[string]any{"node": k, "where": map[string]any{"text": "x"}}, "not node and where together"},
		{"update_node", map[string]any{"where": map[string]any{"stat": "done"}, "layout": "h1"}, "where.stat is not one of search's filters (did you mean where.state?)"},
		{"update_node", map[string]any{"where": map[string]any{"state": "closed"}, "layout": "h1"}, "where.state must be open or done"},
		{"update_node", map[string]any{"where": map[string]any{"created_from": "last tuesday"}, "layout": "h1"}, "where.created_from"},
		{"update_node", map[string]any{"where": map[string]any{"under": k}, "layout": "h1"}, "where needs a filter besides under"},
		{"update_node", map[string]any{"node": k, "find": "x"}, "find and replace together"},
		{"update_node", map[string]any{"node": k, "find": "(", "replace": "", "regex": true}, "find: error parsing regexp"},
		{"apply_batch", map[string]any{"ops": []any{map[string]any{"tool": "delete_node", "args": map[string]any{"where": map[string]any{"tag": "x"}}}}}, "ops[0] (delete_node): where.tag is not one of search's filters"},
	} {
		res, sc := call(t, f.c, c.tool, c.args)
		e, _ := sc["error"].(map[string]any)
		if !res.IsError || e["kind"] != "invalid" || !strings.Contains(text(res), c.want) {
			t.Errorf("%s %v: %s (kind %v), want invalid naming %q", c.tool, c.args, text(res), e["kind"], c.want)
		}
	}
}

// TestWhereSetChangedByAnotherWriter: between a dry run selecting by
// where and its plan=ID, another writer ticks a todo the filters now
// take in, under a parent the plan does not touch: the plan is refused
// (conflict, nothing written), where the plan's own check would have let
// it land on the old set.
func TestWhereSetChangedByAnotherWriter(t *testing.T) {
	f := newWhereFixture(t)
	args := map[string]any{"where": map[string]any{"state": "done", "text": "done"}, "parent": f.keys["Archive"], "dry_run": true}
	res, sc := call(t, f.c, "move_node", args)
	if res.IsError || !strings.HasPrefix(selectionOf(sc), "where selected 4 bullet(s)") {
		t.Fatalf("dry run: %s", text(res))
	}
	// another writer (its own engine on the same repository) ticks "q open"
	// and renames it into the filter
	other := outline.New(f.repo)
	txt := "q open, done now"
	if _, err := other.Do(context.Background(), intent.Edit{Node: f.keys["q open"], Text: &txt}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Do(context.Background(), intent.Complete{Node: f.keys["q open"], Done: true}, false); err != nil {
		t.Fatal(err)
	}
	delete(args, "dry_run")
	args["plan"] = sc["plan"]
	res, sc = call(t, f.c, "move_node", args)
	e, _ := sc["error"].(map[string]any)
	if !res.IsError || e["kind"] != "conflict" || !strings.Contains(text(res), "where selects changed") {
		t.Fatalf("a plan applied on a set another writer changed: %s", text(res))
	}
	if got := childTexts(f.tree(t), f.keys["Archive"]); len(got) != 0 {
		t.Fatalf("Archive holds %q after a refused plan", got)
	}

	// the same in apply_batch, where the set is taken after the ops before
	batch := map[string]any{"ops": []any{
		map[string]any{"tool": "insert_after", "args": map[string]any{"parent": f.keys["Archive"], "text": "moved here:"}},
		map[string]any{"tool": "move_node", "args": map[string]any{"where": map[string]any{"state": "done"}, "parent": f.keys["Archive"]}},
	}, "dry_run": true}
	res, sc = call(t, f.c, "apply_batch", batch)
	if res.IsError || !strings.HasPrefix(selectionOf(sc), "where selected 5 bullet(s)") {
		t.Fatalf("batch dry run: %s", text(res))
	}
	// a done todo at the top level, which the plan does not touch
	if _, err := other.Do(context.Background(), intent.Insert{Nodes: []intent.NewNode{{Text: "late", Layout: "todo", Completed: true}}}, false); err != nil {
		t.Fatal(err)
	}
	delete(batch, "dry_run")
	batch["plan"] = sc["plan"]
	if res, sc = call(t, f.c, "apply_batch", batch); !res.IsError || sc["error"].(map[string]any)["kind"] != "conflict" {
		t.Fatalf("a batch plan applied on a set another writer changed: %s", text(res))
	}
	if got := childTexts(f.tree(t), f.keys["Archive"]); len(got) != 0 {
		t.Fatalf("Archive holds %q after a refused batch plan", got)
	}
}

// TestWhereOverTheBound: a set larger than intent.MaxSelected is refused
// with its count, nothing planned.
func TestWhereOverTheBound(t *testing.T) {
	l := openLocal(t)
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	var b strings.Builder
	b.WriteString("- big\n")
	for i := 0; i <= intent.MaxSelected; i++ {
		fmt.Fprintf(&b, "  - item %d #many\n", i)
	}
	if res, _ := call(t, c, "import_outline", map[string]any{"content": b.String()}); res.IsError {
		t.Fatal(text(res))
	}
	res, sc := call(t, c, "complete_todo", map[string]any{"where": map[string]any{"tags": "many"}, "dry_run": true})
	e, _ := sc["error"].(map[string]any)
	want := fmt.Sprintf("where selects %d bullets, more than the %d one operation takes", intent.MaxSelected+1, intent.MaxSelected)
	if !res.IsError || e["kind"] != "invalid" || !strings.Contains(text(res), want) {
		t.Fatalf("an oversized set: %s", text(res))
	}
}

// TestRenameTagNeverTouchesALongerTag: find "#old" replace "#new" renames
// whole #old tags only (any case), never #older or a "#old" that is no tag
// (x#old), keeps trailing punctuation, and the facets follow the new text.
func TestRenameTagNeverTouchesALongerTag(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	texts := []string{"buy #old milk", "#older stuff", "#Old first", "x#old y", "end #old.", "two #old and #old", "#oldest #old"}
	var nodes []any
	for _, s := range texts {
		nodes = append(nodes, map[string]any{"text": s})
	}
	if res, _ := call(t, c, "insert_after", map[string]any{"nodes": nodes}); res.IsError {
		t.Fatal(text(res))
	}
	args := map[string]any{"where": map[string]any{"text": "old"}, "find": "#old", "replace": "#new", "dry_run": true}
	res, sc := call(t, c, "update_node", args)
	if res.IsError || !strings.Contains(text(res), "(whole tag, 6 match(es)) in 5 of 7 bullet(s) selected by where") {
		t.Fatalf("dry run: %s", text(res))
	}
	delete(args, "dry_run")
	args["plan"] = sc["plan"]
	if res, _ := call(t, c, "update_node", args); res.IsError {
		t.Fatal(text(res))
	}
	tr, _ := e.Tree(context.Background())
	var got []string
	for it := range tr.Roots.Items() {
		got = append(got, it.Str("text"))
		var tags []string
		for _, s := range facet.Record(it.Rec.Value.Map()) {
			if s.Kind == facet.Tag {
				tags = append(tags, s.Value)
			}
		}
		if want := facetTags(it.Str("text")); !slices.Equal(tags, want) {
			t.Errorf("%q: facet tags %q, want %q", it.Str("text"), tags, want)
		}
	}
	want := []string{"buy #new milk", "#older stuff", "#new first", "x#old y", "end #new.", "two #new and #new", "#oldest #new"}
	if !slices.Equal(got, want) {
		t.Fatalf("after the rename:\n got %q\nwant %q", got, want)
	}
}

func facetTags(s string) []string {
	var out []string
	for _, sp := range facet.Detect(s) {
		if sp.Kind == facet.Tag {
			out = append(out, sp.Value)
		}
	}
	return out
}

// TestReplaceText: a literal replace and an RE2 one with a group, over a
// selection and on one bullet; the dry run reports the bullets it changes.
func TestReplaceText(t *testing.T) {
	f := newWhereFixture(t)
	res, sc := call(t, f.c, "update_node", map[string]any{"where": map[string]any{"text": "open"}, "find": `open (\d)`, "replace": "shut $1", "regex": true, "dry_run": true})
	if res.IsError || !strings.Contains(text(res), `"shut $1" (RE2, 2 match(es)) in 2 of 3 bullet(s) selected by where`) || !strings.Contains(text(res), `"shut 1 #older"`) {
		t.Fatalf("dry run: %s", text(res))
	}
	// the dry run reports bullet by bullet, in both parts (not as a list
	// of changes or records: the selection's note has the keys); the
	// landed write gives counts
	if d, _ := json.Marshal(sc["diagnostics"]); !strings.Contains(text(res), `"open 1 #older" → "shut 1 #older"`) || !strings.Contains(string(d), `\"open 1 #older\" → \"shut 1 #older\"`) {
		t.Errorf("the dry run has no per-bullet report: %s\n%s", text(res), d)
	}
	if sc["changes"] != nil || sc["writes"] != nil || sc["before"] != nil {
		t.Errorf("a selection's dry run repeats its bullets: %v", sc)
	}
	if res, _ := call(t, f.c, "update_node", map[string]any{"node": f.keys["Level"], "find": "Lev", "replace": "The lev"}); res.IsError {
		t.Fatal(text(res))
	}
	res, _ = call(t, f.c, "update_node", map[string]any{"where": map[string]any{"text": "open"}, "find": `open (\d)`, "replace": "shut $1", "regex": true})
	if res.IsError || !strings.Contains(text(res), `"shut $1" (RE2, 2 match(es)) in 2 of 3 bullet(s) selected by where`) || strings.Contains(text(res), "→") {
		t.Fatalf("the landed replace should give counts, not the per-bullet report: %s", text(res))
	}
	tr := f.tree(t)
	if got := tr.Nodes.Get(f.keys["Level"]).Str("text"); got != "The level" {
		t.Errorf("literal replace: %q", got)
	}
	if got := childTexts(tr, f.keys["Level"]); !slices.Contains(got, "shut 1 #older") || !slices.Contains(got, "shut 2") {
		t.Errorf("regex replace: %q", got)
	}
}

// TestMoveRunAndSplit: a run of siblings moved by its first and last key,
// and a 600-child level split into three headed sections in one call
// (no key read or written but the level's), order kept.
func TestMoveRunAndSplit(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	var b strings.Builder
	b.WriteString("- big\n")
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&b, "  - item %d\n", i)
	}
	b.WriteString("- other\n")
	if res, _ := call(t, c, "import_outline", map[string]any{"content": b.String()}); res.IsError {
		t.Fatal(text(res))
	}
	tr, _ := e.Tree(context.Background())
	big, other := tr.Roots.At(0), tr.Roots.At(1)
	kids := big.Children

	// from…to: items 10..19 under other
	if res, _ := call(t, c, "move_node", map[string]any{"from": kids.At(10).Key(), "to": kids.At(19).Key(), "parent": other.Key()}); res.IsError {
		t.Fatal(text(res))
	}
	tr, _ = e.Tree(context.Background())
	if got := childTexts(tr, other.Key()); len(got) != 10 || got[0] != "item 10" || got[9] != "item 19" {
		t.Fatalf("other holds %q", got)
	}
	if res, _ := call(t, c, "move_node", map[string]any{"from": kids.At(19).Key(), "to": kids.At(10).Key(), "parent": big.Key()}); !res.IsError || !strings.Contains(text(res), "comes after") {
		t.Fatalf("a reversed run: %s", text(res))
	}
	// back, after item 9
	if res, _ := call(t, c, "move_node", map[string]any{"from": kids.At(10).Key(), "to": kids.At(19).Key(), "parent": big.Key(), "after": kids.At(9).Key()}); res.IsError {
		t.Fatal(text(res))
	}

	res, sc := call(t, c, "move_node", map[string]any{"node": big.Key(), "split": []any{"Part A", "Part B", "Part C"}})
	if res.IsError {
		t.Fatal(text(res))
	}
	if n := len(text(res)); n > 4096 {
		t.Errorf("the split's result is %d bytes of text", n)
	}
	_ = sc
	tr, _ = e.Tree(context.Background())
	heads := tr.ChildrenOf(tr.Nodes.Get(big.Key()))
	if heads.Len() != 3 {
		t.Fatalf("big has %d children after the split", heads.Len())
	}
	i := 0
	for h, head := range heads.All() {
		if want := "Part " + string(rune('A'+h)); head.Str("text") != want {
			t.Errorf("heading %d: %q", h, head.Str("text"))
		}
		if head.Children.Len() != 200 {
			t.Errorf("%s holds %d", head.Str("text"), head.Children.Len())
		}
		for k := range head.Children.Items() {
			if want := fmt.Sprintf("item %d", i); k.Str("text") != want {
				t.Fatalf("under %s: %q, want %q", head.Str("text"), k.Str("text"), want)
			}
			i++
		}
	}
	// split of a run by from…to: items 0..9 of Part A under two headings, in place
	pa := heads.At(0).Children
	if res, _ := call(t, c, "move_node", map[string]any{"from": pa.At(0).Key(), "to": pa.At(9).Key(), "split": []any{"x", "y", "z"}}); res.IsError {
		t.Fatal(text(res))
	}
	tr, _ = e.Tree(context.Background())
	a := tr.Nodes.Get(heads.At(0).Key()).Children
	if a.Len() != 193 || a.At(0).Str("text") != "x" || a.At(0).Children.Len() != 4 || a.At(1).Children.Len() != 3 || a.At(2).Children.Len() != 3 || a.At(3).Str("text") != "item 10" {
		t.Fatalf("after a run's split: %d children, first %q", a.Len(), a.At(0).Str("text"))
	}
}

// TestBigWriteResultIsBounded: a 2,000-line import's result is at most
// 4 KB in each part (counts, where it went, a sample of keys); all_keys=true
// gives every key.
func TestBigWriteResultIsBounded(t *testing.T) {
	l := openLocal(t)
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		fmt.Fprintf(&b, "%s- line %d of the import\n", strings.Repeat("  ", min(i%4, 1)), i)
	}
	res, sc := call(t, c, "import_outline", map[string]any{"content": b.String()})
	if res.IsError {
		t.Fatal(text(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	t.Logf("a 2,000-line import's result: %d B of text, %d B of structured content", len(text(res)), len(raw))
	if len(text(res)) > 4096 || len(raw) > 4096 {
		t.Fatalf("a 2,000-line import's result: %d bytes of text, %d structured", len(text(res)), len(raw))
	}
	if sc["createdTotal"] != float64(2000) || len(createdKeys(sc)) == 0 {
		t.Fatalf("createdTotal %v, keys %d", sc["createdTotal"], len(createdKeys(sc)))
	}
	res, sc = call(t, c, "import_outline", map[string]any{"content": b.String(), "all_keys": true})
	if res.IsError || len(createdKeys(sc)) != 2000 {
		t.Fatalf("all_keys=true listed %d keys: %s", len(createdKeys(sc)), text(res)[:200])
	}
}

// TestBulkTasksInFewCalls: the bulk tasks, as an agent does them,
// counting calls and the bytes each part of their results shows: every
// done todo of a 300-child level under a new "Archive" (2 calls), #old
// renamed to #new everywhere (1 call), a 600-child level split into three
// headed sections (1 call). Each result is checked small: it carries the
// counts and a sample, never the set.
func TestBulkTasksInFewCalls(t *testing.T) {
	l := openLocal(t)
	e := outline.New(l)
	c := inProcess(t, &tools.Env{Engine: e})
	var b strings.Builder
	b.WriteString("- Level\n")
	for i := 0; i < 300; i++ {
		switch {
		case i%3 == 0:
			fmt.Fprintf(&b, "  - [x] done todo %d #old\n", i)
		case i%25 == 1:
			fmt.Fprintf(&b, "  - [ ] open todo %d #older\n", i)
		default:
			fmt.Fprintf(&b, "  - [ ] open todo %d\n", i)
		}
	}
	b.WriteString("- Big\n")
	for i := 0; i < 600; i++ {
		fmt.Fprintf(&b, "  - row %d\n", i)
	}
	if res, _ := call(t, c, "import_outline", map[string]any{"content": b.String()}); res.IsError {
		t.Fatal(text(res))
	}
	tr, _ := e.Tree(context.Background())
	level, big := tr.Roots.At(0).Key(), tr.Roots.At(1).Key()
	shown := func(name string, calls ...func() (string, map[string]any)) {
		t.Helper()
		txt, sc := 0, 0
		for _, f := range calls {
			s, m := f()
			raw, _ := json.Marshal(m)
			txt, sc = txt+len(s), sc+len(raw)
		}
		t.Logf("%s: %d call(s), shown %d B as text, %d B as structured content", name, len(calls), txt, sc)
		if txt > 4096 || sc > 4096 {
			t.Errorf("%s: %d B of text, %d B structured: over 4 KB", name, txt, sc)
		}
	}
	do := func(tool string, args map[string]any) func() (string, map[string]any) {
		return func() (string, map[string]any) {
			res, sc := call(t, c, tool, args)
			if res.IsError {
				t.Fatalf("%s: %s", tool, text(res))
			}
			return text(res), sc
		}
	}
	var archive string
	shown("archive the done todos",
		func() (string, map[string]any) {
			res, sc := call(t, c, "insert_after", map[string]any{"parent": level, "position": "first", "text": "Archive"})
			archive = createdKeys(sc)[0]
			return text(res), sc
		},
		func() (string, map[string]any) {
			return do("move_node", map[string]any{"where": map[string]any{"state": "done", "under": level}, "parent": archive})()
		})
	shown("rename #old to #new", do("update_node", map[string]any{"where": map[string]any{"tags": []any{"old"}}, "find": "#old", "replace": "#new"}))
	shown("split 600 into three", do("move_node", map[string]any{"node": big, "split": []any{"First", "Second", "Third"}}))
	tr, _ = e.Tree(context.Background())
	if n := tr.Nodes.Get(archive).Children.Len(); n != 100 {
		t.Errorf("Archive holds %d", n)
	}
	older := 0
	for _, it := range tr.Nodes.All() {
		if strings.Contains(it.Str("text"), "#old") && !strings.Contains(it.Str("text"), "#older") {
			t.Errorf("%q kept #old", it.Str("text"))
		}
		if strings.Contains(it.Str("text"), "#older") {
			older++
		}
	}
	if older != 8 { // i%25 == 1 and not done: 1, 26, 76, 101, 151, 176, 226, 251
		t.Errorf("%d #older left, want 8", older)
	}
}
