// Package budget keeps the write budget of one identity: Bulleted (and the
// reference PDS) allow 5,000 points per rolling hour, where a create costs
// 3, an update 2 and a delete 1.
//
// Data flow: before a plan's first batch is sent, the engine asks the
// Ledger whether the plan's whole cost fits (Check); a plan that does not fit
// fails before any write with its cost, the points left and the time when
// enough will be free. Each committed batch is then recorded (Spend) with
// its time, and the ledger is written to the data directory so the bound
// holds across restarts. Pacing between batches uses a golang.org/x/time/rate
// limiter, but the limiter alone is not the bound (a bucket with burst 5,000
// at 5,000/h admits ~10,000 points in one hour): the ledger sums what was
// actually spent in the last hour and refuses anything beyond the limit. A
// server's 429 Retry-After pauses all writes until that time (Pause).
package budget
