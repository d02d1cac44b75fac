package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

func changedList(s *store.Since) string {
	var b []string
	for _, c := range s.Changed {
		kind := "updated"
		switch {
		case c.BeforeAbsent:
			kind = "created"
		case c.Absent:
			kind = "deleted"
		}
		b = append(b, fmt.Sprintf("%s %s %s@%s", c.RKey, kind, c.After.Str("text"), c.Rev))
	}
	return strings.Join(b, "; ")
}

// History lists exactly the records changed after a rev, by this handle
// and by another on the same directory, each with the commit that last
// changed it; from a time, the state then; a rev the repository never had
// is refused; after a compaction the history before it is said to be gone.
func TestLocalHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r0, err := a.Apply(ctx, "", []store.Write{nodeW("3kaaaaaaaaaa2", "one"), nodeW("3kaaaaaaaaaa3", "two"), nodeW("3kaaaaaaaaaa4", "three")})
	if err != nil {
		t.Fatal(err)
	}
	up := nodeW("3kaaaaaaaaaa2", "one edited")
	up.Op = store.Update
	r1, err := a.Apply(ctx, "", []store.Write{up})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := b.Apply(ctx, "", []store.Write{nodeW("3kaaaaaaaaaa5", "four"), {Op: store.Delete, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa3"}})
	if err != nil {
		t.Fatal(err)
	}
	// created and deleted again since: nothing to tell
	r3, err := a.Apply(ctx, "", []store.Write{nodeW("3kaaaaaaaaaa6", "gone")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, "", []store.Write{{Op: store.Delete, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa6"}}); err != nil {
		t.Fatal(err)
	}
	_ = r3
	s, err := a.History(ctx, store.HistoryQuery{Rev: r0.Rev})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("3kaaaaaaaaaa2 updated one edited@%s; 3kaaaaaaaaaa3 deleted @%s; 3kaaaaaaaaaa5 created four@%s", r1.Rev, r2.Rev, r2.Rev)
	if got := changedList(s); got != want || s.Cut != "" || s.Rev != r0.Rev || s.Commits != 4 {
		t.Fatalf("since %s:\n got %s (cut %q, from %s, %d commits)\nwant %s", r0.Rev, got, s.Cut, s.Rev, s.Commits, want)
	}
	if s.Changed[0].Before.Str("text") != "one" || s.Changed[1].Before.Str("text") != "two" {
		t.Fatalf("before values: %q %q", s.Changed[0].Before.Str("text"), s.Changed[1].Before.Str("text"))
	}
	// until a rev: the pages of one answer count to the same revision
	if s, err := b.History(ctx, store.HistoryQuery{Rev: r0.Rev, Until: r1.Rev}); err != nil || changedList(s) != "3kaaaaaaaaaa2 updated one edited@"+r1.Rev {
		t.Fatalf("until %s: %v %v", r1.Rev, s, err)
	}
	// since a time: the state then (r1's commit was made at its rev's time)
	tid, _ := syntax.ParseTID(r1.Rev)
	s, err = b.History(ctx, store.HistoryQuery{Time: tid.Time()})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := changedList(s), fmt.Sprintf("3kaaaaaaaaaa3 deleted @%s; 3kaaaaaaaaaa5 created four@%s", r2.Rev, r2.Rev); got != want || s.Rev != r1.Rev {
		t.Fatalf("since %s:\n got %s (from %s)\nwant %s", tid.Time(), got, s.Rev, want)
	}
	// revisions the repository never had
	for _, rev := range []string{"3kaaaaaaaaaaa", syntax.NewTIDNow(0).String(), "not-a-tid"} {
		if _, err := a.History(ctx, store.HistoryQuery{Rev: rev}); !errors.Is(err, store.ErrUnknownRev) {
			t.Errorf("rev %s: %v, want ErrUnknownRev", rev, err)
		}
	}
	// compaction keeps only the commit current then: what came before is
	// said to be gone, what came after is listed
	if _, err := a.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	up = nodeW("3kaaaaaaaaaa4", "three edited")
	up.Op = store.Update
	r5, err := b.Apply(ctx, "", []store.Write{up})
	if err != nil {
		t.Fatal(err)
	}
	s, err = a.History(ctx, store.HistoryQuery{Rev: r0.Rev})
	if err != nil {
		t.Fatal(err)
	}
	if got := changedList(s); got != "3kaaaaaaaaaa4 updated three edited@"+r5.Rev || !strings.Contains(s.Cut, "compacted") {
		t.Fatalf("after compaction: %s (cut %q)", got, s.Cut)
	}
}

// BenchmarkHistory: what changed since the first of 200 commits of 10
// edits each on a store of 20,000 records (each commit's tree read only
// where it differs from the one before).
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	l, err := store.OpenLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	var ws []store.Write
	for i := range 20_000 {
		ws = append(ws, nodeW(fmt.Sprintf("3kaaaaaa%05d", i), fmt.Sprint("bullet ", i)))
		if len(ws) == store.MaxBatch {
			if _, err := l.Apply(ctx, "", ws); err != nil {
				b.Fatal(err)
			}
			ws = ws[:0]
		}
	}
	_, rev0, _ := l.Head(ctx)
	for c := range 200 {
		ws = ws[:0]
		for j := range 10 {
			w := nodeW(fmt.Sprintf("3kaaaaaa%05d", (c*97+j*1999)%20_000), fmt.Sprint("edit ", c, j))
			w.Op = store.Update
			ws = append(ws, w)
		}
		if _, err := l.Apply(ctx, "", ws); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		s, err := l.History(ctx, store.HistoryQuery{Rev: rev0})
		if err != nil || s.Commits != 200 || len(s.Changed) == 0 {
			b.Fatalf("%v %v", s, err)
		}
	}
}
