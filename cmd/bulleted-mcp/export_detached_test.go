package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestExportDetached: export (json, markdown, opml) used to leave out the
// detached bullets that list_detached shows. Now a whole-outline export
// ends with them and their children, marked as detached (json: the
// "detached" rows; markdown: a "Detached" section after a marker comment;
// opml: an <outline _detached="section">), the outline itself unchanged,
// and stderr says how many. Importing the export (package markup) skips
// the section and says so, rather than make ordinary bullets of it. Read
// back from the written files.
func TestExportDetached(t *testing.T) {
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	did := l.DID().String()
	node := func(rkey, parent, sortKey, text string) store.Write {
		v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}
		if parent != "" {
			v["parent"] = "at://" + did + "/app.bulleted.node/" + parent
		}
		return store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: rkey, Value: v}
	}
	if _, err := l.Apply(ctx, "", []store.Write{
		node("3kroot1111111", "", "a0", "Kept"),
		node("3kkid11111111", "3kroot1111111", "a0", "kept child"),
		// the parent 3kgone1111111 was deleted: these two are detached
		node("3korphan11111", "3kgone1111111", "a0", "Orphan"),
		node("3korphankid11", "3korphan11111", "a0", "orphan's child"),
		node("3korphan22222", "3kgone2222222", "a1", "Second orphan"),
	}); err != nil {
		t.Fatal(err)
	}
	tr, err := outline.New(l).Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Detached.Len() != 2 {
		t.Fatalf("list_detached would show %d bullets, want 2", tr.Detached.Len())
	}
	l.Close()

	export := func(format string) (string, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out."+format)
		var so, se bytes.Buffer
		if code := run([]string{"export", "--store", dir, "--format", format, out}, nil, &so, &se); code != 0 {
			t.Fatalf("%s: exit %d: %s", format, code, se.String())
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(se.String(), "exported 2 detached bullet(s) (3 row(s) with their children)") {
			t.Fatalf("%s: stderr does not count the detached bullets: %q", format, se.String())
		}
		return string(raw), se.String()
	}

	// json: the outline in nodes, the detached bullets in detached
	raw, _ := export("json")
	var v struct {
		Nodes    []map[string]any `json:"nodes"`
		Detached []map[string]any `json:"detached"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 2 || v.Nodes[0]["text"] != "Kept" || v.Nodes[1]["text"] != "kept child" {
		t.Fatalf("json nodes: %v", v.Nodes)
	}
	var texts []string
	for _, r := range v.Detached {
		texts = append(texts, r["text"].(string))
	}
	if strings.Join(texts, "|") != "Orphan|orphan's child|Second orphan" {
		t.Fatalf("json detached rows: %q", texts)
	}
	if r, _ := v.Detached[0]["detached"].(string); !strings.Contains(r, "3kgone1111111") || v.Detached[1]["detached"] != nil || v.Detached[1]["depth"] != 2.0 {
		t.Fatalf("json detached rows not marked: %v", v.Detached)
	}

	// markdown: a marked section at the end; the importer skips it, and
	// says so
	md, _ := export("markdown")
	i := strings.Index(md, markup.DetachedMarker)
	if i < 0 || !strings.Contains(md[i:], "## Detached\n") || !strings.Contains(md[i:], "- Orphan _(detached: ") || !strings.Contains(md[i:], "\n  - orphan's child\n") || strings.Contains(md[:i], "Orphan") {
		t.Fatalf("markdown export:\n%s", md)
	}
	d, err := markup.Markdown(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Nodes) != 1 || d.Nodes[0].Text != "Kept" || len(d.Nodes[0].Children) != 1 || d.SkippedDetached != 2 || d.SkippedRows != 3 || len(d.Notes) != 1 {
		t.Fatalf("markdown import: %+v", d)
	}

	// opml: a marked outline at the end; the importer skips it too
	o, _ := export("opml")
	if !strings.Contains(o, `<outline text="Detached" _detached="section">`) || !strings.Contains(o, `<outline text="Orphan" _detached="parent`) {
		t.Fatalf("opml export:\n%s", o)
	}
	d, err = markup.OPML(o)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Nodes) != 1 || d.Nodes[0].Text != "Kept" || d.SkippedDetached != 2 || d.SkippedRows != 3 || len(d.Notes) != 1 {
		t.Fatalf("opml import: %+v", d)
	}

	// a subtree export leaves them out, and says so
	var so, se bytes.Buffer
	if code := run([]string{"export", "--store", dir, "--format", "markdown", "--node", "3kroot1111111"}, nil, &so, &se); code != 0 {
		t.Fatalf("--node: exit %d: %s", code, se.String())
	}
	if strings.Contains(so.String(), "Orphan") || !strings.Contains(se.String(), "the 2 detached bullet(s) of the repository are not in it") {
		t.Fatalf("--node: stdout %q stderr %q", so.String(), se.String())
	}
}
