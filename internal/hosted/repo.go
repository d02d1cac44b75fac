package hosted

import (
	"github.com/prometheus/client_golang/prometheus"

	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// userRepo is a user's PDS repository as the engine sees it in hosted mode:
// every batch is paid for in the shared Postgres ledger (charged as spent
// before it is sent, refunded only when it certainly did not land). The
// engine's own file ledger is not used: the engine reserves a whole plan's
// cost in the shared ledger through ReservePlan (store.Budgeted) before
// the first batch, and Apply settles
// each batch against that reservation. A batch sent without one (no
// operation) is reserved on its own.
type userRepo struct {
	inner  *pds.Repo
	ledger *Ledger
	// journal tells the operation being committed (its reservation is
	// taken over on a resume); nil: none
	journal *journal
	// refused counts batches the PDS refused for their swapCommit (another
	// writer got there first): counted by the PDS and the budget all the same
	refused *atomic.Int64
	// budgetRefused counts writes refused for the budget (nil: none)
	budgetRefused prometheus.Counter
	// committed, if set, hears each batch that landed (the other
	// instances are told: follow.go)
	committed func(did, rev string)
	// logf is the operator's log (nil: none): the ledger's errors whole
	logf func(format string, args ...any)
}

// budgetDown is what a client is told of the ledger's database failing
// while doing: that it did not answer (as the journal says,
// errDatabaseDown), never pgx's text, which can name the database's
// user, name, host and port; that goes to the operator's log.
func (r *userRepo) budgetDown(doing string, err error) error {
	if r.logf != nil {
		r.logf("write budget of %s, %s: %v", r.inner.DID(), doing, err)
	}
	return &outline.Error{Kind: outline.ErrUnavailable, Msg: doing + " failed: the write budget's database did not answer", Next: "retry in a moment"}
}

func (r *userRepo) refusedForBudget(err error) {
	if r.budgetRefused != nil && errors.Is(err, budget.ErrBudget) {
		r.budgetRefused.Inc()
	}
}

var (
	_ store.Repository = (*userRepo)(nil)
	_ store.Budgeted   = (*userRepo)(nil)
	_ store.Deltas     = (*userRepo)(nil)
)

// userRepo is not a store.Known: a user's calls may land on any instance,
// so a write after this instance's own last commit cannot guess that no
// other instance wrote since (every guess that failed would cost a refused
// applyWrites, counted by the PDS). It is a store.WriteKnown only while
// the user's commit stream is followed live (follow.go): the followed head
// then has every commit (other instances' too, and they say theirs at once:
// pds.Repo.Moved), and a write is planned on it as in single-user mode.
// Otherwise its writes ask first, through Changes.
var _ store.WriteKnown = (*userRepo)(nil)

// WriteChanges implements store.WriteKnown while the stream is live (ok
// false otherwise: the engine asks, through Changes).
func (r *userRepo) WriteChanges(ctx context.Context, since string) (string, string, []store.Record, bool, bool, error) {
	if !r.inner.Live() {
		return "", "", nil, false, false, nil
	}
	return r.inner.WriteChanges(ctx, since)
}

// CheckBudget tells whether cost points fit in the user's shared budget now
// (store.Budgeted), and how many are left in the rolling hour.
func (r *userRepo) CheckBudget(ctx context.Context, cost int) (int, error) {
	left, err := r.ledger.Check(ctx, r.inner.DID().String(), cost)
	r.refusedForBudget(err)
	if err != nil && !errors.Is(err, budget.ErrBudget) {
		return -1, r.budgetDown("reading the write budget", err)
	}
	return left, err
}

// planKey is the context key of an operation's reservation id.
type planKey struct{}

// ReservePlan holds cost points of the user's budget for one operation
// (store.Budgeted); it refuses with a *budget.Exceeded before anything is
// written when they do not fit.
func (r *userRepo) ReservePlan(ctx context.Context, cost int) (context.Context, func(), error) {
	did := r.inner.DID().String()
	id, err := r.ledger.ReserveOp(ctx, did, r.journal.committing(), cost)
	r.refusedForBudget(err)
	if err != nil {
		if errors.Is(err, budget.ErrBudget) {
			return ctx, nil, err
		}
		return ctx, nil, r.budgetDown("reserving write budget", err)
	}
	release := func() {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
		defer cancel()
		r.ledger.Release(bctx, id) // if it fails, the lease expires
	}
	return context.WithValue(ctx, planKey{}, id), release, nil
}

func (r *userRepo) DID() syntax.DID { return r.inner.DID() }

func (r *userRepo) Head(ctx context.Context) (string, string, error) { return r.inner.Head(ctx) }

func (r *userRepo) Snapshot(ctx context.Context) (*store.Snapshot, error) {
	return r.inner.Snapshot(ctx)
}

// Changes implements store.Deltas: the user's kept tree is brought forward
// by what each commit changed, as serve's is, not rebuilt from a snapshot.
func (r *userRepo) Changes(ctx context.Context, since string) (string, string, []store.Record, bool, error) {
	return r.inner.Changes(ctx, since)
}

// bookkeeping bounds the database work after a batch, even when the
// caller's context is gone: what landed must be recorded.
const bookkeeping = 15 * time.Second

func (r *userRepo) Apply(ctx context.Context, swapCommit string, writes []store.Write) (*store.Result, error) {
	did := r.inner.DID().String()
	cost := store.Cost(writes)
	if plan, ok := ctx.Value(planKey{}).(string); ok {
		return r.applyPlanned(ctx, did, plan, swapCommit, writes, cost)
	}
	id, err := r.ledger.Reserve(ctx, did, cost)
	r.refusedForBudget(err)
	if err != nil {
		if errors.Is(err, budget.ErrBudget) {
			return nil, err
		}
		return nil, r.budgetDown("reserving write budget", err)
	}
	// counted as spent before it is sent: a process killed while the batch
	// is on its way leaves it counted, never landed and uncounted
	spent, err := r.ledger.Charge(ctx, did, id, cost)
	if err != nil {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
		defer cancel()
		r.ledger.Release(bctx, id)
		return nil, r.budgetDown("recording the write budget", err)
	}
	res, err := r.inner.Apply(ctx, swapCommit, writes)
	if err != nil {
		r.countRefused(err)
		r.settleFailed(ctx, did, "", spent, cost, err)
		return nil, fmt.Errorf("%w", err)
	}
	r.landed(did, res)
	return res, nil
}

// applyPlanned sends a batch of an operation whose plan is reserved (plan),
// charged against the reservation before it is sent; the operation
// releases the rest.
func (r *userRepo) applyPlanned(ctx context.Context, did, plan, swapCommit string, writes []store.Write, cost int) (*store.Result, error) {
	spent, err := r.ledger.ChargePart(ctx, did, plan, cost)
	if err != nil {
		return nil, r.budgetDown("recording the write budget", err)
	}
	res, err := r.inner.Apply(ctx, swapCommit, writes)
	if err != nil {
		r.countRefused(err)
		r.settleFailed(ctx, did, plan, spent, cost, err)
		return nil, fmt.Errorf("%w", err)
	}
	r.landed(did, res)
	return res, nil
}

// landed tells the other instances of a batch that landed.
func (r *userRepo) landed(did string, res *store.Result) {
	if r.committed != nil && res != nil {
		r.committed(did, res.Rev)
	}
}

// settleFailed deals with the charge of a batch that failed: refunded when
// the batch is known not to have landed, kept when it may have (never
// under-counted); a PDS's pause is shared with every instance.
func (r *userRepo) settleFailed(ctx context.Context, did, plan string, spent int64, cost int, err error) {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
	defer cancel()
	var ex *budget.Exceeded
	if errors.As(err, &ex) && ex.Paused {
		r.ledger.Pause(bctx, did, ex.FreeAt)
		r.ledger.Refund(bctx, did, plan, spent, cost) // refused before sending
		return
	}
	if notWritten(err) && !errors.Is(err, store.ErrConflict) {
		// (a write refused for its swapCommit, or read back absent after
		// the repository moved on, stays counted: the PDS's rate limiter
		// counts a request before its handler refuses it, and after an
		// ambiguous failure an earlier send of it may be what landed)
		r.ledger.Refund(bctx, did, plan, spent, cost) // if it fails, counted: never under
	}
}

func (r *userRepo) countRefused(err error) {
	if r.refused != nil && errors.Is(err, store.ErrStale) {
		r.refused.Add(1)
	}
}

// notWritten reports errors after which the batch is known not to have
// been committed.
func notWritten(err error) bool {
	for _, e := range []error{store.ErrConflict, store.ErrRefused, store.ErrBatchTooLarge, store.ErrRecordExists, store.ErrRecordMissing, store.ErrTooManyWrites, budget.ErrBudget} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
