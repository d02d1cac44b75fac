package store_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store/storetest"
)

// A store in a read-only directory (a read-only medium, or one this
// process may not write) opens for reading: its records read and export
// as they were, no lock file is made, and every write is refused with
// ErrReadOnly saying so, with nothing written.
func TestLocalReadOnlyDirectory(t *testing.T) {
	ctx := context.Background()
	var commit string
	var export []byte
	dir := storetest.ReadOnlyDir(t, func(dir string) {
		l, err := store.OpenLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.Apply(ctx, "", []store.Write{nodeW("3kaaaaaaaaa22", "one"), nodeW("3kaaaaaaaab22", "two")})
		if err != nil {
			t.Fatal(err)
		}
		commit = res.Commit
		var b bytes.Buffer
		if err := l.ExportCAR(&b); err != nil {
			t.Fatal(err)
		}
		export = b.Bytes()
		l.Close()
		// a store copied without its lock file (none is made for reading)
		if err := os.Remove(filepath.Join(dir, "lock")); err != nil {
			t.Fatal(err)
		}
	})
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatalf("open a read-only store: %v", err)
	}
	defer l.Close()
	if !l.ReadOnly() {
		t.Fatal("opened read-write")
	}
	snap, err := l.Snapshot(ctx)
	if err != nil || snap.Commit != commit || len(snap.Records) != 2 {
		t.Fatalf("snapshot: %v, commit %s (want %s), %d records", err, snap.Commit, commit, len(snap.Records))
	}
	var b bytes.Buffer
	if err := l.ExportCAR(&b); err != nil || !bytes.Equal(b.Bytes(), export) {
		t.Fatalf("export: %v, %d bytes (want the %d bytes exported before)", err, b.Len(), len(export))
	}
	_, err = l.Apply(ctx, "", []store.Write{nodeW("3kaaaaaaaac22", "three")})
	if !errors.Is(err, store.ErrReadOnly) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "copy the directory") {
		t.Fatalf("a write: %v, want ErrReadOnly naming the directory and what to do", err)
	}
	if _, err := l.Compact(ctx); !errors.Is(err, store.ErrReadOnly) {
		t.Fatalf("compact: %v, want ErrReadOnly", err)
	}
	if snap, err := l.Snapshot(ctx); err != nil || snap.Commit != commit {
		t.Fatalf("after the refused write: %v, commit %s", err, snap.Commit)
	}
	if _, err := os.Stat(filepath.Join(dir, "lock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a lock file after reading: %v", err)
	}
	// a second reader at once
	l2, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	l2.Close()

	// a read-only directory without a store: refused, saying why
	empty := storetest.ReadOnlyDir(t, func(string) {})
	if _, err := store.OpenLocal(empty); !errors.Is(err, store.ErrReadOnly) || !strings.Contains(err.Error(), "no store") {
		t.Fatalf("open an empty read-only directory: %v, want ErrReadOnly", err)
	}
}

// An open that is refused leaves no lock file it made behind.
func TestLocalRefusedOpenLeavesNoLock(t *testing.T) {
	dir := t.TempDir()
	// HEAD without the store's key or log: refused (ErrCorrupt)
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("bafyreib\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenLocal(dir); err == nil {
		t.Fatal("opened a directory with HEAD and no signing.key")
	}
	if _, err := os.Stat(filepath.Join(dir, "lock")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused open left a lock file: %v", err)
	}
}
