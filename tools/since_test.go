package tools_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// sinceChanges is a since page's changes as "rkey change by operation".
func sinceChanges(sc map[string]any) []string {
	var out []string
	revs, _ := sc["revs"].([]any)
	for _, g := range revs {
		m := g.(map[string]any)
		op, _ := m["operation"].(string)
		groups, _ := m["changes"].(map[string]any)
		for what, rows := range groups {
			for _, r := range rows.([]any) {
				row := r.([]any)
				out = append(out, fmt.Sprintf("%s %s %s %s", row[0], what, m["by"], op))
			}
		}
	}
	return out
}

// search since=REV lists exactly the bullets created, edited, moved and
// deleted after that rev, by this server (with its operation's id) and by
// another writer (another handle on the same directory), in both parts;
// since a time the same; bad since values are refused by name.
func TestSearchSince(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	other, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	e := outline.New(l)
	out, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "alpha"}, {Text: "beta"}, {Text: "gamma"}, {Text: "delta"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	k := map[string]string{}
	for _, cr := range out.Plan.Created {
		k[cr.Text] = cr.RKey
	}
	_, rev0, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, &tools.Env{Engine: e})
	ops := map[string]string{}
	for _, w := range []struct {
		name string
		args map[string]any
		key  string
	}{
		{"update_node", map[string]any{"node": k["alpha"], "text": "alpha two"}, "alpha"},
		{"move_node", map[string]any{"node": k["beta"], "parent": k["gamma"]}, "beta"},
		{"delete_node", map[string]any{"node": k["delta"]}, "delta"},
	} {
		res, sc := call(t, c, w.name, w.args)
		if res.IsError {
			t.Fatalf("%s: %s", w.name, text(res))
		}
		ops[w.key], _ = sc["operation"].(string)
		if ops[w.key] == "" {
			t.Fatalf("%s: no operation id: %v", w.name, sc)
		}
	}
	// another writer: created epsilon, edited gamma's text
	snap, err := other.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gamma map[string]any
	for _, r := range snap.Records {
		if r.RKey == k["gamma"] && r.Collection == "app.bulleted.node" {
			gamma = r.Value.Map()
		}
	}
	gamma["text"] = "gamma by hand"
	eps := "3kzzzzzzzzzz2"
	if _, err := other.Apply(ctx, "", []store.Write{
		{Op: store.Create, Collection: "app.bulleted.node", RKey: eps, Value: map[string]any{"$type": "app.bulleted.node", "text": "epsilon", "sortKey": "zz", "createdAt": "2026-07-30T09:30:00.000Z"}},
		{Op: store.Update, Collection: "app.bulleted.node", RKey: k["gamma"], Value: gamma},
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		k["alpha"] + " edited server " + ops["alpha"],
		k["beta"] + " moved server " + ops["beta"],
		k["delta"] + " deleted server " + ops["delta"],
		eps + " created other ",
		k["gamma"] + " edited other ",
	}
	slices.Sort(want)
	res, sc := call(t, c, "search", map[string]any{"since": rev0})
	got := sinceChanges(sc)
	slices.Sort(got)
	if res.IsError || !slices.Equal(got, want) {
		t.Fatalf("since %s:\n got %q\nwant %q\n%s", rev0, got, want, text(res))
	}
	txt := text(res)
	for _, s := range []string{"edited:\n- \"alpha two\" ·" + k["alpha"], "this server, operation " + ops["alpha"], "another writer:\ncreated:\n- \"epsilon\" ·" + eps + "\nedited:\n- \"gamma by hand\" ·", "deleted:\n- \"delta\" ·" + k["delta"] + "\n"} {
		if !strings.Contains(txt, s) {
			t.Errorf("text lacks %q:\n%s", s, txt)
		}
	}
	// since a time: the state at rev0's time is rev0's
	tid, _ := syntax.ParseTID(rev0)
	_, sc = call(t, c, "search", map[string]any{"since": tid.Time().Format(time.RFC3339Nano)})
	if got := sinceChanges(sc); len(got) != len(want) || sc["since"] != rev0 {
		t.Fatalf("since %s: %q from %v", tid.Time(), got, sc["since"])
	}
	// bad input: refused, naming since
	for _, bad := range []string{"last tuesday", time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "3kaaaaaaaaaaa", syntax.NewTID(time.Now().Add(time.Hour).UnixMicro(), 0).String()} {
		res, sc := call(t, c, "search", map[string]any{"since": bad})
		kind, _ := sc["error"].(map[string]any)["kind"].(string)
		if !res.IsError || kind != "invalid" || !strings.Contains(text(res), "since") {
			t.Errorf("since=%q: %s (kind %q)", bad, text(res), kind)
		}
	}
	if res, _ := call(t, c, "search", map[string]any{"since": rev0, "text": "x"}); !res.IsError || !strings.Contains(text(res), "since") {
		t.Errorf("since with text: %s", text(res))
	}
	// limit 0 is search's default, not an endless run of empty pages
	if _, sc := call(t, c, "search", map[string]any{"since": rev0, "limit": 0}); len(sinceChanges(sc)) != len(want) {
		t.Errorf("limit 0: %v", sc)
	}
}

// Many changes page like every read: each change once, in order, the
// cursor counting to the revision the first page counted to (a change made
// while the pages are read is not slipped in), and a page that would not
// fit the result bound is shortened and says so.
func TestSearchSincePages(t *testing.T) {
	ctx := context.Background()
	l := openLocal(t)
	e := outline.New(l)
	_, rev0, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("𝄞𝄢𝄡𝄠", 40) // rows of some 300 bytes (four-byte runes): 200 do not fit one result
	var nodes []intent.NewNode
	for i := range 450 {
		nodes = append(nodes, intent.NewNode{Text: fmt.Sprint(long, i)})
	}
	for i := 0; i < len(nodes); i += 150 {
		if _, err := e.Do(ctx, intent.Insert{Nodes: nodes[i : i+150]}, false); err != nil {
			t.Fatal(err)
		}
	}
	c := inProcess(t, &tools.Env{Engine: e})
	seen := map[string]bool{}
	cursor, pages, shortened := "", 0, false
	for {
		args := map[string]any{"since": rev0, "limit": 200}
		if cursor != "" {
			args["cursor"] = cursor
		}
		res, sc := call(t, c, "search", args)
		if res.IsError {
			t.Fatal(text(res))
		}
		if size := tools.ResultSize(res); size > tools.MaxResult {
			t.Fatalf("page %d is %d bytes", pages, size)
		}
		pages++
		for _, ch := range sinceChanges(sc) {
			if seen[ch] {
				t.Fatalf("%s twice", ch)
			}
			seen[ch] = true
		}
		if strings.Contains(text(res), "fewer than limit") {
			shortened = true
		}
		if pages == 1 {
			// a write between pages: after the revision the pages count to
			if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "late"}}}, false); err != nil {
				t.Fatal(err)
			}
		}
		cursor, _ = sc["cursor"].(string)
		if cursor == "" {
			break
		}
	}
	if len(seen) != 450 || pages < 3 || !shortened {
		t.Fatalf("%d changes in %d pages (shortened %v), want 450 in at least 3", len(seen), pages, shortened)
	}
}
