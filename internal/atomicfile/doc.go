// Package atomicfile replaces small state files (the embedded store's HEAD,
// the undo journal, the budget ledger, the PDS session) so that a crash
// leaves either the old content or the new, never a torn file: write a
// temporary file beside it, fsync, then rename over it. Lock and Unlock
// coordinate processes that share a data directory (flock).
package atomicfile
