// Package atomicfile replaces small state files (the embedded store's HEAD,
// the undo journal, the budget ledger, the PDS session) so that a crash
// leaves either the old content or the new, never a torn file: write a
// temporary file beside it, fsync, then rename over it. WriteSynced, for a
// new file whose reader can tell a short one (the operations journal's
// records), renames first and syncs the file and the directory at once:
// one wait for the disk instead of two (never over an existing file: a
// crash could then lose both versions). Lock and Unlock
// coordinate processes that share a data directory (flock).
package atomicfile
