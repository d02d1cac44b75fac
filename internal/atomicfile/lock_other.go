//go:build !unix

package atomicfile

import "os"

// Lock is a no-op without flock (Windows): processes sharing a data
// directory are not coordinated there; give each its own --store.
func Lock(*os.File, bool) error { return nil }

// Unlock releases a lock taken with Lock.
func Unlock(*os.File) error { return nil }

// TryLock always succeeds without flock.
func TryLock(*os.File) (bool, error) { return true, nil }
