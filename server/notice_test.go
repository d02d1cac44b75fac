package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) (string, map[string]any) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("%s: %+v", name, res.Content)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var sc map[string]any
	json.Unmarshal(raw, &sc)
	return text.String(), sc
}

// A store opened with its HEAD recovered from the block log says so in
// the session's first tool result (text and structured "notices"), once,
// and reads every bullet.
func TestRecoveredHeadNotice(t *testing.T) {
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ws []store.Write
	clock := syntax.NewTIDClock(0)
	for i := range 150 {
		ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: clock.Next().String(),
			Value: map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprintf("bullet %d", i), "sortKey": fmt.Sprintf("a%05d", i), "createdAt": "2026-07-30T09:30:00.000Z"}})
	}
	if _, err := l.Apply(context.Background(), "", ws); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := os.Remove(filepath.Join(dir, "HEAD")); err != nil {
		t.Fatal(err)
	}
	l, err = store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := client.NewInProcessClient(server.New(outline.New(l), false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	initialize(t, c)
	text, sc := callTool(t, c, "read_outline", map[string]any{"limit": 500})
	if !strings.HasPrefix(text, "Notice: The embedded store's HEAD file was missing: recovered it from the block log") {
		t.Fatalf("the first result does not start with the recovery notice:\n%.400s", text)
	}
	if !strings.Contains(text, "bullet 149") {
		t.Fatalf("the outline is not all there:\n%.400s", text)
	}
	notes, _ := sc["notices"].([]any)
	if len(notes) != 1 || !strings.Contains(fmt.Sprint(notes[0]), "150 records") {
		t.Fatalf("structured notices %v", sc["notices"])
	}
	text, sc = callTool(t, c, "read_outline", map[string]any{"limit": 1})
	if strings.Contains(text, "Notice:") || sc["notices"] != nil {
		t.Fatalf("the notice is repeated: %.200s %v", text, sc["notices"])
	}
}

// noticeServer is a server on an embedded store in dir, and two sessions
// of it (a and b), each past its first call.
func noticeServer(t *testing.T) (dir string, l *store.Local, a, b *client.Client) {
	t.Helper()
	dir = t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s := server.New(outline.New(l), false)
	for _, c := range []**client.Client{&a, &b} {
		if *c, err = client.NewInProcessClient(s); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { (*c).Close() })
		initialize(t, *c)
	}
	return dir, l, a, b
}

// byOtherProcess writes as another process sharing the data directory.
func byOtherProcess(t *testing.T, dir string, ws ...store.Write) {
	t.Helper()
	o, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := o.Apply(context.Background(), "", ws); err != nil {
		t.Fatal(err)
	}
}

func newNode(did syntax.DID, key, text, sortKey, parent string) store.Write {
	v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": sortKey, "createdAt": "2026-07-30T09:30:00.000Z"}
	if parent != "" {
		v["parent"] = "at://" + did.String() + "/app.bulleted.node/" + parent
	}
	return store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: key, Value: v}
}

// changedByOthers is a result's notice of edits by others: its text head,
// its structured notices and changedByOthers object.
func changedByOthers(t *testing.T, c *client.Client, tool string, args map[string]any) (string, []string, map[string]any) {
	t.Helper()
	text, sc := callTool(t, c, tool, args)
	var notes []string
	all, _ := sc["notices"].([]any)
	if len(all) == 0 {
		t.Fatalf("%s: no notices:\n%.600s", tool, text)
	}
	for _, n := range all {
		notes = append(notes, fmt.Sprint(n))
	}
	obj, _ := sc["changedByOthers"].(map[string]any)
	return text, notes, obj
}

func quiet(t *testing.T, c *client.Client, tool string, args map[string]any, why string) {
	t.Helper()
	text, sc := callTool(t, c, tool, args)
	if strings.Contains(text, "Notice:") || sc["notices"] != nil || sc["changedByOthers"] != nil {
		t.Fatalf("%s: a notice:\n%.600s\n%v", why, text, sc["notices"])
	}
}

// Another process's edits on the same data directory are told on the
// session's next result, in the text and the structured content, once;
// the session's own writes never; another session's, as such.
func TestChangedByOthersNotice(t *testing.T) {
	dir, l, a, b := noticeServer(t)
	did := l.DID()
	clock := syntax.NewTIDClock(3)
	work, home, beta := clock.Next().String(), clock.Next().String(), clock.Next().String()
	byOtherProcess(t, dir, newNode(did, work, "Work", "a", ""), newNode(did, home, "Home", "b", ""), newNode(did, beta, "Ship the beta", "a", work))
	quiet(t, a, "read_outline", nil, "the session's first call")
	quiet(t, b, "read_outline", nil, "the session's first call")

	printer := clock.Next().String()
	byOtherProcess(t, dir, newNode(did, printer, "Call the printer", "b", work),
		store.Write{Op: store.Delete, Collection: "app.bulleted.node", RKey: beta})
	text, notes, obj := changedByOthers(t, a, "search", map[string]any{"text": "printer"})
	head := "Notice: 2 record(s) changed since your last call, not by you: 2 by another writer (the app, another device or process); in \"Work\" " + work + " (2). Read them again before acting on what you read earlier:\n" +
		"  - deleted " + beta + " \"Ship the beta\" (in \"Work\")\n" +
		"  - created " + printer + " \"Call the printer\" (in \"Work\")\n\n"
	if lines := strings.SplitAfter(head, "\n"); !strings.HasPrefix(text, lines[0]) || !strings.Contains(text[:len(head)+20], lines[1]) || !strings.Contains(text[:len(head)+20], lines[2]) {
		t.Fatalf("the text's head:\n%.900s\nwant:\n%s", text, head)
	}
	if !strings.Contains(text, "Call the printer") {
		t.Fatalf("the search itself is gone:\n%s", text)
	}
	if len(notes) != 1 || !strings.HasPrefix(notes[0], "2 record(s) changed since your last call, not by you") {
		t.Fatalf("structured notices %q", notes)
	}
	if obj == nil || obj["count"] != float64(2) || obj["byOtherWriters"] != float64(2) || obj["complete"] != true {
		t.Fatalf("changedByOthers %v", obj)
	}
	kinds := map[string]string{}
	for _, ch := range obj["changes"].([]any) {
		m := ch.(map[string]any)
		kinds[fmt.Sprint(m["rkey"])] = fmt.Sprint(m["change"], " ", m["text"], " ", m["section"])
	}
	if kinds[printer] != "created Call the printer "+work || kinds[beta] != "deleted Ship the beta "+work {
		t.Fatalf("changes %v", kinds)
	}
	// told once
	quiet(t, a, "read_outline", nil, "the notice was given already")

	// the agent's own write: nothing to a; to b, as another session's
	quiet(t, a, "insert_after", map[string]any{"text": "mine", "parent": home}, "the agent's own write")
	quiet(t, a, "read_outline", nil, "after the agent's own write")
	text, notes, obj = changedByOthers(t, b, "read_outline", nil)
	if !strings.HasPrefix(text, "Notice: 3 record(s) changed since your last call, not by you: 2 by another writer (the app, another device or process), 1 by another session of this server;") ||
		obj["byOtherSessions"] != float64(1) || len(notes) != 1 {
		t.Fatalf("b hears of a's write and the other process's:\n%.600s\n%v", text, obj)
	}
	quiet(t, b, "read_outline", nil, "b was told already")
}

// When the engine's log no longer reaches back to the session's last
// call, the result says so beside what it still remembers: never less
// than what changed.
func TestChangedByOthersLogGone(t *testing.T) {
	dir, l, a, b := noticeServer(t)
	clock := syntax.NewTIDClock(4)
	quiet(t, a, "read_outline", nil, "the session's first call")
	quiet(t, b, "read_outline", nil, "the session's first call")
	for i := range outline.LogAdvances + 1 {
		byOtherProcess(t, dir, newNode(l.DID(), clock.Next().String(), fmt.Sprint("bullet ", i), fmt.Sprintf("a%03d", i), ""))
		callTool(t, b, "read_outline", map[string]any{"limit": 1}) // each read brings the kept tree forward
	}
	text, notes, obj := changedByOthers(t, a, "read_outline", map[string]any{"limit": 1})
	want := "earlier changes are no longer remembered one by one"
	if !strings.HasPrefix(text, "Notice: 64 record(s) changed since your last call") || !strings.Contains(text, want) || len(notes) != 1 || !strings.Contains(notes[0], want) || obj["complete"] != false {
		t.Fatalf("a result after the log's reach:\n%.500s\n%q %v", text, notes, obj)
	}
	quiet(t, a, "read_outline", map[string]any{"limit": 1}, "told already")
}

// A session whose calls reach a new engine (hosted mode re-opening a
// user's repository) is told that the outline changed, without details,
// when the new engine cannot say what changed since the session's last
// call; and nothing when nothing did.
func TestChangedByOthersNewEngine(t *testing.T) {
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	env := &tools.Env{Engine: outline.New(l)}
	var mu sync.Mutex
	s, err := server.NewWithOptions(nil, server.Options{EnvFor: func(context.Context) (*tools.Env, func(), error) {
		mu.Lock()
		defer mu.Unlock()
		return env, nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	initialize(t, c)
	quiet(t, c, "read_outline", nil, "the session's first call")
	reopen := func() {
		mu.Lock()
		env = &tools.Env{Engine: outline.New(l)}
		mu.Unlock()
	}
	reopen()
	quiet(t, c, "read_outline", nil, "a new engine, nothing changed")
	byOtherProcess(t, dir, newNode(l.DID(), syntax.NewTIDClock(5).Next().String(), "from elsewhere", "a", ""))
	reopen()
	text, notes, obj := changedByOthers(t, c, "read_outline", nil)
	want := "The outline changed since your last call (revision "
	if !strings.HasPrefix(text, "Notice: "+want) || len(notes) != 1 || !strings.HasPrefix(notes[0], want) || obj["complete"] != false || obj["count"] != nil {
		t.Fatalf("after a new engine:\n%.500s\n%q %v", text, notes, obj)
	}
	quiet(t, c, "read_outline", nil, "told already")
}

// A notice of the most it tells (long texts of four-byte characters, many
// sections) on a page the read filled to its budget: the result stays
// within tools.MaxResult, the notice whole at the head.
func TestChangedByOthersFits(t *testing.T) {
	dir, l, a, _ := noticeServer(t)
	did := l.DID()
	clock := syntax.NewTIDClock(6)
	long := strings.Repeat("🌱 grow ", 60)
	var ws []store.Write
	var sections []string
	for i := range 40 {
		k := clock.Next().String()
		sections = append(sections, k)
		ws = append(ws, newNode(did, k, fmt.Sprint(i, long), fmt.Sprintf("a%03d", i), ""))
	}
	byOtherProcess(t, dir, ws...)
	quiet(t, a, "read_outline", nil, "the session's first call")
	ws = nil
	for i := range 150 {
		ws = append(ws, newNode(did, clock.Next().String(), fmt.Sprint(i, long), fmt.Sprintf("b%03d", i), sections[i%len(sections)]))
	}
	byOtherProcess(t, dir, ws...)
	req := mcp.CallToolRequest{}
	req.Params.Name = "read_outline"
	req.Params.Arguments = map[string]any{"limit": 500, "depth": 3}
	res, err := a.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(res)
	text := res.Content[0].(mcp.TextContent).Text
	if !strings.HasPrefix(text, "Notice: 150 record(s) changed since your last call") || len(raw) > tools.MaxResult {
		t.Fatalf("%d bytes (bound %d):\n%.1500s", len(raw), tools.MaxResult, text)
	}
	if !strings.Contains(text, "fewer than limit=500") {
		t.Fatalf("the page was not filled to its budget:\n%.3000s", text)
	}
	var sc map[string]any
	json.Unmarshal(raw, &sc)
	sc = sc["structuredContent"].(map[string]any)
	if sc["changedByOthers"].(map[string]any)["count"] != float64(150) || sc["did"] == nil {
		t.Fatalf("structured content %v", sc["changedByOthers"])
	}
	t.Logf("%d bytes; notice: %d bytes of text", len(raw), strings.Index(text, "\n\n"))
}
