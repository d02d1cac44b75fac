package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestWatchSeesAnotherStoresCommit: a commit by a second store on the same
// directory (another process, in real use) is heard by the first store's
// Watch without any read or poll.
func TestWatchSeesAnotherStoresCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heard := make(chan struct{}, 16)
	if err := a.Watch(ctx, func() { heard <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	b, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2",
		Value: map[string]any{"$type": "app.bulleted.node", "text": "from b", "sortKey": "a", "createdAt": "2026-12-04T00:00:00Z"}}
	if _, err := b.Apply(ctx, "", []store.Write{w}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
	case <-time.After(30 * time.Second): // a bound for a stuck watch, not a speed check
		t.Fatal("the other store's commit was not heard")
	}
	// and what a hears is the new commit
	_, rev, err := a.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, brev, _ := b.Head(ctx)
	if rev != brev {
		t.Fatalf("a reads rev %s, b committed %s", rev, brev)
	}
}
