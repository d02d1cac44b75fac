//go:build !linux

package storetest

import (
	"os"
	"testing"
)

// ReadOnlyDir is a new directory that fill fills and that is read-only
// afterwards by its mode (chmod 0555); as root, whom the mode does not
// stop, the test is skipped, saying so.
func ReadOnlyDir(t testing.TB, fill func(dir string)) string {
	t.Helper()
	if os.Geteuid() == 0 {
		t.Skip("running as root: chmod does not stop root's writes, and a read-only mount is Linux-only here")
	}
	dir := t.TempDir()
	fill(dir)
	if err := os.Chmod(dir, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	return dir
}
