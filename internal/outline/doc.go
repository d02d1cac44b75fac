// Package outline is the engine: it turns an intent ("insert these bullets
// after X", "move Y under Z", "delete W and lift its children") into one
// correct operation of record writes, and commits it so that it lands whole
// or stays resumable and undoable.
//
// Data flow from intent to commit: Engine.Do reads the repository's
// current snapshot (the repository revalidates its own cache) and rebuilds
// the Tree only when the commit changed — every node and mirror grouped
// under its parent in (sortKey bytes, record key) order, notes attached by
// record key, policies, outlines and comments indexed, and the records that
// point at nothing or sit in a cycle flagged as detached. The intent (a
// value of package intent, written with the Planner's exported methods,
// the kit) works out every create, update and delete (sortKeys from
// package order, record keys from the operation's key list) and refuses
// what it can tell is wrong with a typed error; the gate (gate.go) then
// checks the rules on the whole plan, whatever made it (parent in the same
// repository and a node, no move into one's own subtree, no cascade,
// policy roots owned, no tied sortKeys, the 250,000-record bound, every
// record valid by package validate). Several changes of one record fold into one write decided by
// the record's state before and after the plan; a plan of no writes is a
// no-op that writes nothing.
//
// Unless it is a dry run, the plan becomes an Operation: cut into commits
// of at most 200 writes that never separate a node from its note (cutBatches),
// recorded in the data directory before the first commit (one file per
// operation under DIR/ops, shared by every process using the directory),
// its whole cost reserved in the write budget, then committed batch by
// batch with swapCommit. A conflict before anything landed re-plans the
// intent with the same record keys and timestamps (so a late-landing
// request is recognised, never duplicated); after a batch landed, the rest
// is re-checked against the repository and committed. When it must stop
// (conflict it cannot ride out, budget, timeout, outage, cancellation,
// a killed process) the operation is left incomplete with the exact
// batches that landed, and Resume finishes it or Undo rolls back exactly
// what landed. Finished operations are the undo journal.
//
// Reads never wait for a write: the engine's lock guards only its cached
// tree; one process commits one operation at a time.
//
// Errors the caller can fix are *Error values wrapping one of the sentinel
// errors, with a sentence saying what to do next and, for incomplete
// operations, an OpReport of what landed.
package outline
