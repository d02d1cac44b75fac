//go:build unix

package store

import (
	"os"
	"syscall"
)

// mapLog maps size bytes of the log read-only, so that opening a large store
// checks and decodes its blocks where the page cache holds them: reading
// them into a fresh buffer (zeroed pages, then a copy) was a seventh of
// opening a store of 250,000 records. The mapping must be released with
// unmap once nothing points into it; ok is false when the system cannot map
// the file (the caller reads it instead).
func mapLog(f *os.File, size int64) (data []byte, unmap func(), ok bool) {
	if size <= 0 || int64(int(size)) != size {
		return nil, nil, false
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, false
	}
	return data, func() { syscall.Munmap(data) }, true
}
