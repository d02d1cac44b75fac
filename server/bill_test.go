package server_test

// The agent's bill (issue #25): what an agent pays, in calls and bytes, for
// the everyday tasks on a generated 20,000-bullet outline, measured only
// through the public MCP interface (an in-process mcp-go client), so that
// it measures any result format: it follows whatever cursor a result gives
// (structured content's "cursor" or "nextCursor", at the top or in a nested
// object, else the text's last cursor=... hint) and reads record keys,
// wherever they are, as words of 13 TID characters.
//
//	go test ./server -run '^$' -bench AgentBill -benchtime 1x
//
// prints the table and reports each task's calls, bytes and largest result
// as metrics (BULLETED_BILL_N=2080 for another size; -short: 2,000).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// billLimit is the result size the issue asks every result to fit in.
const billLimit = 60_000

// billCall is one tool result as the client received it.
type billCall struct {
	tool       string
	text, sc   int  // bytes of the text content, of the structured content as JSON
	scReplaced bool // structured content is {summary, truncated}: replaced by a note
	scMissing  bool // a successful result without structured content
	textCut    bool // the text carries a "[truncated" marker
	isError    bool
}

func (c billCall) bytes() int { return c.text + c.sc }

// shownText is what a client that shows the model the text content sees
// (Claude Desktop, claude.ai); shownSC what one that shows only the
// structured content when there is some sees (Claude Code, Codex, VS
// Code), else the text.
func (c billCall) shownText() int { return c.text }
func (c billCall) shownSC() int {
	if c.sc > 0 {
		return c.sc
	}
	return c.text
}

// billTask is one task's calls and what they showed.
type billTask struct {
	name          string
	calls         []billCall
	want, found   int // keys the task must show, and how many of them it showed (want 0: not counted)
	twice         int // keys shown on more than one page (reads of one level)
	parts         []string
	rows          int    // markdown rows (export)
	stopped, note string // why paging stopped early; other findings
}

func (t *billTask) sum(f func(billCall) int) int {
	n := 0
	for _, c := range t.calls {
		n += f(c)
	}
	return n
}

func (t *billTask) count(f func(billCall) bool) int {
	n := 0
	for _, c := range t.calls {
		if f(c) {
			n++
		}
	}
	return n
}

func (t *billTask) largest() int {
	m := 0
	for _, c := range t.calls {
		m = max(m, c.bytes())
	}
	return m
}

// billHarness is a server on an embedded store holding a generated outline,
// and an in-process client of it.
type billHarness struct {
	srv    *mcpserver.MCPServer
	c      *client.Client
	engine *outline.Engine
	recs   []store.Record
	big    string   // the bullet with the most children
	kids   []string // its children's keys
	review string   // the "budget review" bullet
}

func newBillHarness(tb testing.TB, n int) *billHarness {
	return newBillHarnessWith(tb, n, nil)
}

// newBillHarnessWith is newBillHarness with the generated records changed
// by seed (nil: none) before they are written.
func newBillHarnessWith(tb testing.TB, n int, seed func([]store.Record)) *billHarness {
	tb.Helper()
	l, err := store.OpenLocal(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	h := &billHarness{recs: outlinegen.Generate(n, 1)}
	if seed != nil {
		seed(h.recs)
	}
	start := time.Now()
	ws := outlinegen.Writes(h.recs, l.DID().String())
	for rest := ws; len(rest) > 0; {
		k := min(len(rest), store.MaxBatch)
		if _, err := l.Apply(context.Background(), "", rest[:k]); err != nil {
			tb.Fatal(err)
		}
		rest = rest[k:]
	}
	tb.Logf("seeded %d records in %v", len(ws), time.Since(start).Round(time.Millisecond))
	// the ground truth, from the generated records
	kids := map[string][]string{}
	for _, r := range h.recs {
		if r.Collection != "app.bulleted.node" {
			continue
		}
		if p, _ := r.Value.Text("parent"); p != "" {
			pk := p[strings.LastIndexByte(p, '/')+1:]
			kids[pk] = append(kids[pk], r.RKey)
		}
		if r.Value.Get("text") == outlinegen.BudgetReview {
			h.review = r.RKey
		}
	}
	for k, ks := range kids {
		if len(ks) > len(h.kids) || len(ks) == len(h.kids) && k < h.big {
			h.big, h.kids = k, ks
		}
	}
	if h.review == "" {
		tb.Fatal("the outline has no budget review bullet")
	}
	h.engine = outline.New(l)
	h.connect(tb, server.Options{})
	return h
}

// connect gives h a server over its engine with options o, and an
// in-process client of it (named "bill": auto gives it both parts).
func (h *billHarness) connect(tb testing.TB, o server.Options) {
	tb.Helper()
	var err error
	if h.srv, err = server.NewWithOptions(&tools.Env{Engine: h.engine}, o); err != nil {
		tb.Fatal(err)
	}
	if h.c, err = client.NewInProcessClient(h.srv); err != nil {
		tb.Fatal(err)
	}
	c := h.c
	tb.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := h.c.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "bill", Version: "1"}
	if _, err := h.c.Initialize(ctx, init); err != nil {
		tb.Fatal(err)
	}
}

// modeBill is one payload mode's bill (serve --payload): the wire bytes of
// reading every child of the big level (text, and json flat) and of the
// 11 searches' first pages, on a server in that mode over h's outline.
type modeBill struct {
	mode                     tools.Payload
	readText, readJSON, firs *billTask
}

func (h *billHarness) payloadBills(tb testing.TB) []modeBill {
	tb.Helper()
	var out []modeBill
	for _, mode := range []tools.Payload{tools.PayloadBoth, tools.PayloadStructured, tools.PayloadText} {
		m := &billHarness{engine: h.engine, recs: h.recs, big: h.big, kids: h.kids, review: h.review}
		m.connect(tb, server.Options{Payload: mode})
		b := modeBill{mode: mode, readText: &billTask{name: "read big level, text"}, readJSON: &billTask{name: "read big level, json"}, firs: &billTask{name: "11 searches, first page each"}}
		m.drain(tb, b.readText, "read_outline", map[string]any{"node": h.big, "depth": 1}, nil, nil)
		m.drain(tb, b.readJSON, "read_outline", map[string]any{"node": h.big, "depth": 1, "format": "json", "flat": true, "limit": 5000}, nil, nil)
		for _, q := range billSearches {
			args := map[string]any{"limit": 200}
			for k, v := range q {
				args[k] = v
			}
			_, c := m.call(tb, "search", args)
			b.firs.calls = append(b.firs.calls, c)
		}
		out = append(out, b)
	}
	return out
}

// payloadTable renders the bills per mode.
func payloadTable(bills []modeBill) string {
	var b strings.Builder
	b.WriteString("\nWire bytes per payload mode (serve --payload; text + structured content as JSON):\n\n| mode | read big level, text | read big level, json | 11 searches' first pages |\n|---|---|---|---|\n")
	cell := func(t *billTask) string {
		return fmt.Sprintf("%d calls, %s (text %s / structured %s)", len(t.calls), kb(t.sum(billCall.bytes)), kb(t.sum(func(c billCall) int { return c.text })), kb(t.sum(func(c billCall) int { return c.sc })))
	}
	for _, m := range bills {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", m.mode, cell(m.readText), cell(m.readJSON), cell(m.firs))
	}
	return b.String()
}

// call makes one tool call and measures its result.
func (h *billHarness) call(tb testing.TB, tool string, args map[string]any) (*mcp.CallToolResult, billCall) {
	tb.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := h.c.CallTool(context.Background(), req)
	if err != nil {
		tb.Fatalf("%s %v: %v", tool, args, err)
	}
	c := billCall{tool: tool, isError: res.IsError}
	text := resultText(res)
	c.text = len(text)
	c.textCut = strings.Contains(text, "[truncated")
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		c.sc = len(raw)
		if m, ok := res.StructuredContent.(map[string]any); ok && m["truncated"] == true && m["summary"] != nil && len(m) <= 3 {
			c.scReplaced = true
		}
	} else if !res.IsError {
		c.scMissing = true
	}
	return res, c
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

var cursorHint = regexp.MustCompile(`cursor=("(?:[^"\\]|\\.)*"|[^\s"',;)]+)`)

// nextCursor is the cursor a result gives for its next page ("" : none):
// the structured content's "cursor" or "nextCursor" (at the top, else in
// a nested object), else the last cursor=... hint of the text.
func nextCursor(res *mcp.CallToolResult) string {
	var find func(m map[string]any, depth int) string
	find = func(m map[string]any, depth int) string {
		for _, k := range []string{"nextCursor", "cursor"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
		if depth > 3 {
			return ""
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if sub, ok := m[k].(map[string]any); ok {
				if s := find(sub, depth+1); s != "" {
					return s
				}
			}
		}
		return ""
	}
	if res.StructuredContent != nil {
		var m map[string]any
		if raw, err := json.Marshal(res.StructuredContent); err == nil && json.Unmarshal(raw, &m) == nil {
			if s := find(m, 0); s != "" {
				return s
			}
		}
	}
	all := cursorHint.FindAllStringSubmatch(resultText(res), -1)
	if len(all) == 0 {
		return ""
	}
	c := all[len(all)-1][1]
	if strings.HasPrefix(c, `"`) {
		if u, err := strconv.Unquote(c); err == nil {
			return u
		}
	}
	return c
}

var tidWord = regexp.MustCompile(`\b[2-7a-z]{13}\b`)

// keysIn counts in seen, for each key of want that res shows (text or
// structured content, leaving out the cursor it gives), one more page.
func keysIn(res *mcp.CallToolResult, want map[string]bool, seen map[string]int) {
	cur := nextCursor(res)
	page := map[string]bool{}
	scan := func(s string) {
		if cur != "" {
			s = strings.ReplaceAll(s, cur, "")
		}
		for _, k := range tidWord.FindAllString(s, -1) {
			if want[k] {
				page[k] = true
			}
		}
	}
	scan(resultText(res))
	if res.StructuredContent != nil {
		raw, _ := json.Marshal(res.StructuredContent)
		scan(string(raw))
	}
	for k := range page {
		seen[k]++
	}
}

// twice counts the keys shown on more than one page.
func twice(seen map[string]int) int {
	n := 0
	for _, c := range seen {
		if c > 1 {
			n++
		}
	}
	return n
}

var mdRow = regexp.MustCompile(`(?m)^[ \t]*(?:[-*+] |#{1,6} )`)

// drain calls tool with args, then again with each cursor a result gives,
// to the end.
func (h *billHarness) drain(tb testing.TB, t *billTask, tool string, args map[string]any, want map[string]bool, seen map[string]int) {
	tb.Helper()
	a := map[string]any{}
	for k, v := range args {
		a[k] = v
	}
	used := map[string]bool{}
	for {
		res, c := h.call(tb, tool, a)
		t.calls = append(t.calls, c)
		if want != nil {
			keysIn(res, want, seen)
		}
		if t.name == "export markdown" {
			t.rows += len(mdRow.FindAllString(resultText(res), -1))
		}
		if res.IsError {
			t.stopped = fmt.Sprintf("%s answered an error: %.200s", tool, resultText(res))
			return
		}
		cur := nextCursor(res)
		if cur == "" {
			return
		}
		if used[cur] || len(t.calls) >= 2000 {
			t.stopped = fmt.Sprintf("%s gave cursor %q again (or 2,000 calls)", tool, cur)
			return
		}
		used[cur] = true
		a["cursor"] = cur
	}
}

// billSearches are task (c)'s 11 searches: tags, mentions, state, dates
// (metadata ranges and a date in the text), 200 hits a page.
var billSearches = []map[string]any{
	{"tags": []any{"release"}},
	{"tags": []any{"health"}},
	{"tags": []any{"design"}},
	{"mentions": []any{"friend.example.com"}},
	{"mentions": []any{"alice.example.com"}},
	{"state": "open"},
	{"state": "done"},
	{"created_from": "2026-03-01", "created_to": "2026-03-31"},
	{"completed_from": "2026-06-01", "completed_to": "2026-06-30"},
	{"state": "open", "created_from": "2026-10-01"},
	{"text": "2026-05"},
}

// expectedHits: the node keys a search must find, from the generated
// records (not from the server).
func expectedHits(recs []store.Record, q map[string]any) map[string]bool {
	day := func(s string, end bool) time.Time {
		t, _ := time.Parse("2006-01-02", s)
		if end {
			t = t.Add(24*time.Hour - time.Nanosecond)
		}
		return t
	}
	in := func(v any, from, to any) bool {
		s, _ := v.(string)
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return false
		}
		if f, ok := from.(string); ok && t.Before(day(f, false)) {
			return false
		}
		if f, ok := to.(string); ok && t.After(day(f, true)) {
			return false
		}
		return true
	}
	out := map[string]bool{}
	for _, r := range recs {
		if r.Collection != "app.bulleted.node" {
			continue
		}
		v := r.Value.Map()
		text, _ := v["text"].(string)
		todo, done := v["layout"] == "todo", v["completedAt"] != nil
		ok := true
		for k, want := range q {
			switch k {
			case "tags":
				ok = ok && strings.Contains(strings.ToLower(text), "#"+want.([]any)[0].(string))
			case "mentions":
				ok = ok && strings.Contains(strings.ToLower(text), "@"+want.([]any)[0].(string))
			case "state":
				ok = ok && todo && done == (want == "done")
			case "created_from":
				ok = ok && in(v["createdAt"], want, q["created_to"])
			case "completed_from":
				ok = ok && in(v["completedAt"], want, q["completed_to"])
			case "text":
				ok = ok && strings.Contains(strings.ToLower(text), want.(string))
			}
		}
		if ok {
			out[r.RKey] = true
		}
	}
	return out
}

// run is one bill: every task, in order, and tools/list.
func (h *billHarness) run(tb testing.TB) []*billTask {
	tb.Helper()
	kids := map[string]bool{}
	for _, k := range h.kids {
		kids[k] = true
	}
	var tasks []*billTask
	task := func(name string) *billTask {
		t := &billTask{name: name}
		tasks = append(tasks, t)
		return t
	}
	// (a) every child of the big level, text
	t := task("read big level, text")
	seen := map[string]int{}
	h.drain(tb, t, "read_outline", map[string]any{"node": h.big, "depth": 1}, kids, seen)
	t.want, t.found, t.twice = len(kids), len(seen), twice(seen)
	// (b) the same as json
	t = task("read big level, json flat limit=5000")
	seen = map[string]int{}
	h.drain(tb, t, "read_outline", map[string]any{"node": h.big, "depth": 1, "format": "json", "flat": true, "limit": 5000}, kids, seen)
	t.want, t.found, t.twice = len(kids), len(seen), twice(seen)
	// (c) 11 searches, 200 a page
	t = task("11 searches, limit=200")
	for _, q := range billSearches {
		want := expectedHits(h.recs, q)
		seen := map[string]int{}
		args := map[string]any{"limit": 200}
		for k, v := range q {
			args[k] = v
		}
		calls := len(t.calls)
		h.drain(tb, t, "search", args, want, seen)
		t.want += len(want)
		t.found += len(seen)
		part := &billTask{calls: t.calls[calls:]}
		q, _ := json.Marshal(q)
		t.parts = append(t.parts, fmt.Sprintf("%s: %d call(s), %s, %d/%d hits", q, len(part.calls), kb(part.sum(billCall.bytes)), len(seen), len(want)))
	}
	// (c') the same 11 searches, the first page of each: what an agent that
	// reads the first 200 hits and narrows the query pays
	t = task("11 searches, first page each")
	for _, q := range billSearches {
		args := map[string]any{"limit": 200}
		for k, v := range q {
			args[k] = v
		}
		_, c := h.call(tb, "search", args)
		t.calls = append(t.calls, c)
	}
	// (d) export the whole outline as markdown, page by page
	t = task("export markdown")
	h.drain(tb, t, "read_outline", map[string]any{"format": "markdown", "depth": 50}, nil, nil)
	// (e) find "budget review" and complete it: a search, then complete
	t = task("find budget review, complete it")
	res, c := h.call(tb, "search", map[string]any{"text": "budget review"})
	t.calls = append(t.calls, c)
	seen = map[string]int{}
	keysIn(res, map[string]bool{h.review: true}, seen)
	if seen[h.review] == 0 {
		t.note = "the search did not show the bullet's key"
	}
	_, c = h.call(tb, "complete_todo", map[string]any{"node": h.review})
	t.calls = append(t.calls, c)
	t.want = 1
	if tr, err := h.engine.Tree(context.Background()); err == nil {
		if it := tr.Nodes.Get(h.review); it != nil && it.Str("completedAt") != "" {
			t.found = 1 // completed, as the repository reads back
		}
	}
	return tasks
}

// toolsList returns the bytes of the tools/list result, with and without
// the output schemas, as the server sends it.
func (h *billHarness) toolsList(tb testing.TB) (with, without, model int) {
	tb.Helper()
	msg := h.srv.HandleMessage(context.Background(), json.RawMessage(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	raw, err := json.Marshal(msg)
	if err != nil {
		tb.Fatal(err)
	}
	var resp struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil || len(resp.Result) == 0 {
		tb.Fatalf("tools/list answered %.300s", raw)
	}
	var list struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(resp.Result, &list); err != nil {
		tb.Fatal(err)
	}
	for _, t := range list.Tools {
		delete(t, "outputSchema")
	}
	bare, _ := json.Marshal(map[string]any{"tools": list.Tools})
	all, _ := json.Marshal(map[string]any{"tools": json.RawMessage(mustField(tb, resp.Result, "tools"))})
	// what a model is shown: the name, description and input schema; _meta
	// (the MCP Apps view links), the titles (the display name) and the
	// annotations (behaviour hints) are for the host
	for _, t := range list.Tools {
		delete(t, "_meta")
		delete(t, "title")
		delete(t, "annotations")
	}
	shown, _ := json.Marshal(map[string]any{"tools": list.Tools})
	return len(all), len(bare), len(shown)
}

func mustField(tb testing.TB, raw json.RawMessage, k string) json.RawMessage {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		tb.Fatal(err)
	}
	return m[k]
}

func kb(n int) string {
	if n >= 1_000_000 {
		return fmt.Sprintf("%.2f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f KB", float64(n)/1e3)
}

// billTable renders the bill as a markdown table, with its findings.
func billTable(n int, tasks []*billTask, with, without int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe agent's bill on a generated %d-bullet outline (wire bytes = text + structured content as JSON; a model is shown one part: the text under Claude Desktop, only the structured content under Claude Code, Codex, VS Code):\n\n", n)
	b.WriteString("| task | calls | wire bytes | largest result | text / structured | model shown: text clients | model shown: structured clients | results > 60 KB | structured replaced / missing | text cut | shown |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	total, largest, over, replaced := 0, 0, 0, 0
	for _, t := range tasks {
		shown := ""
		switch {
		case t.want > 0:
			shown = fmt.Sprintf("%d / %d", t.found, t.want)
			if t.twice > 0 {
				shown += fmt.Sprintf(" (%d on two pages)", t.twice)
			}
		case t.rows > 0:
			shown = fmt.Sprintf("%d rows", t.rows)
		}
		o := t.count(func(c billCall) bool { return c.bytes() > billLimit })
		r := t.count(func(c billCall) bool { return c.scReplaced })
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s / %s | %s | %s | %d | %d / %d | %d | %s |\n", t.name, len(t.calls), kb(t.sum(billCall.bytes)), kb(t.largest()),
			kb(t.sum(func(c billCall) int { return c.text })), kb(t.sum(func(c billCall) int { return c.sc })),
			kb(t.sum(billCall.shownText)), kb(t.sum(billCall.shownSC)), o, r,
			t.count(func(c billCall) bool { return c.scMissing }), t.count(func(c billCall) bool { return c.textCut }), shown)
		total += t.sum(billCall.bytes)
		largest = max(largest, t.largest())
		over += o
		replaced += r
	}
	fmt.Fprintf(&b, "\ntools/list: %s with output schemas, %s without. All tasks: %s, largest result %s, %d result(s) over 60 KB, %d with structured content replaced by {summary, truncated}.\n",
		kb(with), kb(without), kb(total), kb(largest), over, replaced)
	for _, t := range tasks {
		if t.stopped != "" {
			fmt.Fprintf(&b, "- %s: stopped: %s\n", t.name, t.stopped)
		}
		if t.note != "" {
			fmt.Fprintf(&b, "- %s: %s\n", t.name, t.note)
		}
		for _, p := range t.parts {
			fmt.Fprintf(&b, "- %s\n", p)
		}
		if e := t.count(func(c billCall) bool { return c.isError }); e > 0 {
			fmt.Fprintf(&b, "- %s: %d error result(s)\n", t.name, e)
		}
	}
	return b.String()
}

// metricName makes a task name a metric unit (no spaces).
func metricName(s string) string {
	s = strings.NewReplacer(" ", "-", ",", "", "=", "", "\"", "").Replace(s)
	return strings.ToLower(s)
}

// BenchmarkAgentBill measures issue #25's tasks on a generated 20,000-bullet
// outline (5 levels, a level of about 2,100 children, todos, notes, tags,
// mentions, dates, headings, a "budget review" at depth 4): for each, the
// calls, the bytes (text + structured content as JSON) and the largest
// result, and tools/list with and without output schemas. Each iteration
// runs the whole bill (the todo ticked by the last task is unticked between
// iterations, uncounted); bytes and calls do not depend on the iteration.
func BenchmarkAgentBill(b *testing.B) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	if s := os.Getenv("BULLETED_BILL_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("BULLETED_BILL_N=%q: want a number of bullets, at least 100", s)
		}
	}
	h := newBillHarness(b, n)
	var tasks []*billTask
	first := true
	for b.Loop() {
		if !first {
			b.StopTimer()
			h.call(b, "complete_todo", map[string]any{"node": h.review, "completed": false})
			b.StartTimer()
		}
		first = false
		tasks = h.run(b)
	}
	with, without, model := h.toolsList(b)
	// printed, not logged: a benchmark's log is cut to its first lines
	fmt.Println(billTable(n, tasks, with, without))
	fmt.Printf("tools/list as a model is shown it (name, description, input schema): %.1f KB\n", float64(model)/1000)
	fmt.Println(h.floor(b))
	bills := h.payloadBills(b)
	fmt.Println(payloadTable(bills))
	for _, m := range bills {
		b.ReportMetric(float64(m.readText.sum(billCall.bytes)), "payload-"+string(m.mode)+"-read-text-B")
		b.ReportMetric(float64(m.readJSON.sum(billCall.bytes)), "payload-"+string(m.mode)+"-read-json-B")
		b.ReportMetric(float64(m.firs.sum(billCall.bytes)), "payload-"+string(m.mode)+"-first-pages-B")
	}
	for _, t := range tasks {
		m := metricName(t.name)
		b.ReportMetric(float64(len(t.calls)), m+"-calls")
		b.ReportMetric(float64(t.sum(billCall.bytes)), m+"-B")
		b.ReportMetric(float64(t.largest()), m+"-maxB")
		b.ReportMetric(float64(t.sum(billCall.shownText)), m+"-shownText-B")
		b.ReportMetric(float64(t.sum(billCall.shownSC)), m+"-shownSC-B")
	}
	over, replaced := 0, 0
	for _, t := range tasks {
		over += t.count(func(c billCall) bool { return c.bytes() > billLimit })
		replaced += t.count(func(c billCall) bool { return c.scReplaced || c.scMissing })
	}
	b.ReportMetric(float64(over), "results-over-60KB")
	b.ReportMetric(float64(replaced), "structured-replaced-or-missing")
	b.ReportMetric(float64(with), "tools/list-B")
	b.ReportMetric(float64(without), "tools/list-noOutput-B")
	b.ReportMetric(float64(model), "tools/list-model-B")
}

// TestAgentBillHarness: the harness itself, and issue #25's targets as a
// model is shown each result (one part: the text, or the structured
// content), so that a regression fails here. On the 20,000-bullet
// outline (-short: 1,500, with the targets scaled: reads by the big level's
// children, searches by the floor of their hits) it follows the cursors to
// the end (every child of the big level shown, in text and in json; every
// search's expected hits), and the last task completes the "budget review"
// todo as the repository reads back. Checked:
//   - read every child of the big level: ≤ 150 KB in text, ≤ 300 KB in json
//     (per 2,000 children), in the part each client shows;
//   - the 11 searches' first pages: ≤ 200 KB in the text, ≤ 200 KB in the
//     structured content (-short: ≤ 2.7 × the floor of their hits);
//   - find and complete: ≤ 2 calls, ≤ 2 KB on the wire;
//   - no result over 60 KB, structured content on every result, never
//     replaced;
//   - tools/list ≤ 10 KB as a model is shown it.
func TestAgentBillHarness(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 1_500
	}
	h := newBillHarness(t, n)
	tasks := h.run(t)
	with, without, model := h.toolsList(t)
	floor := h.floor(t)
	t.Log(billTable(n, tasks, with, without), "\n", floor)
	if model > 10*1024 {
		t.Errorf("tools/list as a model is shown it (name, description, input schema): %d bytes, over 10 KB", model)
	}
	for _, tk := range tasks {
		if tk.stopped != "" || tk.want != tk.found || tk.twice != 0 || len(tk.calls) == 0 {
			t.Errorf("%s: %d calls, shown %d of %d; %s", tk.name, len(tk.calls), tk.found, tk.want, tk.stopped)
		}
		for i, c := range tk.calls {
			if c.bytes() > billLimit || c.scReplaced || c.scMissing || c.textCut {
				t.Errorf("%s, call %d: %d bytes (text %d, structured %d), structured replaced %v, missing %v, text cut %v", tk.name, i+1, c.bytes(), c.text, c.sc, c.scReplaced, c.scMissing, c.textCut)
			}
		}
	}
	if tasks[4].rows < n {
		t.Errorf("the export showed %d markdown rows of %d bullets", tasks[4].rows, n)
	}
	if with <= without || without < 1000 {
		t.Errorf("tools/list %d bytes with output schemas, %d without", with, without)
	}
	// per part, as a model is shown it
	part := func(name string, got, limit int) {
		t.Helper()
		if got > limit {
			t.Errorf("%s: %s, over the target %s", name, kb(got), kb(limit))
		} else {
			t.Logf("%s: %s (target %s)", name, kb(got), kb(limit))
		}
	}
	kids := len(h.kids)
	part("read big level, text, shown by text clients", tasks[0].sum(billCall.shownText), 150_000*kids/2000)
	part("read big level, json, shown by text clients", tasks[1].sum(billCall.shownText), 300_000*kids/2000)
	part("read big level, json, shown by structured clients", tasks[1].sum(billCall.shownSC), 300_000*kids/2000)
	search := 200_000
	if n != 20_000 {
		search = floor.first() * 27 / 10
	}
	part("11 searches' first pages, shown by text clients", tasks[3].sum(billCall.shownText), search)
	part("11 searches' first pages, shown by structured clients", tasks[3].sum(billCall.shownSC), search)
	if fc := tasks[5]; len(fc.calls) > 2 || fc.sum(billCall.bytes) > 2048 {
		t.Errorf("find and complete: %d calls, %d bytes on the wire; want ≤ 2 and ≤ 2 KB", len(fc.calls), fc.sum(billCall.bytes))
	}
	// per payload mode: structured sends the structured content in full
	// and a short text, so the 11 first pages fit the target on the wire
	bills := h.payloadBills(t)
	t.Log(payloadTable(bills))
	for _, m := range bills {
		for _, tk := range []*billTask{m.readText, m.readJSON, m.firs} {
			for i, c := range tk.calls {
				if c.isError || c.bytes() > billLimit || (m.mode == tools.PayloadText) != (c.sc == 0) {
					t.Errorf("payload %s, %s, call %d: error %v, %d bytes, structured %d bytes", m.mode, tk.name, i+1, c.isError, c.bytes(), c.sc)
				}
			}
		}
		if m.mode == tools.PayloadStructured {
			part("11 searches' first pages, payload structured, on the wire", m.firs.sum(billCall.bytes), search)
		}
	}
}

// nextCursor finds a cursor wherever a result format may put it.
func TestBillNextCursor(t *testing.T) {
	for _, c := range []struct {
		res  *mcp.CallToolResult
		want string
	}{
		{mcp.NewToolResultStructured(map[string]any{"cursor": "abc"}, "rows"), "abc"},
		{mcp.NewToolResultStructured(map[string]any{"nextCursor": "n1", "cursor": ""}, "rows"), "n1"},
		{mcp.NewToolResultStructured(map[string]any{"page": map[string]any{"nextCursor": "deep"}}, "rows"), "deep"},
		{mcp.NewToolResultText(`- a ·3kaaaaaaaaaaa` + "\n" + `(more matches: call search again with the same filters and cursor="q.x y")`), "q.x y"},
		{mcp.NewToolResultText(`call read_outline again with cursor=Zm9v; 3 bullet(s) marked`), "Zm9v"},
		{mcp.NewToolResultStructured(map[string]any{"truncated": true, "summary": "cut"}, `... cursor="t1" ... cursor="t2"`), "t2"},
		{mcp.NewToolResultStructured(map[string]any{"hits": []any{}}, "No bullets match."), ""},
	} {
		if got := nextCursor(c.res); got != c.want {
			t.Errorf("%v: cursor %q, want %q", c.res, got, c.want)
		}
	}
}

// billFloor is the least any complete answer to the 11 searches could
// weigh: each hit's record key (13 bytes) and its own text, nothing else (no
// separator, no path, no state, no cursor), for every hit and for the hits
// a first page of limit=200 holds (the first 200 in the outline's order).
// parents counts the distinct parents of the first pages' hits, and
// pathB the bytes of their paths as the server gives them (each ancestor
// clipped at 32 characters, joined by " › "), once per parent.
type billFloor struct {
	hits, textB, firstHits, firstTextB, firstParents, firstPathB int
}

func (f billFloor) all() int   { return f.hits*13 + f.textB }
func (f billFloor) first() int { return f.firstHits*13 + f.firstTextB }

func (h *billHarness) floor(tb testing.TB) billFloor {
	tb.Helper()
	tr, err := h.engine.Tree(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	// the outline's order, and each bullet's path
	order := map[string]int{}
	path := map[string]string{}
	var walk func(it *outline.Item, crumbs []string)
	walk = func(it *outline.Item, crumbs []string) {
		if it.Mirror {
			return
		}
		order[it.Key()] = len(order)
		path[it.Key()] = strings.Join(crumbs, " › ")
		crumbs = append(crumbs[:len(crumbs):len(crumbs)], clipRunes(strings.ReplaceAll(it.Str("text"), "\n", " "), 32))
		for c := range it.Children.Items() {
			walk(c, crumbs)
		}
	}
	for it := range tr.Roots.Items() {
		walk(it, nil)
	}
	text := map[string]string{}
	for _, r := range h.recs {
		if r.Collection == "app.bulleted.node" {
			text[r.RKey], _ = r.Value.Text("text")
		}
	}
	var f billFloor
	for _, q := range billSearches {
		var keys []string
		for k := range expectedHits(h.recs, q) {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b string) int { return order[a] - order[b] })
		parents := map[string]bool{}
		for i, k := range keys {
			f.hits++
			f.textB += len(text[k])
			if i < 200 {
				f.firstHits++
				f.firstTextB += len(text[k])
				if p := path[k]; !parents[p] {
					parents[p] = true
					f.firstParents++
					f.firstPathB += len(p)
				}
			}
		}
	}
	return f
}

func clipRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func (f billFloor) String() string {
	return fmt.Sprintf("The floor of the 11 searches (each hit's 13-byte key and its own text, nothing else): every hit %d hits, %s (texts %s); first pages (≤ 200 hits each) %d hits, %s (texts %s); their %d distinct paths weigh %s more, once each.",
		f.hits, kb(f.all()), kb(f.textB), f.firstHits, kb(f.first()), kb(f.firstTextB), f.firstParents, kb(f.firstPathB))
}

// The bulk tasks (issue #40): each task an agent asks in one sentence, done
// through the public interface on the generated outline, with its calls,
// the bytes each kind of client is shown, and the floor: the least any
// complete answer needs. The floor of a task is, for every call, the one
// sentence that says what happened with its counts and where things went
// (as bulkFloor spells it), the operation's id (for undo), the keys the
// next call needs, and a sample of up to 10 of the keys it touched (14
// bytes each: 13 and a separator); a dry run's plan id instead of the
// operation's; for
// "what changed", every change's key, kind and text, since that list is the
// answer. Nothing the tool adds (before/after views, plan ids, costs, next
// steps) is in the floor.

// bulkSeed changes the generated records so that the tasks have something
// to do: " #old" at the end of 1 bullet in 200 and " #older" at the end of
// 1 in 1,600 (with their facets), and " FY2026 plan" at the end of every
// 20th child of the biggest level.
func bulkSeed(recs []store.Record) {
	kids := map[string][]int{}
	for i, r := range recs {
		if r.Collection == "app.bulleted.node" {
			p, _ := r.Value.Text("parent")
			kids[p] = append(kids[p], i)
		}
	}
	big := ""
	for p, ks := range kids {
		if p != "" && (len(ks) > len(kids[big]) || len(ks) == len(kids[big]) && p < big) {
			big = p
		}
	}
	appendText := func(i int, s, tag string) {
		v := recs[i].Value.Map()
		t, _ := v["text"].(string)
		if tag != "" {
			fs, _ := v["facets"].([]any)
			v["facets"] = append(fs[:len(fs):len(fs)], map[string]any{"index": map[string]any{"byteStart": int64(len(t) + 1), "byteEnd": int64(len(t) + len(s))},
				"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#tag", "tag": tag}}})
		}
		v["text"] = t + s
		recs[i].Value = store.MustValue(v)
	}
	n := 0
	for i, r := range recs {
		if r.Collection != "app.bulleted.node" || r.Value.Get("text") == outlinegen.BudgetReview {
			continue
		}
		switch n++; {
		case n%1600 == 9:
			appendText(i, " #older", "older")
		case n%200 == 7:
			appendText(i, " #old", "old")
		}
	}
	for j, i := range kids[big] {
		if j%20 == 10 {
			appendText(i, " FY2026 plan", "")
		}
	}
}

// bulkTask is one bulk task's bill.
type bulkTask struct {
	billTask
	id    string // the metric's name
	floor int
	check string // what the read back found wrong ("": right)
}

// bulkFloor is the floor of one write's answer: sentence (counts and where
// filled in), the operation's id (what undo takes: " Operation " and 13
// bytes), the keys the next call needs, and up to 10 sample keys.
func bulkFloor(sentence string, next, touched int) int {
	return len(sentence) + len(" Operation ") + 13 + 14*next + 14*min(touched, 10)
}

// resultRev is the rev of the commit a write's result names.
func resultRev(res *mcp.CallToolResult) string {
	m, _ := res.StructuredContent.(map[string]any)
	if m == nil {
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &m)
	}
	s, _ := m["rev"].(string)
	return s
}

// resultPlan is the plan id a dry run's result gives.
func resultPlan(res *mcp.CallToolResult) string {
	m, _ := res.StructuredContent.(map[string]any)
	if m == nil {
		raw, _ := json.Marshal(res.StructuredContent)
		json.Unmarshal(raw, &m)
	}
	s, _ := m["plan"].(string)
	return s
}

// bulk runs the bulk tasks on h (seeded by bulkSeed), in order, each
// checked by reading the outline back from the engine.
func (h *billHarness) bulk(tb testing.TB) []*bulkTask {
	tb.Helper()
	ctx := context.Background()
	tree := func() *outline.Tree {
		tr, err := h.engine.Tree(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		return tr
	}
	var tasks []*bulkTask
	var cur *bulkTask
	task := func(id, name string) *bulkTask {
		cur = &bulkTask{billTask: billTask{name: name}, id: id}
		tasks = append(tasks, cur)
		return cur
	}
	do := func(tool string, args map[string]any) *mcp.CallToolResult {
		res, c := h.call(tb, tool, args)
		cur.calls = append(cur.calls, c)
		if os.Getenv("BULLETED_BILL_SHOW") != "" {
			raw, _ := json.Marshal(res.StructuredContent)
			fmt.Printf("=== %s %v\n--- text:\n%s\n--- structured:\n%s\n", tool, args, resultText(res), raw)
		}
		if res.IsError {
			cur.check += fmt.Sprintf("%s answered an error: %.300s; ", tool, resultText(res))
		}
		return res
	}
	fail := func(f string, a ...any) { cur.check += fmt.Sprintf(f, a...) + "; " }

	// the level to archive: the big one (a level of leaves, so its done
	// todos are the done todos under it), and its done todos
	tr := tree()
	level, done := h.big, []string{}
	for c := range tr.Nodes.Get(level).Children.Items() {
		if c.Str("layout") == "todo" && c.Str("completedAt") != "" {
			done = append(done, c.Key())
		}
	}
	// (a) every done todo of the level under a new Archive bullet, its first child
	task("archive", fmt.Sprintf("archive the %d done todos of a %d-child level", len(done), tr.Nodes.Get(level).Children.Len()))
	res := do("insert_after", map[string]any{"parent": level, "position": "first", "text": "Archive"})
	archive := ""
	created := tidWord.FindAllString(resultText(res), -1)
	if m, ok := res.StructuredContent.(map[string]any); ok {
		raw, _ := json.Marshal(m["created"])
		if ks := tidWord.FindAllString(string(raw), -1); len(ks) > 0 {
			created = ks
		}
	}
	if len(created) > 0 {
		archive = created[0]
	}
	do("move_node", map[string]any{"where": map[string]any{"state": "done", "under": level}, "parent": archive})
	cur.floor = bulkFloor("Created Archive.", 1, 0) + bulkFloor(fmt.Sprintf("Moved %d bullets under Archive.", len(done)), 0, len(done))
	tr = tree()
	if a := tr.Nodes.Get(archive); a == nil {
		fail("no Archive bullet %q", archive)
	} else {
		var got []string
		for c := range a.Children.Items() {
			got = append(got, c.Key())
		}
		if !slices.Equal(got, done) {
			fail("the Archive holds %d bullets, want the %d done todos in order", len(got), len(done))
		}
	}

	// (b) #old → #new everywhere, never #older
	old, older := 0, 0
	for _, it := range tr.Nodes.All() {
		t := it.Str("text")
		if strings.HasSuffix(t, " #old") {
			old++
		}
		if strings.HasSuffix(t, " #older") {
			older++
		}
	}
	task("rename", fmt.Sprintf("rename #old to #new (%d bullets; %d #older)", old, older))
	// the selection holds the #older bullets too: the rename must leave them
	do("update_node", map[string]any{"where": map[string]any{"text": "#old"}, "find": "#old", "replace": "#new"})
	cur.floor = bulkFloor(fmt.Sprintf("Renamed #old to #new in %d bullets.", old), 0, old)
	newN, olderN := 0, 0
	for _, it := range tree().Nodes.All() {
		t := it.Str("text")
		switch {
		case strings.HasSuffix(t, " #new"):
			newN++
		case strings.HasSuffix(t, " #older"):
			olderN++
		case strings.Contains(t, "#old") || strings.Contains(t, "#newer"):
			fail("%q", t)
		}
	}
	if newN != old || olderN != older {
		fail("%d #new (want %d), %d #older (want %d)", newN, old, olderN, older)
	}

	// (c) a literal replace across a selection
	fy := 0 // under the big level, the Archive included
	for _, c := range tr.Nodes.All() {
		if strings.Contains(c.Str("text"), "FY2026") {
			fy++
		}
	}
	task("replace", fmt.Sprintf("replace FY2026 by FY2027 in %d bullets of the big level", fy))
	res = do("update_node", map[string]any{"where": map[string]any{"under": h.big, "text": "FY2026"}, "find": "FY2026", "replace": "FY2027"})
	revC := resultRev(res)
	cur.floor = bulkFloor(fmt.Sprintf("Replaced FY2026 by FY2027 in %d bullets.", fy), 0, fy)
	n27 := 0
	for _, c := range tree().Nodes.All() {
		t := c.Str("text")
		if strings.Contains(t, "FY2026") {
			fail("%q kept FY2026", t)
		}
		if strings.HasSuffix(t, " FY2027 plan") {
			n27++
		}
	}
	if n27 != fy {
		fail("%d FY2027, want %d", n27, fy)
	}

	// (d) a run of 100 siblings, by its first and last key, after another
	order := func() []string {
		var ks []string
		for c := range tree().Nodes.Get(h.big).Children.Items() {
			ks = append(ks, c.Key())
		}
		return ks
	}
	before := order()
	r0, r1, at := len(before)/20, len(before)/20+min(100, len(before)/10), len(before)/2
	task("run", fmt.Sprintf("move a run of %d siblings by first and last key", r1-r0))
	do("move_node", map[string]any{"from": before[r0], "to": before[r1-1], "after": before[at]})
	cur.floor = bulkFloor(fmt.Sprintf("Moved %d bullets after %s.", r1-r0, before[at]), 0, r1-r0)
	want := slices.Concat(before[:r0], before[r1:at+1], before[r0:r1], before[at+1:])
	if got := order(); !slices.Equal(got, want) {
		fail("the big level is not in the order asked")
	}

	// (e) a 600-child level (imported for the task, uncounted) split into three
	var b strings.Builder
	b.WriteString("- Six hundred\n")
	for i := range 600 {
		fmt.Fprintf(&b, "  - row %d\n", i)
	}
	if r, _ := h.call(tb, "import_outline", map[string]any{"content": b.String()}); r.IsError {
		tb.Fatal(resultText(r))
	}
	six := ""
	var rows []string
	for it := range tree().Roots.Items() {
		if it.Str("text") == "Six hundred" {
			six = it.Key()
			for c := range it.Children.Items() {
				rows = append(rows, c.Key())
			}
		}
	}
	task("split", "split a 600-child level into three headed sections")
	res = do("move_node", map[string]any{"node": six, "split": []any{"First", "Second", "Third"}})
	revE := resultRev(res)
	cur.floor = bulkFloor("Split 600 bullets into First, Second, Third, 200 each.", 0, 3)
	if it := tree().Nodes.Get(six); it == nil || it.Children.Len() != 3 {
		fail("the level does not hold three sections")
	} else {
		var got []string
		for i, s := range it.Children.All() {
			if s.Str("text") != []string{"First", "Second", "Third"}[i] || s.Children.Len() != 200 {
				fail("section %d: %q with %d children", i, s.Str("text"), s.Children.Len())
			}
			for c := range s.Children.Items() {
				got = append(got, c.Key())
			}
		}
		if !slices.Equal(got, rows) {
			fail("the 600 rows are not in their order under the sections")
		}
	}

	// (f) delete what a filter selects: the dry run, then its plan
	task("delete", fmt.Sprintf("delete the %d FY2027 bullets: dry run, then plan", fy))
	res = do("delete_node", map[string]any{"where": map[string]any{"text": "FY2027"}, "dry_run": true})
	plan := resultPlan(res)
	if plan == "" {
		fail("the dry run gave no plan id")
	}
	res = do("delete_node", map[string]any{"where": map[string]any{"text": "FY2027"}, "plan": plan})
	revF := resultRev(res)
	cur.floor = bulkFloor(fmt.Sprintf("Would delete %d bullets.", fy), 0, fy) + bulkFloor(fmt.Sprintf("Deleted %d bullets.", fy), 0, 0)
	for _, it := range tree().Nodes.All() {
		if strings.Contains(it.Str("text"), "FY2027") {
			fail("%q not deleted", it.Str("text"))
		}
	}

	// (g) what changed since the split (the deletes), all of it
	task("since", "what changed since a revision (the deletes)")
	if revE == "" || revF == "" || revC == "" {
		fail("a write's result gave no commit rev")
	}
	seenDel := map[string]int{}
	wantDel := map[string]bool{}
	for _, r := range h.recs {
		if r.Collection == "app.bulleted.node" && strings.Contains(r.Value.Get("text").(string), "FY2026") {
			wantDel[r.RKey] = true
		}
	}
	t := &cur.billTask
	h.drain(tb, t, "search", map[string]any{"since": revE, "limit": 200}, wantDel, seenDel)
	if os.Getenv("BULLETED_BILL_SHOW") != "" {
		res, _ := h.call(tb, "search", map[string]any{"since": revE, "limit": 3})
		raw, _ := json.Marshal(res.StructuredContent)
		fmt.Printf("=== search since %s limit 3\n--- text:\n%s\n--- structured:\n%s\n", revE, resultText(res), raw)
	}
	cur.want, cur.found = len(wantDel), len(seenDel)
	cur.floor = 0
	for k := range wantDel {
		cur.floor += 13 + len(" deleted ") + len(h.textOf(k)) + len(" FY2027 plan") - len(" FY2026 plan") + 1
	}
	if cur.found != cur.want {
		fail("shown %d of %d deleted bullets", cur.found, cur.want)
	}

	// (h) import 2,000 markdown lines and check the round trip: the import,
	// then the imported subtree read back as markdown, page by page, by
	// each kind of client in the mode made for it (serve --payload text
	// for a client shown the text, structured for one shown the
	// structured content: a page then fills the result bound with that
	// part); in both (auto's mode for clients not known) a page holds both
	// parts in full, about half as many rows (said in the log)
	task("import", "import 2,000 markdown lines, read them back")
	var doc strings.Builder
	doc.WriteString("- Two thousand lines\n")
	for i := 1; i < 2000; i++ {
		fmt.Fprintf(&doc, "%s- line %d of the import\n", strings.Repeat("  ", 1+i%3/2), i)
	}
	do("import_outline", map[string]any{"content": doc.String()})
	root := ""
	for it := range tree().Roots.Items() {
		if it.Str("text") == "Two thousand lines" {
			root = it.Key()
		}
	}
	if root == "" {
		fail("the import's root is not at the top level")
	} else {
		pages := map[tools.Payload][]billCall{}
		for _, mode := range []tools.Payload{tools.PayloadText, tools.PayloadStructured, tools.PayloadBoth} {
			m := &billHarness{engine: h.engine}
			m.connect(tb, server.Options{Payload: mode})
			var back strings.Builder
			args := map[string]any{"node": root, "format": "markdown", "depth": 50, "limit": 5000}
			for range 20 {
				res, c := m.call(tb, "read_outline", args)
				pages[mode] = append(pages[mode], c)
				if mode == tools.PayloadStructured {
					raw, _ := json.Marshal(res.StructuredContent)
					var v any
					json.Unmarshal(raw, &v)
					back.WriteString(fmt.Sprint(v))
				} else {
					back.WriteString(resultText(res))
				}
				cur := nextCursor(res)
				if cur == "" {
					break
				}
				args["cursor"] = cur
			}
			for i := 1; i < 2000; i++ {
				if !strings.Contains(back.String(), fmt.Sprintf("line %d of the import\n", i)) {
					fail("%s mode: line %d not read back", mode, i)
					break
				}
			}
		}
		// a page shown to a text client is the text mode's, to a
		// structured one the structured mode's
		txt, sc := pages[tools.PayloadText], pages[tools.PayloadStructured]
		for i := range max(len(txt), len(sc)) {
			var c billCall
			if i < len(txt) {
				c.text = txt[i].text
			}
			if i < len(sc) {
				c.sc = sc[i].sc
			}
			cur.calls = append(cur.calls, c)
		}
		both := &billTask{calls: pages[tools.PayloadBoth]}
		tb.Logf("the import's read-back in both mode: %d page(s), text %d B, structured %d B (text mode %d page(s), structured mode %d)",
			len(both.calls), both.sum(billCall.shownText), both.sum(billCall.shownSC), len(txt), len(sc))
	}
	cur.floor = bulkFloor("Imported 2,000 lines under Two thousand lines.", 1, 0) + doc.Len()
	return tasks
}

// textOf is the generated (seeded) text of the bullet key.
func (h *billHarness) textOf(key string) string {
	for _, r := range h.recs {
		if r.RKey == key && r.Collection == "app.bulleted.node" {
			s, _ := r.Value.Text("text")
			return s
		}
	}
	return ""
}

// bulkTable renders the bulk tasks' bill.
func bulkTable(n int, tasks []*bulkTask) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nThe bulk tasks on a generated %d-bullet outline (issue #40; shown = the part a model sees: the text under a text-shown client, the structured content under a structured-shown one; floor = the least a complete answer needs):\n\n", n)
	b.WriteString("| task | calls | shown: text clients | shown: structured clients | floor | ratio text / structured | right |\n|---|---|---|---|---|---|---|\n")
	for _, t := range tasks {
		st, ss := t.sum(billCall.shownText), t.sum(billCall.shownSC)
		ok := "yes"
		if t.check != "" {
			ok = "no: " + t.check
		}
		fmt.Fprintf(&b, "| %s | %d | %s B | %s B | %s B | %.2f / %.2f | %s |\n", t.name, len(t.calls), comma(st), comma(ss), comma(t.floor),
			float64(st)/float64(max(t.floor, 1)), float64(ss)/float64(max(t.floor, 1)), ok)
	}
	return b.String()
}

func comma(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// BenchmarkAgentBillBulk measures the bulk tasks (bulkTable) on a generated
// 20,000-bullet outline (BULLETED_BILL_N, -short as BenchmarkAgentBill),
// seeded by bulkSeed; one iteration (the tasks change the outline).
//
//	go test ./server -run '^$' -bench AgentBillBulk -benchtime 1x
func BenchmarkAgentBillBulk(b *testing.B) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	if s := os.Getenv("BULLETED_BILL_N"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 100 {
			b.Fatalf("BULLETED_BILL_N=%q: want a number of bullets, at least 100", s)
		}
	}
	h := newBillHarnessWith(b, n, bulkSeed)
	var tasks []*bulkTask
	for i := 0; i < b.N; i++ {
		if i > 0 {
			b.Skip("the bulk tasks change the outline: run with -benchtime 1x")
		}
		tasks = h.bulk(b)
	}
	fmt.Println(bulkTable(n, tasks))
	for _, t := range tasks {
		m := t.id
		b.ReportMetric(float64(len(t.calls)), m+"-calls")
		b.ReportMetric(float64(t.sum(billCall.shownText)), m+"-shownText-B")
		b.ReportMetric(float64(t.sum(billCall.shownSC)), m+"-shownSC-B")
		b.ReportMetric(float64(t.floor), m+"-floor-B")
		if t.check != "" {
			b.Errorf("%s: %s", t.name, t.check)
		}
	}
}

// TestAgentBillBulk: the bulk tasks on a generated outline (20,000 bullets;
// -short: 2,000) end right as the repository reads back (the Archive
// holds exactly the level's done todos in order; #old renamed, #older
// untouched; FY2026 replaced; the run and the split in the order asked;
// the filter's bullets deleted; every delete shown by search since), each
// in ≤ 3 calls. The ratio to the floor is printed, not asserted (issue #40
// asks ≤ 1.2×; the table says where it is missed).
func TestAgentBillBulk(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 2_000
	}
	h := newBillHarnessWith(t, n, bulkSeed)
	tasks := h.bulk(t)
	t.Log(bulkTable(n, tasks))
	for _, tk := range tasks {
		if tk.check != "" {
			t.Errorf("%s: %s", tk.name, tk.check)
		}
		if len(tk.calls) > 3 {
			t.Errorf("%s: %d calls, want ≤ 3", tk.name, len(tk.calls))
		}
	}
}
