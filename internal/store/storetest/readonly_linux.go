//go:build linux

package storetest

import (
	"os"
	"syscall"
	"testing"
)

// ReadOnlyDir is a new directory that fill fills and that is read-only
// afterwards, for this process too. Another user is refused by its mode
// (chmod 0555); root writes through any mode, so for root it is a tmpfs
// mounted there and remounted read-only after fill (writes fail with
// EROFS, as on a read-only medium), unmounted when the test ends. Root
// without the right to mount skips the test, saying so.
func ReadOnlyDir(t testing.TB, fill func(dir string)) string {
	t.Helper()
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		fill(dir)
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
		t.Logf("%s: read-only by its mode (0555)", dir)
		return dir
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=64m,mode=0700"); err != nil {
		t.Skipf("running as root (chmod does not stop root's writes) and a read-only tmpfs cannot be mounted (%v): no read-only directory to test with", err)
	}
	// registered after TempDir's removal, so run before it
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	fill(dir)
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY|syscall.MS_NOSUID|syscall.MS_NODEV, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
	t.Logf("%s: a tmpfs remounted read-only (root)", dir)
	return dir
}
