package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// Input schemas every client handles: no $ref, $defs, oneOf, anyOf or
// recursion, and tools/list at most 10 KB as a model is shown it (issue
// 40: so that a new tool fits under the 12 KB this test held before):
// the name, description and input schema a host hands the model, without
// the output schemas, the titles (the display name a host shows a person,
// sent as title and annotations.title) and the annotations (hints to the
// host, which model APIs' tool definitions do not carry). Every tool has
// a title of at most 40 characters.
func TestSchemaLint(t *testing.T) {
	type shown struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	var list []shown
	withTitles, listed := 0, 0
	for _, tl := range tools.All() {
		raw, _ := json.Marshal(tl.Schema)
		for _, bad := range []string{`"$ref"`, `"$defs"`, `"oneOf"`, `"anyOf"`, `"allOf"`, `"definitions"`} {
			if strings.Contains(string(raw), bad) {
				t.Errorf("%s: input schema uses %s", tl.Name, bad)
			}
		}
		if tl.Output == nil {
			t.Errorf("%s: no output schema", tl.Name)
		}
		m := tl.MCP()
		m.RawOutputSchema = nil
		if m.Title == "" || m.Title != tl.Title || m.Annotations.Title != tl.Title || len(m.Title) > 40 {
			t.Errorf("%s: title %q, annotations.title %q (want the tool's title, 1 to 40 characters)", tl.Name, m.Title, m.Annotations.Title)
		}
		raw, _ = json.Marshal(m)
		withTitles += len(raw)
		m.Title, m.Annotations.Title = "", ""
		raw, _ = json.Marshal(m)
		listed += len(raw)
		list = append(list, shown{m.Name, m.Description, m.RawInputSchema})
	}
	raw, _ := json.Marshal(map[string]any{"tools": list})
	t.Logf("tools/list as a model is shown it (name, description, input schema): %d bytes for %d tools; %d with the annotations, %d with the titles too (no output schemas)", len(raw), len(list), listed, withTitles)
	if len(raw) > 10*1024 {
		t.Fatalf("tools/list as a model is shown it is %d bytes; keep it at most 10 KB (10,240 bytes)", len(raw))
	}
}

type fixture struct {
	c    *client.Client
	repo *store.Local
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, false) }

// newFixtureWith is an in-process MCP client of a server over a fresh
// embedded store.
func newFixtureWith(t testing.TB, readOnly bool) *fixture {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c, err := client.NewInProcessClient(server.New(outline.New(l), readOnly))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &fixture{c: c, repo: l}
}

func (f *fixture) head(t testing.TB) string {
	s, err := f.repo.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s.Commit
}

// Strict inputs: every malformed call is refused by name or path, and
// nothing is written; the documented coercions are accepted.
func TestStrictInputs(t *testing.T) {
	f := newFixture(t)
	_, sc := call(t, f.c, "insert_after", map[string]any{"nodes": []any{map[string]any{"text": "Design"}, map[string]any{"text": "Build"}}})
	keys := createdKeys(sc)
	refused := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"unknown key with a near name", "insert_after", map[string]any{"text": "x", "parent_id": keys[0]}, "unknown argument parent_id (did you mean parent?)"},
		{"element without text", "insert_after", map[string]any{"nodes": []any{map[string]any{"title": "y"}}}, "nodes[0].text is required"},
		{"unknown key in an element", "insert_after", map[string]any{"nodes": []any{map[string]any{"text": "y", "title": "y"}}}, "unknown argument nodes[0].title"},
		{"object for text", "insert_after", map[string]any{"text": map[string]any{"a": 1}}, "text must be string, got object"},
		{"nested dry_run", "apply_batch", map[string]any{"ops": []any{map[string]any{"tool": "insert_after", "args": map[string]any{"text": "z", "dry_run": true}}}}, "ops[0].args.dry_run: not allowed inside apply_batch"},
		{"bad op args", "apply_batch", map[string]any{"ops": []any{map[string]any{"tool": "move_node", "args": map[string]any{"nod": keys[0]}}}}, "ops[0] (move_node): invalid arguments for move_node: unknown argument nod (did you mean node?)"},
		{"undo steps 0", "undo", map[string]any{"steps": 0}, "steps: minimum"},
		{"undo steps -3", "undo", map[string]any{"steps": -3}, "steps: minimum"},
		{"undo steps 1e300", "undo", map[string]any{"steps": 1e300}, "steps"},
		{"undo steps 2.7", "undo", map[string]any{"steps": 2.7}, "steps must be integer"},
		{"depth 2.7", "read_outline", map[string]any{"depth": 2.7}, "depth must be integer"},
		{"cursor of nothing", "read_outline", map[string]any{"offset": 5}, "unknown argument offset"},
		{"boolean as a word", "insert_after", map[string]any{"text": "x", "dry_run": "yes"}, "dry_run must be boolean"},
		{"text as a reference", "complete_todo", map[string]any{"node": "Design"}, "bullets whose text is 'Design': " + keys[0]},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			before := f.head(t)
			res, sc := call(t, f.c, tc.tool, tc.args)
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("isError=%v text=%q, want %q", res.IsError, text(res), tc.want)
			}
			if e, _ := sc["error"].(map[string]any); e["kind"] == nil {
				t.Fatalf("no error kind in %v", sc)
			}
			if f.head(t) != before {
				t.Fatal("a refused call wrote")
			}
		})
	}
	accepted := []struct {
		name string
		tool string
		args map[string]any
	}{
		{"stringified array", "insert_after", map[string]any{"nodes": `[{"text":"s1"},{"text":"s2","children":[{"text":"s2a"}]}]`}},
		{"string booleans", "insert_after", map[string]any{"text": "b", "completed": "TRUE", "dry_run": "false"}},
		{"integral float and numeric string", "read_outline", map[string]any{"depth": 2.0, "limit": "50"}},
		{"one string for a list", "move_node", map[string]any{"nodes": keys[1], "position": "first"}},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := call(t, f.c, tc.tool, tc.args)
			if res.IsError {
				t.Fatalf("refused: %s", text(res))
			}
		})
	}
}

// Every tool's structuredContent matches its declared output schema, for
// successes and errors alike.
func TestOutputsMatchSchemas(t *testing.T) {
	// an empty outline first (empty lists must be [], not null)
	e := newFixture(t)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{{"read_outline", map[string]any{"format": "json"}}, {"read_outline", map[string]any{"format": "json", "flat": true}}, {"search", map[string]any{"text": "x"}}, {"operations", map[string]any{}}, {"list_detached", map[string]any{}}} {
		checkOutput(t, e, c.tool, c.args)
	}
	f := newFixture(t)
	_, sc := call(t, f.c, "insert_after", map[string]any{"nodes": []any{map[string]any{"text": "A", "note": "n", "children": []any{map[string]any{"text": "a1"}}}, map[string]any{"text": "B #tag"}}})
	k := createdKeys(sc)
	calls := []struct {
		tool string
		args map[string]any
	}{
		{"read_outline", map[string]any{}},
		{"read_outline", map[string]any{"format": "json", "flat": true}},
		{"read_outline", map[string]any{"format": "markdown"}},
		{"read_outline", map[string]any{"node": "nope"}},
		{"search", map[string]any{"text": "a"}},
		{"list_detached", map[string]any{}},
		{"insert_after", map[string]any{"markdown": "- x\n  - y", "dry_run": true}},
		{"insert_after", map[string]any{"text": "t", "after": k[1]}},
		{"move_node", map[string]any{"node": k[1], "position": "first"}},
		{"update_node", map[string]any{"node": k[1], "note": "nn"}},
		{"complete_todo", map[string]any{"node": k[1]}},
		{"delete_node", map[string]any{"node": k[0]}},
		{"set_outline", map[string]any{"title": "T"}},
		{"set_comment_policy", map[string]any{"allow": []any{"mentioned"}}},
		{"add_comment", map[string]any{"subject": k[1], "text": "c"}},
		{"add_mirror", map[string]any{"original": k[1], "parent": k[0]}},
		{"apply_batch", map[string]any{"ops": []any{map[string]any{"tool": "insert_after", "args": map[string]any{"text": "q"}}}}},
		{"import_outline", map[string]any{"content": "- i\n- j"}},
		{"validate_record", map[string]any{"record": map[string]any{"$type": "app.bulleted.node", "text": "x"}}},
		{"operations", map[string]any{}},
		{"operations", map[string]any{"resume": "nope"}},
		{"undo", map[string]any{}},
		{"undo", map[string]any{"steps": 50}},
	}
	for _, c := range calls {
		checkOutput(t, f, c.tool, c.args)
	}
}

// checkOutput calls tool and checks its structuredContent against the
// tool's output schema.
func checkOutput(t *testing.T, f *fixture, tool string, args map[string]any) {
	t.Helper()
	tl, _ := tools.Find(tool)
	raw, _ := json.Marshal(tl.Output)
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	url := "mem:///" + tool + ".json"
	comp.AddResource(url, doc)
	sch, err := comp.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	res, sc := call(t, f.c, tool, args)
	if sc == nil {
		t.Fatalf("%s %v: no structured content (%s)", tool, args, text(res))
	}
	b, _ := json.Marshal(sc)
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("%s %v: structured content does not match the output schema: %v\n%s", tool, args, err, b)
	}
}

// TestDocsKinds: docs/tools.md lists exactly the error kinds of
// outline.Kinds, in order (the one table of them).
func TestDocsKinds(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(toolsDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)\(kinds: (.*?)\)`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("%s has no (kinds: …) list", toolsDoc)
	}
	var got []string
	for _, k := range regexp.MustCompile("`([a-z_]+)`").FindAllSubmatch(m[1], -1) {
		got = append(got, string(k[1]))
	}
	want := outline.KindNames()
	want = want[:len(want)-1] // "error" is the bug case, not listed
	if !slices.Equal(got, want) {
		t.Fatalf("%s kinds %v, the table has %v", toolsDoc, got, want)
	}
}
