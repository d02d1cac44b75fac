package hosted

import (
	"github.com/prometheus/client_golang/prometheus"

	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// planRows keeps one identity's dry-run plans (and those held for a
// person's confirmation) as rows (outline.PlanStore): applied by whichever
// instance gets the call, once (taken by a DELETE … RETURNING), and only
// for the identity that made them (every statement names it).
type planRows struct {
	db  *pgxpool.Pool
	did string
	// applied counts plans taken to be applied (nil: none)
	applied prometheus.Counter
}

var _ outline.PlanStore = (*planRows)(nil)

// maxPlanRows bounds an identity's kept plans: the oldest beyond it are
// dropped (as the in-memory cache drops them).
const maxPlanRows = 64

func (p *planRows) Put(ctx context.Context, id string, body []byte, expires time.Time) error {
	return pgx.BeginFunc(ctx, p.db, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO plans (id, did, body, expires_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (id) DO UPDATE SET body = excluded.body, expires_at = excluded.expires_at WHERE plans.did = excluded.did`,
			id, p.did, body, expires)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errors.New("plan id " + id + " is another identity's")
		}
		_, err = tx.Exec(ctx, `DELETE FROM plans WHERE did = $1 AND id NOT IN
			(SELECT id FROM plans WHERE did = $1 ORDER BY made_at DESC LIMIT $2)`, p.did, maxPlanRows)
		return err
	})
}

func (p *planRows) Take(ctx context.Context, id string) ([]byte, error) {
	var body []byte
	var live bool
	err := p.db.QueryRow(ctx, "DELETE FROM plans WHERE id = $1 AND did = $2 RETURNING body, expires_at > now()", id, p.did).Scan(&body, &live)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !live) {
		return nil, nil
	}
	if err == nil && p.applied != nil {
		p.applied.Inc()
	}
	return body, err
}

func (p *planRows) Get(ctx context.Context, id string) ([]byte, error) {
	var body []byte
	err := p.db.QueryRow(ctx, "SELECT body FROM plans WHERE id = $1 AND did = $2 AND expires_at > now()", id, p.did).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return body, err
}
