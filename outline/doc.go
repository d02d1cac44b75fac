// Package outline is the engine: it turns an intent ("insert these bullets
// after X", "move Y under Z", "delete W and lift its children") into one
// correct, atomic batch of record writes.
//
// Data flow from intent to commit: Engine.Run asks the repository for its
// head commit; when it is the cached tree's commit, the tree is reused as is,
// otherwise it reads one store.Snapshot and rebuilds the Tree (records whose
// CID is unchanged are not validated again) — every node and
// mirror grouped under its parent in (sortKey bytes, record key) order, notes
// attached by record key, policies, outlines and comments indexed, and the
// records that point at nothing or sit in a cycle flagged as detached. The
// intent's planner function then works out every create, update and delete
// (sortKeys from package order, record keys from a TID clock), checks the
// rules (parent in the same repository and a node, anchor a child of the
// parent, no move into one's own subtree, no cascade, policy roots owned,
// the 250,000-record bound), validates every record with package validate,
// prices the plan (create 3, update 2, delete 1) and records the inverse
// writes. Unless it is a dry run, the writes go to the repository in batches
// of at most 200 guarded by the snapshot's commit (swapCommit); on a
// conflict the engine re-reads and re-plans, a bounded number of times. The
// applied plan is journalled (in memory, and on disk after KeepJournal) so
// Undo can reverse it, also after a restart, if nothing changed since.
//
// Errors the caller can fix are *Error values wrapping one of the sentinel
// errors below, with a sentence saying what to do next.
package outline
