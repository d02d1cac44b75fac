package pds_test

import (
	"context"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
)

// Right after the app's edit, an insert planned on the followed head
// before the stream brought the edit is refused for its swapCommit; the
// commit it was refused for is then known to be on its way, and the
// insert waits for the stream to bring it rather than asking the PDS
// (no getLatestCommit, no getRepo): at most two applyWrites, no read.
func TestFollowRefusedWriteWaitsForStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	follow(t, ctx, r)
	until(t, "live", r.Live)
	e, err := outline.Open(r, outline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Do(ctx, intent.Insert{Nodes: []outline.NewNode{{Text: "by the agent"}}}, false); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := range 12 {
		g.edit(t, ctx)
		reads := func() int64 {
			return r.Stats.Heads.Load() + r.Stats.Diffs.Load() + r.Stats.CARs.Load() + r.Stats.ListPages.Load()
		}
		r0, w0 := reads(), r.Stats.Writes.Load()
		if _, err := e.Do(ctx, intent.Insert{Nodes: []outline.NewNode{{Text: "right after the app"}}}, false); err != nil {
			t.Fatal(err)
		}
		rd, w := reads()-r0, r.Stats.Writes.Load()-w0
		if w == 2 {
			refused++
		}
		if rd != 0 || w > 2 {
			t.Fatalf("insert %d right after the app's edit: %d reads, %d applyWrites; want 0 and at most 2 (%s)", i, rd, w, pds.LastGap(r))
		}
	}
	t.Logf("%d of 12 inserts were refused once (planned before the stream brought the app's edit)", refused)
}
