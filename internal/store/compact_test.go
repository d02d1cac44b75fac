package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// churn writes n bullets and then edits each of them rounds times, so most
// of the log is blocks no commit uses any more.
func churn(t *testing.T, l *store.Local, n, rounds int) {
	t.Helper()
	ctx := context.Background()
	var ws []store.Write
	for i := range n {
		ws = append(ws, nodeW(fmt.Sprintf("3kaaaaaa%05d", i), fmt.Sprint("v0-", i)))
	}
	for r := 0; r <= rounds; r++ {
		for len(ws) > 0 {
			k := min(len(ws), store.MaxBatch)
			if _, err := l.Apply(ctx, "", ws[:k]); err != nil {
				t.Fatal(err)
			}
			ws = ws[k:]
		}
		for i := range n {
			w := nodeW(fmt.Sprintf("3kaaaaaa%05d", i), fmt.Sprint("v", r+1, "-", i))
			w.Op = store.Update
			ws = append(ws, w)
		}
	}
}

func logSize(t *testing.T, dir string) int64 {
	t.Helper()
	info, err := os.Stat(filepath.Join(dir, "blocks.log"))
	if err != nil {
		t.Fatal(err)
	}
	return info.Size()
}

// Opening a store whose log is mostly unused blocks compacts it: the log
// shrinks, the records read back the same, and another process that had
// the store open before goes on reading and writing through the new log.
func TestCompactAtOpen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	// b is another process's view, opened before the compaction (and
	// before there was anything to compact)
	b, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	churn(t, a, 600, 5)
	before, err := a.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sb, err := b.Snapshot(ctx); err != nil || sb.Commit != before.Commit {
		t.Fatalf("b does not follow a: %v", err)
	}
	size0 := logSize(t, dir)
	a.Close()
	c, err := store.OpenLocal(dir) // compacts
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	size1 := logSize(t, dir)
	if size1 > size0/3 {
		t.Fatalf("log %d bytes before, %d after opening: not compacted", size0, size1)
	}
	after, err := c.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Commit != before.Commit || !reflect.DeepEqual(after.Records, before.Records) {
		t.Fatal("the compacted store does not read the same")
	}
	// b writes through the new log, c sees it, a fresh open sees it
	res, err := b.Apply(ctx, before.Commit, []store.Write{nodeW("3kbbbbbbbbbb2", "after compaction")})
	if err != nil {
		t.Fatalf("write by a process that opened before the compaction: %v", err)
	}
	sc, err := c.Snapshot(ctx)
	if err != nil || sc.Commit != res.Commit || len(sc.Records) != len(before.Records)+1 {
		t.Fatalf("c after b's write: %v %d records", err, len(sc.Records))
	}
	d, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sd, _ := d.Snapshot(ctx)
	if sd.Commit != res.Commit || !reflect.DeepEqual(sd.Records, sc.Records) {
		t.Fatal("a fresh open does not read what b wrote")
	}
	rep, err := d.Compact(ctx)
	if err != nil || rep.Kept > rep.Blocks {
		t.Fatalf("second compaction: %+v %v", rep, err)
	}
	if s, _ := d.Snapshot(ctx); s.Commit != res.Commit || !reflect.DeepEqual(s.Records, sc.Records) {
		t.Fatal("records differ after a compaction on demand")
	}
}

// A compaction killed before its rename leaves the old log whole; the next
// open removes the unfinished file and compacts again.
func TestCompactInterrupted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	churn(t, a, 600, 5)
	want, _ := a.Snapshot(ctx)
	size0 := logSize(t, dir)
	killed := errors.New("killed")
	store.BeforeCompactRename(func() error { return killed })
	_, err = a.Compact(ctx)
	store.BeforeCompactRename(nil)
	if !errors.Is(err, killed) {
		t.Fatalf("compaction: %v", err)
	}
	if logSize(t, dir) != size0 {
		t.Fatal("the log changed although the compaction did not finish")
	}
	// what a killed process leaves: the unfinished file
	if err := os.WriteFile(filepath.Join(dir, "blocks.log.compact"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, _ := b.Snapshot(ctx)
	if got.Commit != want.Commit || !reflect.DeepEqual(got.Records, want.Records) {
		t.Fatal("records differ after the interrupted compaction")
	}
	if _, err := os.Stat(filepath.Join(dir, "blocks.log.compact")); !os.IsNotExist(err) {
		t.Fatalf("the unfinished compaction file is still there: %v", err)
	}
	if logSize(t, dir) >= size0/3 {
		t.Fatal("not compacted at the next open")
	}
}
