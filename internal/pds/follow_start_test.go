package pds_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestFollowFreshStartReadsCommitAtOnce: a follower started on a kept read
// and stream position (a restarted serve) catches up by replaying; a
// commit another client makes just then, read at once, is there, every
// time: until the stream can be trusted to have brought what happens
// right after start, reads ask the PDS (and say so).
func TestFollowFreshStartReadsCommitAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	g.followThenStop(t, ctx, dir, "", 1)
	for i := range 6 {
		r := g.login()
		r.Cache, r.Cursor = filepath.Join(dir, "repo.car"), filepath.Join(dir, "stream.json")
		fctx, stop := context.WithCancel(ctx)
		_, done := follow(t, fctx, r)
		// the follower has replayed to the PDS's head (the moment a read
		// was answered from the kept state before)
		until(t, "caught up", func() bool { return pds.CaughtUp(r) })
		rev := g.edit(t, ctx)
		rctx, notes := store.WithCallNotes(ctx)
		s, err := r.Snapshot(rctx)
		if err != nil {
			t.Fatal(err)
		}
		if s.Rev < rev {
			t.Fatalf("start %d: the commit made right after start (%s) is missing from a read at once (at %s)", i, rev, s.Rev)
		}
		said := notes.Take()
		if len(said) != 1 || !strings.Contains(said[0], "asked the PDS: the commit stream followed since start has not caught up yet") {
			t.Fatalf("start %d: a read that asked the PDS while catching up said %q", i, said)
		}
		if r.Stats.CARs.Load() != 0 {
			t.Fatalf("start %d: %d whole read(s) after a restart with a kept position", i, r.Stats.CARs.Load())
		}
		stop()
		<-done
	}
}

// TestFollowRestartFirstReadCost: the first read of a restarted follower
// (kept read and position) asks the PDS what changed since the kept commit
// (one getRepo?since, never a whole read: the replay cannot yet vouch for
// what happened just after start), says why in the call's notes, and once
// the stream has caught up and settled, reads cost nothing and say nothing.
func TestFollowRestartFirstReadCost(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	dir := t.TempDir()
	g.followThenStop(t, ctx, dir, "", 2)
	r := g.login()
	r.Cache, r.Cursor = filepath.Join(dir, "repo.car"), filepath.Join(dir, "stream.json")
	errs, _ := follow(t, ctx, r)
	rctx, notes := store.WithCallNotes(ctx)
	if _, err := r.Snapshot(rctx); err != nil {
		t.Fatal(err)
	}
	if cars, diffs := r.Stats.CARs.Load(), r.Stats.Diffs.Load(); cars != 0 || diffs > 1 {
		t.Fatalf("the first read after a restart: %d whole read(s), %d getRepo?since, want 0 and at most 1 (heads %d, streamed %d; said %q)", cars, diffs, r.Stats.Heads.Load(), r.Stats.Streamed.Load(), errs())
	}
	if said := notes.Take(); len(said) != 1 || !strings.Contains(said[0], "has not caught up yet") {
		t.Fatalf("the first read after a restart said %q", said)
	}
	until(t, "live", r.Live)
	before := requests(r)
	rctx, notes = store.WithCallNotes(ctx)
	if _, err := r.Snapshot(rctx); err != nil {
		t.Fatal(err)
	}
	if n := requests(r) - before; n != 0 {
		t.Fatalf("a read once caught up made %d request(s)", n)
	}
	if said := notes.Take(); len(said) != 0 {
		t.Fatalf("a read once caught up said %q", said)
	}
	if r.Stats.CARs.Load() != 0 {
		t.Fatalf("%d whole read(s) after a restart with a kept position", r.Stats.CARs.Load())
	}
}
