// Package budget keeps an account's write budget as the reference PDS counts
// it: create 3, update 2, delete 1 points; at most 5,000 points in any
// rolling hour and 35,000 in any rolling day (@atproto/pds rate-limits.js,
// "repo-write-hour" and "repo-write-day").
//
// The flow of an operation: Reserve its whole cost before the first write,
// under the ledger file's exclusive lock, so that every process sharing the
// file counts the points as used; Settle each committed batch against the
// reservation (the PDS backend finds it on the context, WithReservation);
// Release what is left when the operation ends or stops. A plan that fits is
// therefore never cut off mid-way for budget reasons, and any number of
// processes on one account never spend more than the limits together. A
// reservation of a process on this machine holds while that process runs
// (a killed one's points come back at once); one made elsewhere holds for
// ReservationTTL after its last settle.
//
// There is no pacing beyond this: the rolling windows are exact, so spreading
// batches out would only delay work that fits. A server's 429 pauses writes
// until its Retry-After / RateLimit-Reset, capped at the window of the limit
// it names (RateLimit-Policy), and never beyond a day, also across restarts.
// Refusals are *Exceeded errors with the exact time enough points are free.
package budget
