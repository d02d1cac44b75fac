package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sync"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store/storetest"
)

func openLocal(t *testing.T) *store.Local {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestLocalSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Repository { return openLocal(t) })
}

func nodeW(rk, text string) store.Write {
	return store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: rk, Value: map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "a0", "createdAt": "2026-07-30T09:30:00.000Z"}}
}

func TestLocalReopenAndTornLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Apply(ctx, "", []store.Write{nodeW("3kaaaaaaaaaa2", "one")}); err != nil {
		t.Fatal(err)
	}
	s1, _ := l.Snapshot(ctx)
	did := l.DID()
	l.Close()
	// simulate a crash mid-commit: garbage appended to the log, HEAD untouched
	f, _ := os.OpenFile(filepath.Join(dir, "blocks.log"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{0x80, 0x05, 1, 2, 3})
	f.Close()
	l2, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	s2, _ := l2.Snapshot(ctx)
	if s2.Commit != s1.Commit || len(s2.Records) != 1 || l2.DID() != did {
		t.Fatalf("reopen: %v %v", s2.Commit, s1.Commit)
	}
	if _, err := l2.Apply(ctx, s2.Commit, []store.Write{nodeW("3kbbbbbbbbbb2", "two")}); err != nil {
		t.Fatal(err)
	}
}

func BenchmarkLocalSingleCommits(b *testing.B) {
	ctx := context.Background()
	l, _ := store.OpenLocal(b.TempDir())
	defer l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rk := tidN(i)
		if _, err := l.Apply(ctx, "", []store.Write{nodeW(rk, "x")}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

func BenchmarkLocal200WriteCommit(b *testing.B) {
	ctx := context.Background()
	l, _ := store.OpenLocal(b.TempDir())
	defer l.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ws := make([]store.Write, 200)
		for j := range ws {
			ws[j] = nodeW(tidN(i*200+j), "x")
		}
		if _, err := l.Apply(ctx, "", ws); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}

var clock = syntax.NewTIDClock(0)

func tidN(_ int) string { return clock.Next().String() }

// The snapshot carried forward across commits equals a freshly loaded one.
func TestLocalSnapshotCarriedForward(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	node := func(text string) map[string]any {
		return map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "a", "createdAt": "2026-01-01T00:00:00Z"}
	}
	if _, err := l.Snapshot(ctx); err != nil { // prime the cache
		t.Fatal(err)
	}
	steps := [][]store.Write{
		{{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaa2b", Value: node("b")},
			{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaa2a", Value: node("a")},
			{Op: store.Create, Collection: "app.bulleted.note", RKey: "3kaaaaaaaaa2a", Value: map[string]any{"$type": "app.bulleted.note", "text": "n", "createdAt": "2026-01-01T00:00:00Z"}}},
		{{Op: store.Update, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaa2b", Value: node("b2")},
			{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaa2c", Value: node("c")}},
		{{Op: store.Delete, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaa2a"}},
	}
	for _, ws := range steps {
		if _, err := l.Apply(ctx, "", ws); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := l.Snapshot(ctx)
	l.Close()
	r, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want, _ := r.Snapshot(ctx)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("carried-forward snapshot differs from a reload:\n%+v\n%+v", got, want)
	}
	if len(got.Records) != 3 {
		t.Fatalf("want 3 records, got %d", len(got.Records))
	}
}

// Two processes on one store directory (here two Locals): each sees what
// the other committed, a write planned on a stale snapshot is a conflict,
// and concurrent writers lose nothing.
func TestLocalSharedDirectory(t *testing.T) {
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
	if a.DID() != b.DID() {
		t.Fatal("two signing keys for one store")
	}
	sa, _ := a.Snapshot(ctx)
	if _, err := a.Apply(ctx, sa.Commit, []store.Write{nodeW("3kaaaaaaaaaa2", "from a")}); err != nil {
		t.Fatal(err)
	}
	// b planned on the commit before a's write
	if _, err := b.Apply(ctx, sa.Commit, []store.Write{nodeW("3kaaaaaaaaab2", "from b")}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("write on a stale snapshot: %v", err)
	}
	sb, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sb.Records) != 1 || sb.Records[0].Value.Get("text") != "from a" {
		t.Fatalf("b does not see a's write: %+v", sb.Records)
	}
	if _, err := b.Apply(ctx, sb.Commit, []store.Write{nodeW("3kaaaaaaaaab2", "from b")}); err != nil {
		t.Fatal(err)
	}

	// concurrent writers, each re-reading on conflict: all writes land
	var wg sync.WaitGroup
	for i, l := range []*store.Local{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				w := nodeW(fmt.Sprintf("3kc%d%09d", i, j), fmt.Sprint("writer ", i))
				for {
					s, err := l.Snapshot(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					_, err = l.Apply(ctx, s.Commit, []store.Write{w})
					if errors.Is(err, store.ErrConflict) {
						continue
					}
					if err != nil {
						t.Error(err)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	sa, _ = a.Snapshot(ctx)
	sb, _ = b.Snapshot(ctx)
	if len(sa.Records) != 42 || !reflect.DeepEqual(sa, sb) {
		t.Fatalf("after concurrent writers: %d and %d records", len(sa.Records), len(sb.Records))
	}
	// and a third opener (a restart) reads the same
	c, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, _ := c.Snapshot(ctx)
	if !reflect.DeepEqual(sa.Records, sc.Records) || sa.Commit != sc.Commit {
		t.Fatal("reopened store differs")
	}
}

// TestReopenValuesOwnTheirMemory opens stores from their mapped logs (every
// test store is mapped, see export_test.go) and reads every value after the
// mapping is gone: a record with byte strings (atdata's decoder), and plain
// ones, across a reopen, another process's commit (the refresh path) and a
// compaction. A value that still pointed into the mapping would fault.
func TestReopenValuesOwnTheirMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	binary := store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaab2", Value: map[string]any{
		"$type": "app.bulleted.node", "text": "with bytes", "sortKey": "a1", "createdAt": "2026-07-30T09:30:00.000Z",
		"extra": map[string]any{"raw": atdata.Bytes([]byte("0123456789abcdef")), "list": []any{atdata.Bytes([]byte{1, 2, 3}), "s"}},
	}}
	if _, err := l.Apply(ctx, "", []store.Write{nodeW("3kaaaaaaaaaa2", "plain"), binary}); err != nil {
		t.Fatal(err)
	}
	want, err := l.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	check := func(name string, l *store.Local) {
		t.Helper()
		runtime.GC()
		got, err := l.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, r := range got.Records {
			for _, w := range want.Records {
				if r.RKey == w.RKey {
					n++
					if !reflect.DeepEqual(r.Value, w.Value) {
						t.Errorf("%s: %s reads %#v, want %#v", name, r.RKey, r.Value, w.Value)
					}
				}
			}
		}
		if n != len(want.Records) {
			t.Errorf("%s: %d of %d records", name, n, len(want.Records))
		}
	}
	a, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	check("reopened", a)
	// another process commits: a reads the new commit on its next call
	b, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Apply(ctx, "", []store.Write{nodeW("3kaaaaaaaaac2", "third")}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if _, err := a.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	check("after another process's commit", a)
	if _, err := a.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	check("compacted", a)
	c, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check("reopened after compaction", c)
}
