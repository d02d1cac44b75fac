// Package pds is the production repository backend: the user's own Personal
// Data Server, reached over XRPC with indigo's atclient and this package's
// own wire structs (indigo's generated com.atproto types cannot carry
// app.bulleted.* values).
//
// Data flow from intent to commit: the first read downloads the whole
// repository as one CAR (com.atproto.sync.getRepo), decoding blocks while it
// arrives, walks its MST (indigo's atproto/repo/mst) and keeps the MST's
// nodes, as their blocks (decoded again where a walk passes them), each
// with the app.bulleted.* records its entries name, as their bytes (no map
// of records by CID). Every later read is one getRepo?since=rev: while
// the repository is unchanged nothing but the CAR header comes back and the
// cached snapshot and tree are used as they are; when it changed only the
// blocks written since come, and the MST difference they make is found
// without walking the unchanged part of the tree and applied to the kept
// one in place (a whole read again if the kept blocks cannot complete it; a
// PDS that ignores since is noticed and asked getLatestCommit first).
// Repo.Changes (store.Deltas) reports the records that difference changed,
// so the engine keeps its tree current at the cost of what changed. Our own
// commits need no read at all: Apply records what each one wrote, and the
// next read is a getLatestCommit that finds the PDS still there; a write
// within TrustOwn of our own last commit does not even ask that
// (Repo.KnownChanges, store.Known): it is planned on that commit and its
// swapCommit refuses it if anyone else wrote since (store.ErrStale, then
// planned again after a read). The whole
// list of records is made only for callers of Snapshot. The last read can
// be kept in a file (Repo.Cache) so that a restart starts incremental.
// listRecords paging remains as a fallback. The engine plans against that snapshot and calls Apply, which
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
// Every outgoing request goes through NewHTTPClient and is bounded in time
// and size: connections by DialTimeout, TLSHandshakeTimeout and
// ResponseHeaderTimeout; each XRPC call by CallTimeout overall and MaxJSON
// bytes; each CAR download by CARTimeout overall, StallTimeout without a
// byte and MaxCAR bytes (Repo.Limits changes them); identity lookups and
// session refreshes by the client's own deadline and body bound. Past a
// bound a request fails with ErrTimeout (which also matches
// context.DeadlineExceeded) or ErrTooLarge, and reading stops there, so
// memory stays bounded whatever a server sends. MaxCAR (512 MiB) is five
// times the CAR of a 250,000-record repository (a 10,000-bullet one is
// about 4.1 MB).
//
// Other identities' repositories (Others: read_outline's repo argument,
// live mirrors, comments) are read as snapshots within tighter bounds
// (OthersTimeout for resolution and download together, OthersMaxCAR bytes)
// and kept within OthersMaxBlocks blocks together, least recently read
// dropped first; a failed read is remembered for OthersRetryAfter, so that
// a PDS that does not answer delays a read of the user's own outline once,
// by OthersTimeout at most. Identities are looked up through indigo's
// caching directory.
//
// Sign-in: OAuthLogin (AT Protocol OAuth as a loopback public client: PAR,
// PKCE, DPoP; scope include:app.bulleted.authFull, or the granular repo:
// scopes when the permission set cannot be resolved) keeps its session in
// oauth-session.json and refreshes it under the data directory's lock after
// re-reading the file, so processes never replay a rotated refresh token.
// Login.OpenPreferOAuth uses that session when there is one, else an app
// password (never a flag, never logged), whose session is kept in the data
// directory with mode 0600 and refreshed automatically. A write the
// repository refuses (a 4xx such as ScopeMissingError) is store.ErrRefused:
// nothing was written.
package pds
