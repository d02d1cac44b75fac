package tools

import (
	"context"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestWarmBuildsTheIndex: after Warm the search index is built at the
// current commit (without it, the first search derives every bullet).
func TestWarmBuildsTheIndex(t *testing.T) {
	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := outline.New(l)
	if _, err := e.Do(ctx, intent.Insert{Nodes: []outline.NewNode{{Text: "alpha"}, {Text: "beta"}, {Text: "gamma"}}}, false); err != nil {
		t.Fatal(err)
	}
	env := &Env{Engine: e}
	if err := env.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	tr, _ := e.Tree(ctx)
	x := env.index(tr.DID.String())
	if x.Derived != 3 {
		t.Fatalf("warm derived %d entries, want 3", x.Derived)
	}
}
