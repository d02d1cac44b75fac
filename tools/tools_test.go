package tools_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

var update = flag.Bool("update", false, "rewrite testdata snapshots and the tool table in docs/tools.md")

// openLocal opens an embedded store in a temporary directory, closed when
// the test ends.
func openLocal(t *testing.T) *store.Local {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// inProcess starts an initialised in-process client of a server on env,
// closed when the test ends.
func inProcess(t *testing.T, env *tools.Env) *client.Client {
	t.Helper()
	ctx := context.Background()
	c, err := client.NewInProcessClient(server.NewWith(env, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

func newClient(t *testing.T, readOnly bool) *client.Client {
	t.Helper()
	return newFixtureWith(t, readOnly).c
}

func call(t *testing.T, c *client.Client, name string, args map[string]any) (*mcp.CallToolResult, map[string]any) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var sc map[string]any
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &sc)
	return res, sc
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// createdKeys are the keys a write created: its created objects (small
// writes) or keys (larger ones).
func createdKeys(sc map[string]any) []string {
	var out []string
	cs, _ := sc["created"].([]any)
	for _, c := range cs {
		out = append(out, c.(map[string]any)["rkey"].(string))
	}
	ks, _ := sc["keys"].([]any)
	for _, k := range ks {
		out = append(out, k.(string))
	}
	return out
}

func TestToolsEndToEndInProcess(t *testing.T) {
	c := newClient(t, false)
	res, sc := call(t, c, "insert_after", map[string]any{"nodes": `[{"text":"Groceries","children":[{"text":"Eggs","layout":"todo","note":"Jumbo"},{"text":"Bread","layout":"todo"}]}]`})
	if res.IsError {
		t.Fatal(text(res))
	}
	keys := createdKeys(sc)
	if len(keys) != 3 {
		t.Fatalf("created %v", keys)
	}
	g, eggs, bread := keys[0], keys[1], keys[2]
	// move Bread before Eggs; complete Eggs (as a string boolean)
	if res, _ := call(t, c, "move_node", map[string]any{"node": bread, "position": "first"}); res.IsError {
		t.Fatal(text(res))
	}
	if res, _ := call(t, c, "complete_todo", map[string]any{"node": eggs, "completed": "true"}); res.IsError {
		t.Fatal(text(res))
	}
	res, _ = call(t, c, "read_outline", map[string]any{"node": g, "depth": "2"})
	out := text(res)
	if !strings.Contains(out, "- [ ] Bread ·"+bread+"\n  - [x] Eggs [note] ·"+eggs) {
		t.Fatalf("outline:\n%s", out)
	}
	// json rows are compact: what the agent cannot derive, the URI prefix
	// once; fields=full gives getOutline's field names
	_, sc = call(t, c, "read_outline", map[string]any{"format": "json"})
	row := sc["nodes"].([]any)[0].(map[string]any)
	for _, f := range []string{"rkey", "text", "childCount", "depth", "children"} {
		if _, ok := row[f]; !ok {
			t.Fatalf("json row lacks %s: %v", f, row)
		}
	}
	eggRow := row["children"].([]any)[1].(map[string]any)
	if sc["uriPrefix"] != "at://"+sc["did"].(string)+"/app.bulleted.node/" || row["uri"] != nil || eggRow["state"] != "done" || eggRow["hasNote"] != true || eggRow["layout"] != "todo" {
		t.Fatalf("compact page: %v", sc)
	}
	_, sc = call(t, c, "read_outline", map[string]any{"format": "json", "fields": "full"})
	row = sc["nodes"].([]any)[0].(map[string]any)
	for _, f := range []string{"uri", "cid", "rkey", "did", "sortKey", "text", "createdAt", "childCount", "children"} {
		if _, ok := row[f]; !ok {
			t.Fatalf("full json row lacks %s: %v", f, row)
		}
	}
	// dry run writes nothing
	_, before := call(t, c, "read_outline", map[string]any{"format": "json"})
	res, sc = call(t, c, "delete_node", map[string]any{"node": g, "children": "subtree", "dry_run": true})
	if res.IsError || sc["dryRun"] != true || sc["after"] == nil {
		t.Fatalf("dry run: %s", text(res))
	}
	_, after := call(t, c, "read_outline", map[string]any{"format": "json"})
	if !jsonEqual(before, after) {
		t.Fatal("dry run changed the outline")
	}
	// undo the completion
	if res, _ := call(t, c, "undo", nil); res.IsError {
		t.Fatal(text(res))
	}
	res, _ = call(t, c, "read_outline", nil)
	if !strings.Contains(text(res), "[ ] Eggs") {
		t.Fatalf("undo failed:\n%s", text(res))
	}
	// apply_batch: later ops see earlier ones
	res, sc = call(t, c, "apply_batch", map[string]any{"ops": []any{
		map[string]any{"tool": "insert_after", "args": map[string]any{"text": "Milk", "parent": g}},
		map[string]any{"tool": "set_comment_policy", "args": map[string]any{"allow": []any{"mentioned"}}},
	}})
	if res.IsError || len(createdKeys(sc)) != 1 {
		t.Fatalf("batch: %s", text(res))
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func TestToolErrors(t *testing.T) {
	c := newClient(t, false)
	_, sc := call(t, c, "insert_after", map[string]any{"nodes": []any{map[string]any{"text": "A", "children": []any{map[string]any{"text": "a1"}}}, map[string]any{"text": "B"}}})
	k := createdKeys(sc)
	a, a1, b := k[0], k[1], k[2]
	cases := []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"anchor not a child", "insert_after", map[string]any{"text": "x", "parent": a, "after": b}, "call read_outline with node=" + a},
		{"unknown node", "move_node", map[string]any{"node": "3kzzzzzzzzzz2"}, "call read_outline"},
		{"cycle", "move_node", map[string]any{"node": a, "parent": a1}, "own subtree"},
		{"has children", "delete_node", map[string]any{"node": a}, "children=lift"},
		{"bad children policy", "delete_node", map[string]any{"node": a, "children": "cascade"}, "children: value must be one of 'refuse', 'lift', 'subtree'"},
		{"text too long", "insert_after", map[string]any{"text": strings.Repeat("é", 2001)}, "record: text: 2,001 graphemes, the limit is 2,000"},
		{"unknown rule", "set_comment_policy", map[string]any{"allow": []any{"everyone"}}, "mentioned"},
		{"both text and nodes", "insert_after", map[string]any{"text": "x", "nodes": []any{}}, "pass one of text, nodes or markdown"},
		{"bad position", "insert_after", map[string]any{"text": "x", "position": "middle"}, "position: value must be one of 'first', 'last'"},
		{"cross repo parent", "insert_after", map[string]any{"text": "x", "parent": "at://did:plc:other/app.bulleted.node/3kaaaaaaaaaa2"}, "another repository"},
		{"mirror own ancestor", "add_mirror", map[string]any{"original": a, "parent": a1}, "own descendant"},
		{"undo too far", "undo", map[string]any{"steps": 5}, "can be undone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, _ := call(t, c, tc.tool, tc.args)
			if !res.IsError || !strings.Contains(text(res), tc.want) {
				t.Fatalf("isError=%v text=%q want %q", res.IsError, text(res), tc.want)
			}
		})
	}
}

func TestReadOnlyExposesOnlyReadTools(t *testing.T) {
	c := newClient(t, true)
	lt, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range lt.Tools {
		if tl.Annotations.ReadOnlyHint == nil || !*tl.Annotations.ReadOnlyHint {
			t.Fatalf("%s exposed in read-only mode", tl.Name)
		}
	}
	if len(lt.Tools) != 4 { // read_outline, list_detached, search, validate_record
		t.Fatalf("%d tools", len(lt.Tools))
	}
}

// TestSchemaSnapshots checks every tool's schema and annotations against
// testdata/NAME.json (go test ./tools -update rewrites them).
func TestSchemaSnapshots(t *testing.T) {
	for _, tl := range tools.All() {
		m := tl.MCP()
		a := m.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Fatalf("%s: all four annotations must be set", tl.Name)
		}
		got, _ := json.MarshalIndent(m, "", "  ")
		path := filepath.Join("testdata", tl.Name+".json")
		if *update {
			os.WriteFile(path, append(got, '\n'), 0o644)
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%s: %v (run go test ./tools -update)", tl.Name, err)
		}
		if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
			t.Fatalf("%s: schema changed; review and run go test ./tools -update", tl.Name)
		}
	}
}

// toolsDoc is the reference page holding the generated tool table (moved
// there from the README).
const toolsDoc = "../docs/tools.md"

// TestDocsToolList checks the tool table in docs/tools.md is the one
// generated from the code (one pair of markers, in order).
func TestDocsToolList(t *testing.T) {
	doc, err := os.ReadFile(toolsDoc)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- tools:begin -->\n", "<!-- tools:end -->"
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i || strings.Count(s, begin) != 1 || strings.Count(s, end) != 1 {
		t.Fatalf("%s lacks one pair of tools markers", toolsDoc)
	}
	gen := tools.Markdown()
	if *update {
		s = s[:i+len(begin)] + gen + s[j:]
		if err := os.WriteFile(toolsDoc, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if s[i+len(begin):j] != gen {
		t.Fatalf("the tool table in %s is stale; run go test ./tools -update", toolsDoc)
	}
}

func BenchmarkTextVsListRecords(b *testing.B) {
	// bytes handed to the model per bullet: text format vs raw listRecords JSON
	l, _ := store.OpenLocal(b.TempDir())
	defer l.Close()
	e := outline.New(l)
	ctx := context.Background()
	var ns []intent.NewNode
	for j := 0; j < 200; j++ {
		ns = append(ns, intent.NewNode{Text: "Buy groceries for the week", Layout: "todo"})
	}
	e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Pos: outline.Position{}, Nodes: ns}.Plan(p) })
	tr, _ := e.Tree(ctx)
	v, _ := view.Read(tr, nil, view.Options{Depth: 3})
	txt := v.Text(false)
	type rec struct {
		URI   string         `json:"uri"`
		CID   string         `json:"cid"`
		Value map[string]any `json:"value"`
	}
	var recs []rec
	for _, r := range tr.Records() {
		recs = append(recs, rec{"at://" + tr.DID.String() + "/" + r.Collection + "/" + r.RKey, r.CID, r.Value.Map()})
	}
	raw, _ := json.Marshal(map[string]any{"records": recs, "cursor": "x"})
	b.ReportMetric(float64(len(txt))/200, "textB/bullet")
	b.ReportMetric(float64(len(raw))/200, "listRecordsB/bullet")
	b.ReportMetric(float64(len(txt))/float64(len(raw))*100, "pct")
}

// BenchmarkToolLatency10k is the in-process tool-call latency (MCP client →
// server → engine → embedded store) on a 10,220-bullet outline (20 top-level
// bullets × 10 children × 50 grandchildren). It reports the median.
func BenchmarkToolLatency10k(b *testing.B) {
	l, err := store.OpenLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	e := outline.New(l)
	ctx := context.Background()
	var top []intent.NewNode
	for i := 0; i < 20; i++ {
		n := intent.NewNode{Text: fmt.Sprintf("Project %d", i)}
		for j := 0; j < 10; j++ {
			c := intent.NewNode{Text: fmt.Sprintf("Area %d.%d", i, j)}
			for k := 0; k < 50; k++ {
				c.Children = append(c.Children, intent.NewNode{Text: fmt.Sprintf("Task %d.%d.%d", i, j, k), Layout: "todo"})
			}
			n.Children = append(n.Children, c)
		}
		top = append(top, n)
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: top}).Plan(p) }); err != nil {
		b.Fatal(err)
	}
	tr, _ := e.Tree(ctx)
	area := tr.Roots.At(7).Children.At(3)
	anchor := area.Children.At(25).Key()
	c, err := client.NewInProcessClient(server.New(e, false))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	c.Start(ctx)
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	c.Initialize(ctx, init)
	run := func(b *testing.B, name string, args func(i int) map[string]any) {
		d := make([]time.Duration, 0, b.N)
		for i := 0; i < b.N; i++ {
			req := mcp.CallToolRequest{}
			req.Params.Name = name
			req.Params.Arguments = args(i)
			start := time.Now()
			res, err := c.CallTool(ctx, req)
			d = append(d, time.Since(start))
			if err != nil || res.IsError {
				b.Fatalf("%s: %v %v", name, err, res)
			}
		}
		slices.Sort(d)
		b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "median-ms")
	}
	b.Run("read_outline-depth3", func(b *testing.B) {
		run(b, "read_outline", func(int) map[string]any { return map[string]any{"depth": 3} })
	})
	b.Run("read_outline-zoom-depth3", func(b *testing.B) {
		run(b, "read_outline", func(int) map[string]any { return map[string]any{"node": tr.Roots.At(3).Key(), "depth": 3} })
	})
	b.Run("insert_after", func(b *testing.B) {
		run(b, "insert_after", func(i int) map[string]any {
			return map[string]any{"parent": area.Key(), "after": anchor, "text": fmt.Sprint("new ", i)}
		})
	})
}
