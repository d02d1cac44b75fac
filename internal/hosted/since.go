package hosted

import (
	"context"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// History implements store.Historian: what changed since a revision, from
// the user's PDS repository as this instance followed it.
func (r *userRepo) History(ctx context.Context, q store.HistoryQuery) (*store.Since, error) {
	return r.inner.History(ctx, q)
}

var _ store.Historian = (*userRepo)(nil)
