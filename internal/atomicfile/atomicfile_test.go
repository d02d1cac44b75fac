package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestWrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	if err := Write(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "two" {
		t.Fatalf("%q %v", got, err)
	}
	checkWritten(t, path)
}

// Concurrent writers of one file: whatever the order, the file is one of
// the contents, whole.
func TestConcurrentWriters(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state")
	contents := make([][]byte, 8)
	for i := range contents {
		contents[i] = bytes.Repeat([]byte(fmt.Sprint(i)), 1<<20)
	}
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		for _, c := range contents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := Write(path, c, 0o600); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		whole := false
		for _, c := range contents {
			whole = whole || bytes.Equal(got, c)
		}
		if !whole {
			t.Fatalf("round %d: the file is a mix of writes (%d bytes)", round, len(got))
		}
	}
}

// WriteFunc streams what its function writes; a function that fails half
// way leaves the file as it was and no temporary file behind.
func TestWriteFuncFailureLeavesFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "cache.car")
	if err := Write(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := fmt.Errorf("a block could not be made")
	err := WriteFunc(path, 0o600, func(w io.Writer) error {
		w.Write(bytes.Repeat([]byte("new"), 1<<16))
		return broken
	})
	if err != broken {
		t.Fatalf("WriteFunc: %v, want the function's error", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Fatalf("file now %d bytes, want the old one", len(got))
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
	if err := WriteFunc(path, 0o600, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != "new" {
		t.Fatalf("file %q, want new", got)
	}
}

// WriteSynced leaves a new file whole, with its mode, under a parent it
// made, and no temporary file beside it.
func TestWriteSynced(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "ops")
	for i, data := range []string{"{\"one\":1}\n", "{\"two\":2}\n"} {
		path := filepath.Join(dir, fmt.Sprintf("3kaaaaaaaa%d22.json", i))
		if err := WriteSynced(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("%q %v, want %q", got, err, data)
		}
		checkWritten(t, path)
	}
}

// A WriteSynced whose data could not be synced takes the file back: it is
// not left in place for a reader to take as written.
func TestWriteSyncedTakesBackUnsynced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops", "3kaaaaaaaaa22.json")
	syncData = func(string) error { return fmt.Errorf("an I/O error") }
	defer func() { syncData = syncFile }()
	if err := WriteSynced(path, []byte("{}\n"), 0o600); err == nil {
		t.Fatal("no error")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("left in place: %v", err)
	}
}

// checkWritten checks path's mode (0600) and its directory's (0700), and
// that no temporary file is left beside it.
func checkWritten(t *testing.T, path string) {
	t.Helper()
	fi, _ := os.Stat(path)
	di, _ := os.Stat(filepath.Dir(path))
	if fi.Mode().Perm() != 0o600 || di.Mode().Perm() != 0o700 {
		t.Fatalf("modes %v %v", fi.Mode().Perm(), di.Mode().Perm())
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(left) != 0 {
		t.Fatalf("temporary files left: %v", left)
	}
}
