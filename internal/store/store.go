package store

import (
	"context"
	"errors"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

// MaxBatch is the most writes one Apply accepts (the reference PDS's limit).
const MaxBatch = 200

var (
	// ErrConflict means the repository's commit is no longer swapCommit:
	// somebody else wrote since the snapshot. Re-read and re-plan.
	ErrConflict = errors.New("repository changed since the snapshot (InvalidSwap)")
	// ErrStale comes with ErrConflict when the write was refused for its
	// swapCommit and no earlier request of the same call can still land:
	// nothing of it was written, and nothing will be (no read is needed to
	// know).
	ErrStale = errors.New("refused for its swapCommit, nothing of it written")
	// ErrTooManyWrites means a batch exceeded MaxBatch.
	ErrTooManyWrites = errors.New("too many writes in one batch")
	// ErrRecordExists means a create named a record key already in use.
	ErrRecordExists = errors.New("record already exists")
	// ErrRecordMissing means an update or delete named a record that is absent.
	ErrRecordMissing = errors.New("record does not exist")
	// ErrRefused means the repository refused the batch for a reason that
	// will not change by sending it again (a 4xx: no permission for the
	// collection, a bad request); nothing of it was written.
	ErrRefused = errors.New("the repository refused the write")
	// ErrBatchTooLarge means the repository refused a batch for its size
	// (HTTP 413); nothing of it was written. Send it in smaller parts.
	ErrBatchTooLarge = errors.New("batch too large for the repository")
)

// MaxBatchBytes bounds the JSON size of one batch's record values (the
// reference PDS refuses request bodies over 1 MB).
const MaxBatchBytes = 700 << 10

// Record is one stored record. Value is its DAG-CBOR encoding (see Value:
// Map decodes it as atdata would, $type included; Text and Get read one
// field in place).
type Record struct {
	Collection string `json:"collection"`
	RKey       string `json:"rkey"`
	CID        string `json:"cid"`
	Value      Value  `json:"value"`
}

// Snapshot is every app.bulleted.* record of one repository at one commit.
type Snapshot struct {
	DID     syntax.DID
	Commit  string // CID of the signed commit
	Rev     string
	Records []Record
}

// Op is a write's kind.
type Op string

const (
	Create Op = "create"
	Update Op = "update"
	Delete Op = "delete"
)

// Write is one create, update or delete.
type Write struct {
	Op         Op             `json:"op"`
	Collection string         `json:"collection"`
	RKey       string         `json:"rkey"`
	Value      map[string]any `json:"value,omitempty"`
}

// WriteResult is what one write produced.
type WriteResult struct {
	URI string `json:"uri"`
	CID string `json:"cid,omitempty"`
}

// Result is a committed batch.
type Result struct {
	Commit  string        `json:"cid"`
	Rev     string        `json:"rev"`
	Results []WriteResult `json:"results"`
}

// Repository is what the engine needs from a backend.
type Repository interface {
	// DID of the repository this server writes to.
	DID() syntax.DID
	// Head returns the current commit CID and rev without reading records,
	// so callers can keep a snapshot until the repository moves on.
	Head(ctx context.Context) (commit, rev string, err error)
	// Snapshot returns all app.bulleted.* records at the current commit,
	// revalidating a cached one cheaply (the engine calls it before every
	// plan). The returned snapshot is shared: callers must not modify it.
	Snapshot(ctx context.Context) (*Snapshot, error)
	// Apply commits writes atomically if the current commit is swapCommit
	// (empty swapCommit: no guard). At most MaxBatch writes.
	Apply(ctx context.Context, swapCommit string, writes []Write) (*Result, error)
}

// Budgeted is the one optional budget interface of a repository: a
// repository whose writes spend a budget (the PDS backend's file ledger,
// hosted mode's shared Postgres ledger) implements it; one that does not
// (the embedded store) has no budget. The engine asks it twice per write
// operation: CheckBudget before a dry run answers (cost 0: only how many
// points are left), ReservePlan before the first batch of a real one.
type Budgeted interface {
	// CheckBudget tells whether cost points fit now without holding them
	// (a refusal wraps budget.ErrBudget) and how many are left; left is -1
	// when the repository has no budget after all (a nil ledger).
	CheckBudget(ctx context.Context, cost int) (left int, err error)
	// ReservePlan holds cost points for one operation before its first
	// batch: the returned context carries the reservation to Apply, which
	// settles each committed batch against it, and release gives back the
	// rest. A refusal wraps budget.ErrBudget.
	ReservePlan(ctx context.Context, cost int) (reserved context.Context, release func(), err error)
}

// Cost is the write budget price of writes: create 3, update 2, delete 1.
func Cost(writes []Write) int {
	n := 0
	for _, w := range writes {
		switch w.Op {
		case Create:
			n += 3
		case Update:
			n += 2
		case Delete:
			n++
		}
	}
	return n
}

// CompareRecords orders records by collection, then record key (a
// snapshot's order).
func CompareRecords(a, b Record) int {
	if c := strings.Compare(a.Collection, b.Collection); c != 0 {
		return c
	}
	return strings.Compare(a.RKey, b.RKey)
}

// Deltas is implemented by repositories that can tell what changed between
// two commits, so that readers keep their state current from each commit's
// changes instead of reading every record again.
type Deltas interface {
	// Changes returns the current commit and rev and the app.bulleted.*
	// records changed since the commit since: created and updated records
	// with their value and CID, deleted ones with a nil Value. ok is false
	// when the repository cannot tell (since is too old or unknown): read a
	// Snapshot instead.
	Changes(ctx context.Context, since string) (commit, rev string, changes []Record, ok bool, err error)
}

// Known is implemented by a Deltas that can tell, without asking anyone,
// what changed up to a commit it has good reason to think is still the
// latest: its own last commit, made moments ago. A write planned on that
// commit is guarded by swapCommit like any other, so the guess is never
// silently wrong: if the repository moved on meanwhile, the write is
// refused (ErrConflict), nothing of it is written, and Changes asks the
// repository again. Reads use Changes, which always asks.
type Known interface {
	// KnownChanges is Changes answered from what is known (ok false: it
	// cannot be, or should not be trusted: call Changes).
	KnownChanges(since string) (commit, rev string, changes []Record, ok bool)
}

// WriteKnown is implemented by a repository that tells what a write is
// planned on better than Known alone: while another writer has been active
// lately it asks the repository's head first (one small request) and
// waits for what it learns to arrive, rather than let the write go blind
// and be refused. guess says the answer was not checked with the
// repository (as KnownChanges's); ok false: call Changes.
type WriteKnown interface {
	WriteChanges(ctx context.Context, since string) (commit, rev string, changes []Record, ok, guess bool, err error)
}

// SendGated is implemented by a repository whose Apply waits for the gate
// its context carries (WithSendGate) after everything else it does before
// a batch leaves (its budget charged) and before the batch leaves; then
// the caller can record the batch's operation while Apply prepares it,
// rather than before (two fsyncs at once, not one after the other).
type SendGated interface {
	// GatesSend marks the interface; it does nothing.
	GatesSend()
}

type sendGateKey struct{}

// WithSendGate returns a context whose batch must not leave before wait
// returns nil (Apply of a SendGated repository calls SendGate); wait may
// be called more than once and returns the same each time.
func WithSendGate(ctx context.Context, wait func() error) context.Context {
	return context.WithValue(ctx, sendGateKey{}, wait)
}

// SendGate waits for the gate ctx carries (none: nil at once): a non-nil
// error means the batch must not be sent.
func SendGate(ctx context.Context) error {
	if wait, _ := ctx.Value(sendGateKey{}).(func() error); wait != nil {
		return wait()
	}
	return nil
}
