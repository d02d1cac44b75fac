package hosted

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/budget"
	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/pds"
	"github.com/bulleted-mcp/bulleted-mcp/store"
)

// userRepo is a user's PDS repository as the engine sees it in hosted mode:
// every batch is paid for in the shared Postgres ledger (reserved before it
// is sent, settled when it landed or may have, released when it certainly
// did not), and the operations journal is pushed to Postgres before each
// batch. It is not a store.Limited: the engine's own file ledger is not
// used, so a plan is checked against the budget batch by batch (a plan of
// one batch, up to 200 writes, fails before anything is written).
type userRepo struct {
	inner   *pds.Repo
	ledger  *Ledger
	journal *journal
}

var _ store.Repository = (*userRepo)(nil)

func (r *userRepo) DID() syntax.DID { return r.inner.DID() }

func (r *userRepo) Head(ctx context.Context) (string, string, error) { return r.inner.Head(ctx) }

func (r *userRepo) Snapshot(ctx context.Context) (*store.Snapshot, error) {
	return r.inner.Snapshot(ctx)
}

// bookkeeping bounds the database work after a batch, even when the
// caller's context is gone: what landed must be recorded.
const bookkeeping = 15 * time.Second

func (r *userRepo) Apply(ctx context.Context, swapCommit string, writes []store.Write) (*store.Result, error) {
	did := r.inner.DID().String()
	if err := r.journal.push(ctx); err != nil {
		return nil, &outline.Error{Kind: outline.ErrUnavailable, Msg: "recording the operation in the database failed: " + err.Error(), Next: "retry in a moment"}
	}
	cost := store.Cost(writes)
	id, err := r.ledger.Reserve(ctx, did, cost)
	if err != nil {
		if errors.Is(err, budget.ErrBudget) {
			return nil, err
		}
		return nil, &outline.Error{Kind: outline.ErrUnavailable, Msg: "reserving write budget failed: " + err.Error(), Next: "retry in a moment"}
	}
	res, err := r.inner.Apply(ctx, swapCommit, writes)
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), bookkeeping)
	defer cancel()
	var ex *budget.Exceeded
	switch {
	case err == nil:
		if serr := r.ledger.Settle(bctx, did, id, cost); serr != nil {
			return res, nil // it landed; the reservation expires and is counted till then
		}
	case errors.As(err, &ex) && ex.Paused:
		r.ledger.Pause(bctx, did, ex.FreeAt)
		r.ledger.Release(bctx, id)
	case notWritten(err):
		r.ledger.Release(bctx, id)
	default:
		// it may have landed: counted as spent (never under-counted)
		r.ledger.Settle(bctx, did, id, cost)
	}
	if err != nil {
		return nil, fmt.Errorf("%w", err)
	}
	return res, nil
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
