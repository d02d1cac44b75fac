package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// payloadRepo is an embedded repository holding a generated outline.
func payloadRepo(t *testing.T, n int) *store.Local {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ws := outlinegen.Writes(outlinegen.Generate(n, 1), l.DID().String())
	for rest := ws; len(rest) > 0; {
		k := min(len(rest), store.MaxBatch)
		if _, err := l.Apply(context.Background(), "", rest[:k]); err != nil {
			t.Fatal(err)
		}
		rest = rest[k:]
	}
	return l
}

// payloadClient is an in-process client named name of a server over l
// with options o; it returns the client and the instructions it was given.
func payloadClient(t *testing.T, l *store.Local, o server.Options, name string) (*client.Client, string) {
	t.Helper()
	s, err := server.NewWithOptions(&tools.Env{Engine: outline.New(l)}, o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: name, Version: "1.0"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	return c, res.Instructions
}

func payCall(t *testing.T, c *client.Client, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

// outputSchemas are the tools' output schemas as listed ("" : none).
func outputSchemas(t *testing.T, c *client.Client) map[string]string {
	t.Helper()
	list, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, tl := range list.Tools {
		raw, _ := json.Marshal(tl)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		out[tl.Name] = string(m["outputSchema"])
	}
	return out
}

// matchesSchema fails t unless sc validates against the JSON Schema raw.
func matchesSchema(t *testing.T, what, raw string, sc any) {
	t.Helper()
	schema, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	comp := jsonschema.NewCompiler()
	if err := comp.AddResource("out.json", schema); err != nil {
		t.Fatal(err)
	}
	sch, err := comp.Compile("out.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sc)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("%s: structured content does not match the output schema: %v", what, err)
	}
}

func scJSON(res *mcp.CallToolResult) string {
	if res.StructuredContent == nil {
		return ""
	}
	b, _ := json.Marshal(res.StructuredContent)
	return string(b)
}

func scNotices(res *mcp.CallToolResult) []string {
	var m struct {
		Notices     []string `json:"notices"`
		Diagnostics []string `json:"diagnostics"`
	}
	_ = json.Unmarshal([]byte(scJSON(res)), &m)
	return append(m.Diagnostics, m.Notices...)
}

// payloadCalls are the calls each mode is checked on: a search page with
// a cursor and a notice (an unknown layout), and a read_outline page with
// a cursor, in text and json.
var payloadCalls = []struct {
	name string
	tool string
	args map[string]any
}{
	{"search", "search", map[string]any{"state": "open", "limit": 20}},
	{"search unknown layout", "search", map[string]any{"layout": "heading"}},
	{"read text", "read_outline", map[string]any{"depth": 2, "limit": 30}},
	{"read json", "read_outline", map[string]any{"depth": 2, "limit": 30, "format": "json"}},
}

// TestPayloadModes: per mode, tools/list's output schemas and a search's
// and a read_outline's parts. both: today's results (the reference);
// structured: the structured content identical to both's and matching the
// output schema, the text short, with the cursor and every notice; text:
// no output schema, no structured content, the text identical to both's.
func TestPayloadModes(t *testing.T) {
	l := payloadRepo(t, 600)
	ref, _ := payloadClient(t, l, server.Options{Payload: tools.PayloadBoth}, "test")
	st, instr := payloadClient(t, l, server.Options{Payload: tools.PayloadStructured}, "test")
	tx, _ := payloadClient(t, l, server.Options{Payload: tools.PayloadText}, "test")
	if !strings.Contains(instr, "Payload: structured (set by --payload structured;") {
		t.Errorf("the instructions do not say the mode: %.200s", instr[max(0, len(instr)-300):])
	}
	schemas := outputSchemas(t, ref)
	for name, s := range schemas {
		if s == "" {
			t.Errorf("both: %s has no output schema", name)
		}
	}
	if s := outputSchemas(t, st); s["search"] != schemas["search"] {
		t.Errorf("structured: search's output schema differs from both's")
	}
	for name, s := range outputSchemas(t, tx) {
		if s != "" {
			t.Errorf("text: %s declares an output schema: %.100s", name, s)
		}
	}
	for _, pc := range payloadCalls {
		want := payCall(t, ref, pc.tool, pc.args)
		if want.IsError || want.StructuredContent == nil {
			t.Fatalf("%s: both: %v %.300s", pc.name, want.IsError, resultText(want))
		}
		cursor := nextCursor(want)
		notices := scNotices(want)
		if pc.name == "search unknown layout" && len(notices) == 0 {
			t.Fatalf("%s: no notice to check: %s", pc.name, scJSON(want))
		}
		if pc.name != "search unknown layout" && cursor == "" {
			t.Fatalf("%s: no cursor to check: %.300s", pc.name, scJSON(want))
		}
		matchesSchema(t, pc.name+", both", schemas[pc.tool], want.StructuredContent)

		// structured: complete structured content, a short text
		got := payCall(t, st, pc.tool, pc.args)
		if scJSON(got) != scJSON(want) {
			t.Errorf("%s, structured: the structured content differs from both's:\n%.300s\n%.300s", pc.name, scJSON(got), scJSON(want))
		}
		matchesSchema(t, pc.name+", structured", schemas[pc.tool], got.StructuredContent)
		text := resultText(got)
		switch {
		case text == resultText(want) && len(text) < 512:
			// a text as short as its rendering is kept whole
		case len(text) > 1024 || len(text) >= len(resultText(want)):
			t.Errorf("%s, structured: the text is %d bytes (both: %d), not short:\n%s", pc.name, len(text), len(resultText(want)), text)
		case !strings.Contains(text, tools.ShortMarker):
			t.Errorf("%s, structured: the text does not say where the rows are:\n%s", pc.name, text)
		}
		if cursor != "" && !strings.Contains(text, cursor) {
			t.Errorf("%s, structured: the text lacks the cursor %q:\n%s", pc.name, cursor, text)
		}
		for _, n := range notices {
			if !strings.Contains(text, n) {
				t.Errorf("%s, structured: the text lacks the notice %q:\n%s", pc.name, n, text)
			}
		}
		t.Logf("%s: both %d + %d bytes; structured %d + %d:\n%s", pc.name, len(resultText(want)), len(scJSON(want)), len(text), len(scJSON(got)), text)

		// text: the full text, nothing structured
		got = payCall(t, tx, pc.tool, pc.args)
		if got.StructuredContent != nil {
			t.Errorf("%s, text: structured content sent: %.200s", pc.name, scJSON(got))
		}
		if resultText(got) != resultText(want) {
			t.Errorf("%s, text: the text differs from both's:\n%.300s\n%.300s", pc.name, resultText(got), resultText(want))
		}
	}
	// errors: text and a structured error in structured mode; the kind in
	// the text in text mode
	bad := map[string]any{"node": "3zzzzzzzzzzzz"}
	if e := payCall(t, st, "read_outline", bad); !e.IsError || !strings.Contains(scJSON(e), `"kind"`) || strings.Contains(resultText(e), tools.ShortMarker) {
		t.Errorf("structured: an error is not as in both: %s / %s", resultText(e), scJSON(e))
	}
	if e := payCall(t, tx, "read_outline", bad); !e.IsError || e.StructuredContent != nil || !strings.HasPrefix(resultText(e), "Error (") {
		t.Errorf("text: an error is not text alone with its kind: %s / %s", resultText(e), scJSON(e))
	}
}

// TestPayloadAuto: auto picks structured for a client known to show only
// the structured content, both for any other, and says it once: in the
// instructions and in a line for the operator.
func TestPayloadAuto(t *testing.T) {
	l := payloadRepo(t, 200)
	args := map[string]any{"state": "open", "limit": 10}
	for _, c := range []struct {
		client string
		want   tools.Payload
	}{
		{"claude-code", tools.PayloadStructured},
		{"codex-mcp-client", tools.PayloadStructured},
		{"Visual Studio Code", tools.PayloadStructured},
		{"claude-ai", tools.PayloadBoth},
		{"some-other-client", tools.PayloadBoth},
		{"", tools.PayloadBoth},
	} {
		if got := server.AutoPayload(c.client); got != c.want {
			t.Errorf("AutoPayload(%q) = %s, want %s", c.client, got, c.want)
		}
		var mu sync.Mutex
		var logged []string
		logf := func(f string, a ...any) {
			mu.Lock()
			logged = append(logged, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
		cl, instr := payloadClient(t, l, server.Options{Logf: logf}, c.client)
		named := c.client
		if named == "" {
			named = "(unnamed)"
		}
		if !strings.Contains(instr, fmt.Sprintf("Payload: %s (--payload auto, client %q", c.want, named)) {
			t.Errorf("%q: the instructions do not say %s: %.300s", c.client, c.want, instr[max(0, len(instr)-300):])
		}
		res := payCall(t, cl, "search", args)
		payCall(t, cl, "search", args)
		short := strings.Contains(resultText(res), tools.ShortMarker)
		if short != (c.want == tools.PayloadStructured) || res.StructuredContent == nil {
			t.Errorf("%q: short text %v, structured content %v; want mode %s:\n%.300s", c.client, short, res.StructuredContent != nil, c.want, resultText(res))
		}
		mu.Lock()
		if len(logged) != 1 || !strings.Contains(logged[0], "payload "+string(c.want)) {
			t.Errorf("%q: the operator was told %q; want one line saying %s", c.client, logged, c.want)
		}
		mu.Unlock()
	}
	if _, err := server.NewWithOptions(&tools.Env{Engine: outline.New(l)}, server.Options{Payload: "verbose"}); err == nil {
		t.Error("an unknown payload mode was accepted")
	}
}

// TestPayloadStructuredNotices: in structured mode a page's own notice (a
// read continued after the outline changed) is in the short text and in
// the structured content, with the cursor.
func TestPayloadStructuredNotices(t *testing.T) {
	l := payloadRepo(t, 300)
	st, _ := payloadClient(t, l, server.Options{Payload: tools.PayloadStructured}, "claude-code")
	first := payCall(t, st, "read_outline", map[string]any{"depth": 3, "limit": 10})
	cur := nextCursor(first)
	if cur == "" {
		t.Fatalf("no cursor: %s", scJSON(first))
	}
	if w := payCall(t, st, "insert_after", map[string]any{"text": "a new top bullet"}); w.IsError {
		t.Fatalf("insert: %s", resultText(w))
	}
	next := payCall(t, st, "read_outline", map[string]any{"depth": 3, "limit": 10, "cursor": cur})
	var page struct {
		ChangedSince *struct {
			Message string `json:"message"`
		} `json:"changedSince"`
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal([]byte(scJSON(next)), &page)
	if page.ChangedSince == nil || page.ChangedSince.Message == "" {
		t.Fatalf("the page after a write says no change: %s", scJSON(next))
	}
	text := resultText(next)
	if !strings.Contains(text, tools.ShortMarker) || !strings.Contains(text, page.ChangedSince.Message) || !strings.Contains(text, page.Cursor) {
		t.Errorf("the short text lacks the marker, the change (%q) or the cursor:\n%s", page.ChangedSince.Message, text)
	}
	t.Logf("%d bytes:\n%s", len(text), text)
}

// TestPayloadStructuredWrite: a write's result in structured mode: the
// structured content complete (every created key), the text its summary,
// counts and every notice (a layout Bulleted does not render).
func TestPayloadStructuredWrite(t *testing.T) {
	l := payloadRepo(t, 50)
	st, _ := payloadClient(t, l, server.Options{Payload: tools.PayloadStructured}, "codex-mcp-client")
	nodes := make([]any, 40)
	for i := range nodes {
		nodes[i] = map[string]any{"text": fmt.Sprintf("tick box %d", i), "layout": "checkbox"}
	}
	res := payCall(t, st, "insert_after", map[string]any{"nodes": nodes})
	if res.IsError {
		t.Fatalf("insert: %s", resultText(res))
	}
	var sc struct {
		Summary string `json:"summary"`
		Created []struct {
			RKey string `json:"rkey"`
		} `json:"created"`
		Keys        []string `json:"keys"`
		Notices     []string `json:"notices"`
		Diagnostics []string `json:"diagnostics"`
	}
	if err := json.Unmarshal([]byte(scJSON(res)), &sc); err != nil {
		t.Fatal(err)
	}
	sc.Notices = append(sc.Notices, sc.Diagnostics...)
	if len(sc.Created)+len(sc.Keys) < 40 || sc.Summary == "" || len(sc.Notices) == 0 {
		t.Fatalf("the structured content is not complete (40 keys, a summary, the layout notice): %s", scJSON(res))
	}
	text := resultText(res)
	if !strings.Contains(text, tools.ShortMarker) || !strings.HasPrefix(text, strings.TrimSpace(sc.Summary)) {
		t.Errorf("the text is not the short rendering starting with the summary:\n%s", text)
	}
	for _, n := range sc.Notices {
		if !strings.Contains(text, n) {
			t.Errorf("the text lacks the notice %q:\n%s", n, text)
		}
	}
	t.Logf("text %d bytes, structured %d:\n%s", len(text), len(scJSON(res)), text)
}

// TestPayloadPagesFill: in structured and text modes a read_outline page
// fills the result bound with the one part the client is shown (today's
// both-parts page is about half of it in each), so that the whole
// generated 20k outline reads in at most 30 calls; in both mode a page
// keeps both parts complete within the bound.
func TestPayloadPagesFill(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20k outline")
	}
	l := payloadRepo(t, 20_000)
	cursorIn := regexp.MustCompile(`cursor="([^"]+)"`)
	calls := map[tools.Payload]int{}
	for _, mode := range []tools.Payload{tools.PayloadStructured, tools.PayloadText, tools.PayloadBoth} {
		c, _ := payloadClient(t, l, server.Options{Payload: mode}, "test")
		args := map[string]any{"depth": 50, "limit": 5000}
		rows, small := 0, 0
		for {
			res := payCall(t, c, "read_outline", args)
			calls[mode]++
			if res.IsError {
				t.Fatalf("%s: page %d: %.300s", mode, calls[mode], resultText(res))
			}
			raw, _ := json.Marshal(res)
			if len(raw) > server.MaxResultBytes {
				t.Fatalf("%s: page %d is %d bytes, over the bound", mode, calls[mode], len(raw))
			}
			text := resultText(res)
			rows += strings.Count(text, "·")
			m := cursorIn.FindStringSubmatch(text)
			if m == nil {
				break
			}
			// a page that is not the last fills most of the bound
			if len(raw) < server.MaxResultBytes*3/4 {
				small++
			}
			args = map[string]any{"depth": 50, "limit": 5000, "cursor": m[1]}
			if calls[mode] > 200 {
				t.Fatalf("%s: no end after 200 pages", mode)
			}
		}
		if small > 0 {
			t.Errorf("%s: %d of %d pages used under 3/4 of the %d-byte bound", mode, small, calls[mode], server.MaxResultBytes)
		}
		if mode != tools.PayloadBoth && calls[mode] > 30 {
			t.Errorf("%s: the 20k outline took %d calls, want at most 30", mode, calls[mode])
		}
		t.Logf("%s: %d calls, %d rows", mode, calls[mode], rows)
	}
}
