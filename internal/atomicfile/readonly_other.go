//go:build !unix

package atomicfile

// ReadOnlyDir is false where it cannot be asked (Windows): a write to a
// read-only directory there fails with the system's own error.
func ReadOnlyDir(string) bool { return false }
