//go:build unix

package atomicfile

import (
	"errors"
	"syscall"
)

// ReadOnlyDir reports whether no file can be made in dir: a read-only
// medium or mount (EROFS, for every user), or a directory this process may
// not write (EACCES, EPERM).
func ReadOnlyDir(dir string) bool {
	err := syscall.Access(dir, 2) // W_OK
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}
