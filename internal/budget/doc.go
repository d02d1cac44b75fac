// Package budget keeps an account's write budget as the reference PDS counts
// it: create 3, update 2, delete 1 points; at most 5,000 points in any
// rolling hour and 35,000 in any rolling day (@atproto/pds rate-limits.js,
// "repo-write-hour" and "repo-write-day").
//
// The flow of an operation: Reserve its whole cost before the first write,
// under the ledger file's exclusive lock, so that every process sharing the
// file counts the points as used; Charge each batch against the reservation
// before its request leaves (the PDS backend finds the reservation and the
// batch's key on the context, WithReservation and WithBatch): the points are
// recorded as spent and the file fsynced first, so that a kill, crash or
// timeout can only count a batch that did not land, never miss one that
// did. A charge is given back (Refund) only when the batch is known not to
// have landed: refused before it was written, or read back absent with the
// repository moved past the commit it was swapped onto. A batch the PDS
// refuses for its swapCommit is not given back: its rate limiter counted
// the request before the handler refused it. A batch is charged
// once under its key, however often it is sent (retries, a resume after a
// kill). Release gives back what is left of the reservation when the
// operation ends or stops. A plan that fits is therefore never cut off
// mid-way for budget reasons, and any number of processes on one account
// never spend more than the limits together. A reservation of a process on
// this machine holds while that process runs (a killed one's unspent points
// come back at once; its charges stay); one made elsewhere holds for
// ReservationTTL after its last charge. A charge of a reservation never
// released (its process killed before it knew whether the batch landed)
// stays open: a later Charge under its key (a resume) uses it and closes
// it, and GiveBack returns it when its operation is undone or forgotten
// with the batch known not to have landed; Charged reads it back.
//
// The ledger file is append-only (ledgerfile.go): each change is one line,
// a charge's fsynced before its batch leaves; each process keeps the rolling
// windows in memory and reads only what the others appended since it last
// looked, so a write's cost does not grow with the charges of the day. The
// file is compacted to one snapshot when its records outnumber what they
// describe; a ledger of an earlier version (one JSON object) is read as that
// snapshot.
//
// There is no pacing beyond this: the rolling windows are exact, so spreading
// batches out would only delay work that fits. A server's 429 pauses writes
// until its Retry-After / RateLimit-Reset, capped at the window of the limit
// it names (RateLimit-Policy, at most a day), or at an hour (Window) when it
// names none: then the next write probes whether the limit still holds, and
// the refusals say what was capped (Exceeded.Note). The pause holds across
// restarts. Refusals are *Exceeded errors with the exact time enough points
// are free (FreeAt, UTC) and the seconds until then (WaitSeconds).
package budget
