package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store/storetest"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// A store in a read-only directory reads (call read_outline) and exports
// (every format), and a write through the same commands is refused with a
// typed error that says the store is read-only, not one to retry.
func TestReadOnlyStore(t *testing.T) {
	dir := storetest.ReadOnlyDir(t, func(dir string) {
		l, err := store.OpenLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		e := outline.New(l)
		if _, err := e.DoFunc(context.Background(), false, func(p *outline.Planner) error {
			return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "Groceries", Children: []intent.NewNode{{Text: "Coffee"}}}}}.Plan(p)
		}); err != nil {
			t.Fatal(err)
		}
		l.Close()
		os.Remove(filepath.Join(dir, "lock"))
	})
	call := func(args ...string) (int, string, string) {
		var so, se bytes.Buffer
		code := run(args, nil, &so, &se)
		return code, so.String(), se.String()
	}
	if code, so, se := call("call", "--store", dir, "read_outline", `{"format":"text"}`); code != 0 || !strings.Contains(so, "Coffee") {
		t.Fatalf("read_outline: exit %d\n%s\n%s", code, so, se)
	}
	if code, so, se := call("call", "--store", dir, "search", `{"text":"coffee"}`); code != 0 || !strings.Contains(so, "Coffee") {
		t.Fatalf("search: exit %d\n%s\n%s", code, so, se)
	}
	for _, f := range []string{"json", "markdown", "opml", "car"} {
		out := filepath.Join(t.TempDir(), "out."+f)
		if code, so, se := call("export", "--store", dir, "--format", f, out); code != 0 {
			t.Fatalf("export %s: exit %d\n%s\n%s", f, code, so, se)
		}
		if raw, err := os.ReadFile(out); err != nil || len(raw) == 0 || f != "car" && !bytes.Contains(raw, []byte("Coffee")) {
			t.Fatalf("export %s: %v, %q", f, err, raw)
		}
	}
	code, so, se := call("call", "--store", dir, "insert_after", `{"nodes":[{"text":"Milk"}]}`)
	if code == 0 || !strings.Contains(so+se, "the embedded store is read-only: "+dir) || !strings.Contains(so+se, "nothing was written") || strings.Contains(so+se, "retry in a moment") {
		t.Fatalf("a write on a read-only store: exit %d\n%s\n%s", code, so, se)
	}
	// the result an agent gets: typed, not retryable
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := tools.ErrorResult(l.WriteRefused()).StructuredContent.(map[string]any)["error"].(map[string]any)
	if e["kind"] != "unavailable" || e["retryable"] != false || !strings.Contains(e["message"].(string), "read-only") {
		t.Fatalf("the write's error: %v", e)
	}
	if _, err := os.Stat(filepath.Join(dir, "lock")); err == nil {
		t.Fatal("a lock file was made")
	}
}
