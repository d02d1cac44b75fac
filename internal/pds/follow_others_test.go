package pds_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// TestFollowWriteAfterOthersNotRefused: after another writer's (the
// app's) commit, our insert lands at its first applyWrites, none refused
// (a refused one counts against the PDS's rate limits), counted by the
// requests made:
//   - the stream delivered the app's commit while the follower was still
//     busy with the commit before (its changed callback, as serve's
//     bringing a long list forward): the commit is known to be on its way
//     once it is read off the connection, and the insert waits for it
//     (bounded: StreamWait, then it asks the PDS) instead of going blind;
//   - a write swapped on the head known while such a commit is on its way
//     (taken in since, or still being taken in) is not sent (it would be
//     refused);
//   - the follower took the app's commit in: the insert is planned on it.
//
// Each insert is then read back from the repository.
func TestFollowWriteAfterOthersNotRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	r := g.login()
	// the held follower never brings the commit: the wait runs out and the
	// insert asks (a bound, not a speed check)
	r.StreamWait = time.Second
	dir := &heldDirectory{Directory: r.Directory}
	r.Directory = dir
	e, err := outline.Open(r, outline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var held door // shut: the follower's callback waits (busy)
	var waiting atomic.Int32
	go r.Follow(ctx, func() {
		e.Tree(ctx) // as serve's: the tree brought forward
		waiting.Add(1)
		held.pass()
		waiting.Add(-1)
	}, func(err error) { t.Logf("follow: %v", err) })
	until(t, "live", r.Live)
	var texts []string
	insert := func(what string) *outline.Outcome {
		t.Helper()
		w0, h0, d0 := r.Stats.Writes.Load(), r.Stats.Heads.Load(), r.Stats.Diffs.Load()
		text := fmt.Sprintf("%s (%d)", what, len(texts))
		out, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: text}}}, false)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, text)
		w, h, d := r.Stats.Writes.Load()-w0, r.Stats.Heads.Load()-h0, r.Stats.Diffs.Load()-d0
		t.Logf("%s: %d applyWrites, %d getLatestCommit, %d getRepo?since", what, w, h, d)
		if w != 1 {
			t.Fatalf("%s: %d applyWrites (%d refused); want 1, none refused (%s)", what, w, w-1, pds.LastGap(r))
		}
		return out
	}
	insert("by the agent")

	// the follower busy with our own commit's callback when the app's
	// commit comes
	held.shut()
	insert("the follower is busy after this one")
	until(t, "the follower busy", func() bool { return waiting.Load() > 0 })
	rev := g.edit(t, ctx)
	until(t, "the app's commit read off the connection", func() bool { return pds.LastHeard(r) >= rev })
	out := insert("after the app's commit, delivered, the follower busy")

	// a write swapped on the head known, the app's next commit on its way
	rev = g.edit(t, ctx)
	until(t, "the app's next commit read off the connection", func() bool { return pds.LastHeard(r) >= rev })
	w0 := r.Stats.Writes.Load()
	_, err = r.Apply(ctx, out.Commits[0].Commit, []store.Write{{Op: store.Create, Collection: lexicon.Node, RKey: "3kbehindnotsent",
		Value: map[string]any{"$type": lexicon.Node, "text": "not sent", "sortKey": "a", "createdAt": "2026-12-06T00:00:00.000Z"}}})
	if !errors.Is(err, store.ErrStale) || r.Stats.Writes.Load() != w0 || r.Stats.NotSent.Load() != 1 {
		t.Fatalf("a write swapped on the head known, a newer commit on its way: %v, %d applyWrites sent, %d not sent; want ErrStale, none sent, 1 not sent",
			err, r.Stats.Writes.Load()-w0, r.Stats.NotSent.Load())
	}
	held.open()
	until(t, "the app's commit taken in", func() bool { return pds.KeptRev(r) >= rev })

	// the same, the app's commit heard and still being taken in (its
	// signature's check waits for the directory)
	known, err := r.Snapshot(ctx) // the head known (the stream is live)
	if err != nil {
		t.Fatal(err)
	}
	dir.hold.shut()
	rev = g.edit(t, ctx)
	until(t, "the app's next commit read off the connection", func() bool { return pds.LastHeard(r) >= rev })
	w0 = r.Stats.Writes.Load()
	_, err = r.Apply(ctx, known.Commit, []store.Write{{Op: store.Create, Collection: lexicon.Node, RKey: "3kbehindnotsent",
		Value: map[string]any{"$type": lexicon.Node, "text": "not sent", "sortKey": "a", "createdAt": "2026-12-06T00:00:00.000Z"}}})
	if !errors.Is(err, store.ErrStale) || r.Stats.Writes.Load() != w0 || r.Stats.NotSent.Load() != 2 {
		t.Fatalf("a write swapped on the head known, a newer commit being taken in: %v, %d applyWrites sent, %d not sent; want ErrStale, none sent, 2 not sent in all",
			err, r.Stats.Writes.Load()-w0, r.Stats.NotSent.Load())
	}
	dir.hold.open()
	until(t, "the app's commit taken in", func() bool { return pds.KeptRev(r) >= rev })

	// the follower took the app's commit in
	for range 3 {
		rev := g.edit(t, ctx)
		until(t, "the app's commit taken in", func() bool { return pds.KeptRev(r) >= rev })
		insert("after the app's commit, taken in")
	}

	s, err := g.login().SnapshotCAR(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rec := range s.Records {
		if v, ok := rec.Value.Get("text").(string); ok {
			got = append(got, v)
		}
	}
	for _, want := range texts {
		if !slices.Contains(got, want) {
			t.Fatalf("%q is not in the repository", want)
		}
	}
	if slices.Contains(got, "not sent") {
		t.Fatal("the write that was not sent is in the repository")
	}
}

// heldDirectory is a directory whose look-ups of a DID wait while hold is
// shut.
type heldDirectory struct {
	identity.Directory
	hold door
}

func (d *heldDirectory) LookupDID(ctx context.Context, did syntax.DID) (*identity.Identity, error) {
	d.hold.pass()
	return d.Directory.LookupDID(ctx, did)
}

// door holds up those who pass it while it is shut.
type door struct {
	mu     sync.Mutex
	closed chan struct{}
}

func (g *door) shut() {
	g.mu.Lock()
	g.closed = make(chan struct{})
	g.mu.Unlock()
}

func (g *door) open() {
	g.mu.Lock()
	if g.closed != nil {
		close(g.closed)
		g.closed = nil
	}
	g.mu.Unlock()
}

func (g *door) pass() {
	g.mu.Lock()
	ch := g.closed
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}
