package tools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// fitted checks one result as the client received it: at most
// tools.MaxResult bytes (text and structured content, as sent), the
// structured content whole (it matches the tool's output schema, was not
// replaced by a note), the text not cut by the server's last resort, and no
// "smaller limit" hint on a write.
func fitted(t *testing.T, tool string, res *mcp.CallToolResult, sc map[string]any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s: %s", tool, text(res))
	}
	if n := tools.ResultSize(res); n > tools.MaxResult {
		t.Fatalf("%s: result of %d bytes, over %d", tool, n, tools.MaxResult)
	}
	if sc["summary"] != nil && sc["did"] == nil && tool != "insert_after" && tool != "import_outline" {
		t.Fatalf("%s: structured content replaced: %v", tool, sc)
	}
	tl, _ := tools.Find(tool)
	raw, _ := json.Marshal(tl.Output)
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	comp := jsonschema.NewCompiler()
	comp.AddResource("mem:///o.json", doc)
	sch, err := comp.Compile("mem:///o.json")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sc)
	inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err := sch.Validate(inst); err != nil {
		t.Fatalf("%s: structured content does not match the output schema: %v\n%.500s", tool, err, b)
	}
	txt := text(res)
	for _, bad := range []string{"the text was cut", "[truncated", "smaller limit"} {
		if strings.Contains(txt, bad) {
			t.Fatalf("%s: text says %q: %.300s", tool, bad, txt[max(0, strings.Index(txt, bad)-200):])
		}
	}
}

// Every result fits in MaxResult with its structured content whole, on big
// inputs: a level of 2,000 children with long texts (and a few of the
// longest texts and notes a record allows) read in every format, page by
// page, every child exactly once; a search with 2,000 hits; a 2,000-bullet
// import whose report keeps every created key (read back from the
// repository) and each distinct notice once; a 600-bullet dry run.
func TestResultsFit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	_, sc := call(t, f.c, "insert_after", map[string]any{"text": "Big"})
	big := createdKeys(sc)[0]
	n := 2000
	if testing.Short() {
		n = 600
	}
	nodes := make([]any, n)
	for i := range nodes {
		txt := fmt.Sprintf("child %d: budget review with the finance team, %s", i, strings.Repeat("quarterly numbers and notes ", 8))
		nd := map[string]any{"text": txt}
		switch {
		case i%500 == 7:
			// the longest a record allows: 2,000 graphemes of text (~8 KB),
			// 20,000 of note (~53 KB)
			nd["text"] = fmt.Sprintf("child %d: budget %s", i, strings.Repeat("😀", 1970))
			nd["note"] = strings.Repeat("長いメモの行です。\n", 1900)
		case i%3 == 0:
			nd["layout"] = "todo"
			nd["note"] = "remember the receipts"
		}
		nodes[i] = nd
	}
	res, sc := call(t, f.c, "insert_after", map[string]any{"parent": big, "nodes": nodes})
	fitted(t, "insert_after", res, sc)
	if got := createdKeys(sc); len(got) != n {
		t.Fatalf("insert report lists %d keys of %d", len(got), n)
	}

	// every format, page by page: each child once
	rk := regexp.MustCompile(`·([a-z0-9]{13})\b`)
	for _, args := range []map[string]any{
		{"format": "text"},
		{"format": "text", "notes": true},
		{"format": "json"},
		{"format": "json", "flat": true, "notes": true},
		{"format": "json", "flat": true, "fields": "full"},
		{"format": "markdown"},
		{"format": "opml"},
	} {
		name := fmt.Sprint(args)
		seen := map[string]int{}
		clipped := false
		cursor, pages := "", 0
		for {
			a := map[string]any{"node": big, "depth": 1, "limit": 5000}
			for k, v := range args {
				a[k] = v
			}
			if cursor != "" {
				a["cursor"] = cursor
			}
			res, sc := call(t, f.c, "read_outline", a)
			fitted(t, "read_outline", res, sc)
			pages++
			if strings.Contains(fmt.Sprint(sc["notices"]), "more bytes not shown") {
				saidIn(t, name, res, sc, "more bytes not shown")
				clipped = true
			}
			switch args["format"] {
			case "json":
				var walk func(rows []any)
				walk = func(rows []any) {
					for _, r := range rows {
						m := r.(map[string]any)
						seen[m["rkey"].(string)]++
						if ch, ok := m["children"].([]any); ok {
							walk(ch)
						}
					}
				}
				walk(sc["nodes"].([]any))
			case "text":
				for _, m := range rk.FindAllStringSubmatch(sc["text"].(string), -1) {
					seen[m[1]]++
				}
			default:
				seen["rows"] += int(sc["total"].(float64))
			}
			c, _ := sc["cursor"].(string)
			if c == "" {
				break
			}
			saidIn(t, name, res, sc, "to fit one result")
			if pages > n {
				t.Fatalf("%s: no end after %d pages", name, pages)
			}
			cursor = c
		}
		if args["format"] == "markdown" || args["format"] == "opml" {
			if seen["rows"] != n {
				t.Fatalf("%s: %d rows in all, want %d", name, seen["rows"], n)
			}
			continue
		}
		if args["notes"] == true && !clipped {
			t.Fatalf("%s: the row with a 53 KB note was not said to be shortened", name)
		}
		delete(seen, big)
		if len(seen) != n {
			t.Fatalf("%s: %d distinct children, want %d", name, len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("%s: %s seen %d times", name, k, c)
			}
		}
		t.Logf("%s: %d pages", name, pages)
	}

	// a search with n hits, page by page
	seen, cursor := map[string]int{}, ""
	for pages := 0; ; pages++ {
		a := map[string]any{"text": "budget", "limit": 200}
		if cursor != "" {
			a["cursor"] = cursor
		}
		res, sc := call(t, f.c, "search", a)
		fitted(t, "search", res, sc)
		for _, h := range flatHits(sc) {
			seen[h["rkey"].(string)]++
		}
		if cursor, _ = sc["cursor"].(string); cursor == "" {
			break
		}
		if len(flatHits(sc)) < 200 {
			saidIn(t, "search", res, sc, "to fit one result")
		}
		if pages > n {
			t.Fatal("search: no end")
		}
	}
	if len(seen) != n {
		t.Fatalf("search: %d distinct hits, want %d", len(seen), n)
	}

	// a 2,000-bullet import, all_keys: every key with its input line, read back;
	// the repeated mention notice once, with its count
	var md strings.Builder
	md.WriteString("# Imported\n")
	for i := 0; i < n-1; i++ {
		if i%25 == 0 {
			fmt.Fprintf(&md, "  - item %d for @nobody.example\n", i)
		} else {
			fmt.Fprintf(&md, "  - item %d%s\n", i, strings.Repeat(" text", 10))
		}
	}
	res, sc = call(t, f.c, "import_outline", map[string]any{"content": md.String(), "all_keys": true})
	fitted(t, "import_outline", res, sc)
	keys, lines := createdKeys(sc), sc["lines"].([]any)
	if len(keys) != n || len(lines) != n {
		t.Fatalf("import report: %d keys, %d lines, want %d", len(keys), len(lines), n)
	}
	snap, err := f.repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	for _, r := range snap.Records {
		if r.Collection == "app.bulleted.node" {
			texts[r.RKey], _ = r.Value.Text("text")
		}
	}
	src := strings.Split(md.String(), "\n")
	for i, k := range keys {
		line := int(lines[i].(float64))
		want := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(src[line-1]), "-"))
		want = strings.TrimPrefix(want, "# ")
		if got, ok := texts[k]; !ok || got != want {
			t.Fatalf("key %d (%s, line %d): repository has %q (%v), the input %q", i, k, line, got, ok, want)
		}
	}
	diags := fmt.Sprint(sc["diagnostics"])
	if c := strings.Count(diags, "@nobody.example"); c != 1 || !strings.Contains(diags, fmt.Sprintf("(×%d)", (n-1+24)/25)) {
		t.Fatalf("the mention notice %d times, without its count: %s", c, diags)
	}
	if strings.Count(text(res), "@nobody.example") != 1 {
		t.Fatalf("the text repeats the notice: %.600s", text(res))
	}

	// an import too large for its keys to fit one result: the first ones,
	// said in both parts
	if !testing.Short() {
		var huge strings.Builder
		for i := 0; i < 4000; i++ {
			fmt.Fprintf(&huge, "- huge %d\n", i)
		}
		res, sc = call(t, f.c, "import_outline", map[string]any{"content": huge.String()})
		fitted(t, "import_outline", res, sc)
		keys := createdKeys(sc)
		if len(keys) == 0 || len(keys) >= 4000 || int(sc["createdTotal"].(float64)) != 4000 {
			t.Fatalf("a 4,000-bullet import lists %d keys (createdTotal %v)", len(keys), sc["createdTotal"])
		}
		saidIn(t, "import_outline", res, map[string]any{"notices": sc["diagnostics"]}, fmt.Sprintf("keys lists the first %d of the 4000", len(keys)))
		snap, err := f.repo.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		in := map[string]string{}
		for _, r := range snap.Records {
			in[r.RKey], _ = r.Value.Text("text")
		}
		for i, k := range keys {
			if in[k] != fmt.Sprintf("huge %d", i) {
				t.Fatalf("key %d %s: the repository has %q", i, k, in[k])
			}
		}
	}

	// a 600-bullet dry run
	res, sc = call(t, f.c, "insert_after", map[string]any{"parent": big, "position": "first", "nodes": nodes[:600], "dry_run": true})
	fitted(t, "insert_after", res, sc)
	if len(createdKeys(sc)) != 600 || sc["before"] == nil || sc["after"] == nil {
		t.Fatalf("dry run report: %d keys, before/after %v", len(createdKeys(sc)), sc["before"] != nil)
	}

	// 2,000 detached bullets (their parent's record deleted under them)
	if _, err := f.repo.Apply(ctx, "", []store.Write{{Op: store.Delete, Collection: "app.bulleted.node", RKey: big}}); err != nil {
		t.Fatal(err)
	}
	res, sc = call(t, f.c, "list_detached", map[string]any{})
	fitted(t, "list_detached", res, sc)
	if d := len(sc["detached"].([]any)); d == 0 || d >= n || int(sc["detachedTotal"].(float64)) != n {
		t.Fatalf("list_detached lists %d of %v", d, sc["detachedTotal"])
	}
	saidIn(t, "list_detached", res, sc, "then call list_detached again")
}

// A json row costs at most twice its text line: a 2,000-child level (todos,
// notes, tags) read whole, page by page, in text and in json (flat). Logs
// the bytes per row of the whole results and of the rows alone.
func TestJSONRowSize(t *testing.T) {
	f := newFixture(t)
	_, sc := call(t, f.c, "insert_after", map[string]any{"text": "Level"})
	level := createdKeys(sc)[0]
	nodes := make([]any, 2000)
	for i := range nodes {
		nd := map[string]any{"text": fmt.Sprintf("Follow up on item %d with the team #q%d", i, i%7)}
		if i%3 == 0 {
			nd["layout"] = "todo"
			nd["completed"] = i%2 == 0
		}
		if i%5 == 0 {
			nd["note"] = "context for this item"
		}
		nodes[i] = nd
	}
	if res, _ := call(t, f.c, "insert_after", map[string]any{"parent": level, "nodes": nodes}); res.IsError {
		t.Fatal(text(res))
	}
	read := func(args map[string]any) (results, rows, pages int, sample []map[string]any, lines []string) {
		cursor := ""
		for {
			a := map[string]any{"node": level, "depth": 1, "limit": 5000}
			for k, v := range args {
				a[k] = v
			}
			if cursor != "" {
				a["cursor"] = cursor
			}
			res, sc := call(t, f.c, "read_outline", a)
			if res.IsError {
				t.Fatal(text(res))
			}
			pages++
			results += tools.ResultSize(res)
			rows += int(sc["total"].(float64))
			if ns, ok := sc["nodes"].([]any); ok {
				for _, n := range ns {
					sample = append(sample, n.(map[string]any))
				}
			}
			if txt, ok := sc["text"].(string); ok {
				for _, l := range strings.Split(txt, "\n") {
					if strings.Contains(l, "·") && !strings.HasSuffix(l, "·"+level) {
						lines = append(lines, l+"\n")
					}
				}
			}
			if cursor, _ = sc["cursor"].(string); cursor == "" {
				return
			}
		}
	}
	tRes, tRows, tPages, _, lines := read(map[string]any{"format": "text"})
	jRes, jRows, jPages, rows, _ := read(map[string]any{"format": "json", "flat": true})
	if tRows != 2000 || jRows != 2000 || len(rows) != 2000 || len(lines) != 2000 {
		t.Fatalf("rows: text %d (%d lines), json %d (%d rows)", tRows, len(lines), jRows, len(rows))
	}
	lineBytes, rowBytes := 0, 0
	for i := range rows {
		b, _ := json.Marshal(rows[i])
		rowBytes += len(b) + 1
		lineBytes += len(lines[i])
	}
	t.Logf("text: %d pages, %d B a row in all (results %d B); a line %d B", tPages, tRes/tRows, tRes, lineBytes/len(lines))
	t.Logf("json flat: %d pages, %d B a row in all (results %d B); a row %d B", jPages, jRes/jRows, jRes, rowBytes/len(rows))
	if rowBytes > 2*lineBytes {
		t.Fatalf("a json row is %d B against a text line of %d B: over twice", rowBytes/len(rows), lineBytes/len(lines))
	}
}

// saidIn checks that a shortened result says so in both parts: the text
// and the structured content's notices.
func saidIn(t *testing.T, name string, res *mcp.CallToolResult, sc map[string]any, what string) {
	t.Helper()
	if !strings.Contains(text(res), what) || !strings.Contains(fmt.Sprint(sc["notices"]), what) {
		t.Fatalf("%s: a shortened page does not say %q in both parts: notices %v", name, what, sc["notices"])
	}
}

// A dry run's before/after views show where the plan writes, in a level of
// 300 children: the touched bullet's neighbours, the others counted.
func TestDryRunPreviewShowsThePlace(t *testing.T) {
	f := newFixture(t)
	_, sc := call(t, f.c, "insert_after", map[string]any{"text": "Level"})
	level := createdKeys(sc)[0]
	nodes := make([]any, 300)
	for i := range nodes {
		nodes[i] = map[string]any{"text": fmt.Sprintf("child %d", i)}
	}
	_, sc = call(t, f.c, "insert_after", map[string]any{"parent": level, "nodes": nodes})
	keys := createdKeys(sc)
	res, sc := call(t, f.c, "insert_after", map[string]any{"parent": level, "after": keys[250], "text": "the new one", "dry_run": true})
	fitted(t, "insert_after", res, sc)
	before, after := sc["before"].(string), sc["after"].(string)
	for _, want := range []string{"child 250 ·", "child 251 ·", "… 250 bullet(s)", "… 48 bullet(s)"} {
		if !strings.Contains(before, want) {
			t.Fatalf("before lacks %q:\n%s", want, before)
		}
	}
	if !strings.Contains(after, "child 250 ·"+keys[250]+"\n  - the new one ·") || !strings.Contains(after, "the new one ·") || strings.Contains(after, "child 100 ·") {
		t.Fatalf("after:\n%s", after)
	}
	if n := len(res.Content[0].(mcp.TextContent).Text); n > 2000 {
		t.Fatalf("a one-bullet dry run of %d bytes of text", n)
	}
}
