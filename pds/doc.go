// Package pds is the production repository backend: the user's own Personal
// Data Server, reached over XRPC with indigo's atclient and this package's
// own wire structs (indigo's generated com.atproto types cannot carry
// app.bulleted.* values).
//
// Data flow from intent to commit: the first read downloads the whole
// repository as one CAR (com.atproto.sync.getRepo), decoding blocks while it
// arrives, loads its MST (indigo's atproto/repo/mst) and keeps the
// app.bulleted.* records. Every later read is one getRepo?since=rev: while
// the repository is unchanged nothing but the CAR header comes back and the
// cached snapshot and tree are used as they are; when it changed only the
// blocks written since come, completed with the blocks and decoded values
// kept from the last read (a whole read again if they cannot complete it; a
// PDS that ignores since is noticed and asked getLatestCommit first). The
// last read can be kept in a file (Repo.Cache) so that a restart starts
// incremental. listRecords paging remains as a
// fallback. The engine plans against that snapshot and calls Apply, which
// checks the write budget, paces the batch, and sends one
// com.atproto.repo.applyWrites with swapCommit = the snapshot's commit. An
// InvalidSwap answer becomes store.ErrConflict (the engine re-reads and
// re-plans). An ambiguous failure (timeout, reset connection, 5xx — the
// reference PDS answers a create of an existing key with HTTP 500) is never
// blindly retried: the repository is read again and the batch counts as
// committed only if every write is there with the CID it would have; if the
// head did not move the batch is sent again. A 429 pauses writes for its
// Retry-After.
//
// Login uses an app password (never a flag, never logged); the session is
// kept in the data directory with mode 0600 and refreshed automatically.
package pds
