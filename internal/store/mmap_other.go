//go:build !unix

package store

import "os"

// mapLog is not available here: the log is read into memory instead.
func mapLog(f *os.File, size int64) ([]byte, func(), bool) { return nil, nil, false }
