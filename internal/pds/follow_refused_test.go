package pds_test

import (
	"context"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/identity"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Right after the app's edit, an insert planned on the followed head
// before the stream brought the edit is refused for its swapCommit; the
// commit it was refused for is then known to be on its way, and the
// insert waits for the stream to bring it rather than read the PDS's
// difference. From then on, another writer being active, each insert asks
// the PDS's head first (getLatestCommit) and waits for the stream to
// bring it: no write is refused again, and no getRepo is made.
func TestFollowRefusedWriteWaitsForStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	r.StreamWait = 5 * time.Second // a bound for a stuck stream, not a speed check
	e, err := outline.Open(r, outline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// as serve follows: each commit taken in brings the engine's tree
	// forward (a read, which must not wait for the commit being taken in)
	go r.Follow(ctx, func() { e.Tree(ctx) }, func(err error) { t.Logf("follow: %v", err) })
	until(t, "live", r.Live)
	if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "by the agent"}}}, false); err != nil {
		t.Fatal(err)
	}
	refused, asked, slow := 0, int64(0), 0
	for i := range 12 {
		g.edit(t, ctx)
		gaps, waits := r.Stats.StreamGaps.Load(), r.Stats.StreamTimeouts.Load()
		h0, d0, w0 := r.Stats.Heads.Load(), r.Stats.Diffs.Load()+r.Stats.CARs.Load()+r.Stats.ListPages.Load(), r.Stats.Writes.Load()
		if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "right after the app"}}}, false); err != nil {
			t.Fatal(err)
		}
		h, d, w := r.Stats.Heads.Load()-h0, r.Stats.Diffs.Load()+r.Stats.CARs.Load()+r.Stats.ListPages.Load()-d0, r.Stats.Writes.Load()-w0
		refused += int(w - 1)
		asked += h
		if r.Stats.StreamTimeouts.Load() != waits {
			// the stream was slower than StreamWait (a PDS loaded by
			// other tests' commits): the insert asked instead
			slow++
			t.Logf("insert %d: the stream did not bring the app's edit within %s", i, r.StreamWait)
			continue
		}
		if r.Stats.StreamGaps.Load() != gaps {
			// the follower read after a gap (a late #sync of the new
			// account, on a loaded PDS): its reads are not the insert's
			t.Logf("insert %d: the follower met a gap (%s) and read", i, pds.LastGap(r))
			continue
		}
		if d != 0 || h > 1 || w > 2 {
			t.Fatalf("insert %d right after the app's edit: %d getRepo/listRecords, %d getLatestCommit, %d applyWrites; want 0, at most 1, at most 2 (%s)", i, d, h, w, pds.LastGap(r))
		}
	}
	t.Logf("12 inserts right after the app's edits: %d refused, %d getLatestCommit", refused, asked)
	if slow > 6 {
		t.Fatalf("in %d of 12 inserts the wait for a commit on its way ran out (%s)", slow, r.StreamWait)
	}
	if refused > 1 {
		t.Fatalf("%d of 12 inserts right after the app's edits were refused; want at most the first", refused)
	}
}

// Our own commit arriving on the stream is taken in without a signature
// check (the PDS answered our write with its CID, and its blocks are
// checked against the CID): with a directory that holds another key, the
// app's commit is refused (TestFollowRefusesUnverifiedCommits), ours is
// taken in, no gap.
func TestFollowOwnCommitNotVerified(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	key, err := atcrypto.GeneratePrivateKeyK256()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	dir := identity.NewMockDirectory()
	dir.Insert(identity.Identity{DID: g.acct.DID, Keys: map[string]identity.VerificationMethod{
		"atproto": {Type: "Multikey", PublicKeyMultibase: pub.Multibase()}}})
	r.Directory = dir
	follow(t, ctx, r)
	until(t, "live", r.Live)
	head, _, err := r.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, head, []store.Write{{Op: store.Create, Collection: lexicon.Node, RKey: "3kownunverif2",
		Value: map[string]any{"$type": lexicon.Node, "text": "ours", "sortKey": "a", "createdAt": "2026-12-06T00:00:00.000Z"}}})
	if err != nil {
		t.Fatal(err)
	}
	until(t, "taken in", func() bool { return pds.KeptRev(r) >= res.Rev })
	if s, g := r.Stats.Streamed.Load(), r.Stats.StreamGaps.Load(); s != 1 || g != 0 {
		t.Fatalf("our own commit: %d taken in from the stream, %d gaps (%s); want 1, 0", s, g, pds.LastGap(r))
	}
}
