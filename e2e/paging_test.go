package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// seedGenerated writes a generated outline of n bullets (outlinegen: 3–5
// levels, a level of 2,000+ children, todos, notes, tags, mentions) into a
// new embedded store in dir, and returns the key of the bullet with the
// most children, its children in outline order and its whole subtree.
func seedGenerated(t *testing.T, dir string, n int) (big string, kids, subtree []string) {
	t.Helper()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	did := l.DID().String()
	recs := outlinegen.Generate(n, 1)
	ws := make([]store.Write, 0, len(recs))
	type child struct{ sortKey, key string }
	children := map[string][]child{}
	for _, r := range recs {
		v := map[string]any{}
		for k, x := range r.Value.Map() {
			if s, ok := x.(string); ok {
				x = strings.ReplaceAll(s, "at://"+outlinegen.DID+"/", "at://"+did+"/")
			}
			v[k] = x
		}
		if r.Collection == lexicon.Node {
			p, _ := v["parent"].(string)
			p = p[strings.LastIndex(p, "/")+1:]
			children[p] = append(children[p], child{v["sortKey"].(string), r.RKey})
		}
		ws = append(ws, store.Write{Op: store.Create, Collection: r.Collection, RKey: r.RKey, Value: v})
	}
	for len(ws) > 0 {
		k := min(len(ws), store.MaxBatch)
		if _, err := l.Apply(context.Background(), "", ws[:k]); err != nil {
			t.Fatal(err)
		}
		ws = ws[k:]
	}
	for p, cs := range children {
		if p != "" && len(cs) > len(children[big]) {
			big = p
		}
	}
	// the generator writes siblings in order
	for _, c := range children[big] {
		kids = append(kids, c.key)
	}
	var walk func(p string)
	walk = func(p string) {
		for _, c := range children[p] {
			subtree = append(subtree, c.key)
			walk(c.key)
		}
	}
	walk(big)
	return big, kids, subtree
}

// Issue #25, end to end with the official MCP TypeScript SDK client on a
// generated 20,000-bullet outline: the client pages the big level
// (read_outline, then search under it) while it moves bullets between
// pages, from before the cursor to after it and the reverse; every child
// comes exactly once, and every page after a move says that the outline
// changed (text and structured content). paging.mjs does the calls and the
// checks.
func TestSDKClientPagingWhileMoving(t *testing.T) {
	n := 20_000
	if testing.Short() {
		n = 5_000
	}
	t0 := time.Now()
	bin := build(t)
	t.Logf("built in %v", time.Since(t0))
	data := t.TempDir()
	t0 = time.Now()
	big, kids, subtree := seedGenerated(t, data, n)
	t.Logf("seeded in %v", time.Since(t0))
	if len(kids) < 2000 {
		t.Fatalf("the generated outline's biggest level has %d children", len(kids))
	}
	want, err := json.Marshal(map[string]any{"big": big, "children": kids, "subtree": subtree})
	if err != nil {
		t.Fatal(err)
	}
	wantFile := filepath.Join(t.TempDir(), "want.json")
	if err := os.WriteFile(wantFile, want, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, node, err := pdstest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, filepath.Join(dir, "paging.mjs"), wantFile, bin, "--store", data)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK ") {
		t.Fatalf("SDK client: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}
