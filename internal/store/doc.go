// Package store defines the repository interface the outline engine writes
// through, and its embedded implementation: a real AT Protocol repository
// (MST and signed commits, built with indigo's repo package) kept on local
// disk, so the server works offline on a fresh machine.
//
// Data flow: the engine reads one Snapshot (every app.bulleted.* record with
// the repository's commit CID and rev; each backend revalidates its cached
// snapshot cheaply and returns the same one while the commit is unchanged),
// keeps its tree while the commit is unchanged, plans writes against it, and calls
// Apply with the snapshot's commit as swapCommit. Apply is atomic: either all
// writes become one new signed commit, or nothing changes. If the repository
// has moved on since the snapshot, Apply fails with ErrConflict (a PDS's
// InvalidSwap) and the engine re-reads and re-plans.
//
// The embedded store appends blocks to an on-disk block log (CAR sections)
// that is fsynced before the HEAD file is replaced by rename, so a crash
// mid-commit leaves the previous commit intact; it keeps an index of where
// each block is, not the blocks. Opening maps the log read-only (where the
// system allows it), checks every block against its CID and checks HEAD's
// records on every core while one core walks the MST (each is kept as its
// own DAG-CBOR bytes, a Value, checked in one pass that builds nothing:
// fields are read in place, Map decodes), then releases the mapping:
// nothing kept points into it. The map of records by path is
// made only when a write needs it. The log is compacted once a quarter of
// it is blocks no longer reachable, and only from a HEAD whose commit loaded
// completely and verified with signing.key in this process.
// Nothing that is missing is taken for new while the files beside it say
// otherwise (recover.go): every commit loaded is checked against
// signing.key; a missing or unreadable HEAD is recovered from the newest
// commit of the log that loads completely and verifies, said (Notices, and
// the first tool result) and rewritten, with nothing compacted or cut in
// that open; a missing or foreign signing.key, a missing log that HEAD, a
// compaction's copy or the operations journal speak of, or a directory
// holding the PDS backend's state refuse to open (ErrCorrupt) and change
// nothing.
// Processes sharing the directory hold a flock on DIR/lock around every read
// and commit; each first reads the log sections and HEAD another process
// wrote, so a plan made on an older commit is a conflict, never a lost commit. Export
// writes a CARv1 (header then blocks); import ingests a CAR, for example one
// downloaded with com.atproto.sync.getRepo.
package store
