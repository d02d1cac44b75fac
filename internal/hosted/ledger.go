package hosted

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
)

// Ledger is the write budget of every identity, kept in Postgres: points
// spent (rolling hour and day), reservations held, and pauses a PDS asked
// for. Every reservation is made in a transaction holding the identity's
// advisory lock, after summing what is spent and reserved, so that all
// instances together never pass the limits. Times are the database's, so
// instances' clocks do not matter. No lock is held across network I/O: a
// reservation is taken and charged (recorded as spent) before the write is
// sent, and the charge is refunded only when the write is known not to have
// landed, so that no kill, crash or timeout leaves a landed batch uncounted.
//
// An operation reserves its whole plan's cost before its first batch
// (userRepo.ReservePlan) and settles each batch against it (SettlePart), so
// that once it has its reservation no other instance's spending can stop it
// midway. A reservation is a lease: it holds until expires_at, which each
// settled batch pushes TTL further (a batch takes at most
// outline.BatchTimeout, well under TTL). When an instance dies mid-operation
// its reservation is not released; it stops counting TTL after its last
// batch (the next Reserve or Prune deletes it).
type Ledger struct {
	DB *pgxpool.Pool
	// Limit per hour and DayLimit per day (zero: budget.Limit, budget.DayLimit).
	Limit, DayLimit int
	// TTL of a reservation not settled (zero: budget.ReservationTTL).
	TTL time.Duration
}

func (l *Ledger) limits() (int, int, time.Duration) {
	h, d, ttl := l.Limit, l.DayLimit, l.TTL
	if h == 0 {
		h = budget.Limit
	}
	if d == 0 {
		d = budget.DayLimit
	}
	if ttl == 0 {
		ttl = budget.ReservationTTL
	}
	return h, d, ttl
}

// Reserve holds cost points of did's budget and returns the reservation's
// id; it refuses with a *budget.Exceeded (wrapping budget.ErrBudget) when
// they do not fit in the hour or the day, or the PDS asked to pause.
func (l *Ledger) Reserve(ctx context.Context, did string, cost int) (string, error) {
	return l.ReserveOp(ctx, did, "", cost)
}

// ReserveOp is Reserve for operation op ("": none): a reservation held for
// op before (by an instance that stopped committing it: the caller holds
// op's claim) is taken over, given up in the same transaction before cost
// is fitted, so that a resume is not refused for the points its own
// operation holds, nor holds them twice.
func (l *Ledger) ReserveOp(ctx context.Context, did, op string, cost int) (string, error) {
	_, _, ttl := l.limits()
	id := newToken("r")
	err := pgx.BeginFunc(ctx, l.DB, func(tx pgx.Tx) error {
		if op != "" {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("budget:"+did)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, "DELETE FROM budget_reserved WHERE did = $1 AND op = $2", did, op); err != nil {
				return err
			}
		}
		if _, err := l.fit(ctx, tx, did, cost); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "INSERT INTO budget_reserved (id, did, points, expires_at, op) VALUES ($1, $2, $3, now() + $4::interval, nullif($5, ''))",
			id, did, cost, fmt.Sprintf("%d milliseconds", ttl.Milliseconds()), op)
		return err
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// Check tells whether cost points of did's budget fit now, without holding
// them (dry runs), and how many are left in the rolling hour.
func (l *Ledger) Check(ctx context.Context, did string, cost int) (int, error) {
	var left int
	err := pgx.BeginFunc(ctx, l.DB, func(tx pgx.Tx) error {
		var err error
		left, err = l.fit(ctx, tx, did, cost)
		return err
	})
	return left, err
}

// fit checks cost against did's spent, reserved and paused budget under the
// identity's lock, in tx, and returns the points left in the hour.
func (l *Ledger) fit(ctx context.Context, tx pgx.Tx, did string, cost int) (int, error) {
	hourLimit, dayLimit, _ := l.limits()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("budget:"+did)); err != nil {
		return 0, err
	}
	if _, err := tx.Exec(ctx, "DELETE FROM budget_reserved WHERE did = $1 AND expires_at < now()", did); err != nil {
		return 0, err
	}
	var now time.Time
	var paused *time.Time
	if err := tx.QueryRow(ctx, "SELECT now(), (SELECT until FROM budget_pause WHERE did = $1 AND until > now())", did).Scan(&now, &paused); err != nil {
		return 0, err
	}
	if paused != nil {
		return 0, &budget.Exceeded{Cost: cost, FreeAt: *paused, Paused: true, Window: "hour", Limit: hourLimit}
	}
	var hour, day, held int
	if err := tx.QueryRow(ctx, `SELECT
		coalesce((SELECT sum(points) FROM budget_spent WHERE did = $1 AND at > now() - interval '1 hour'), 0),
		coalesce((SELECT sum(points) FROM budget_spent WHERE did = $1 AND at > now() - interval '1 day'), 0),
		coalesce((SELECT sum(points) FROM budget_reserved WHERE did = $1), 0)`, did).Scan(&hour, &day, &held); err != nil {
		return 0, err
	}
	for _, w := range []struct {
		name  string
		used  int
		limit int
		span  time.Duration
	}{{"hour", hour + held, hourLimit, time.Hour}, {"day", day + held, dayLimit, 24 * time.Hour}} {
		if w.used+cost <= w.limit {
			continue
		}
		ex := &budget.Exceeded{Cost: cost, Left: max(0, w.limit-w.used), Window: w.name, Limit: w.limit}
		if cost <= w.limit {
			at, err := freeAt(ctx, tx, did, now, w.span, w.used+cost-w.limit)
			if err != nil {
				return 0, err
			}
			ex.FreeAt = at
		}
		return 0, ex
	}
	return max(0, hourLimit-hour-held), nil
}

// freeAt is when need points spent within span leave it (reservations are
// counted on being settled by then).
func freeAt(ctx context.Context, tx pgx.Tx, did string, now time.Time, span time.Duration, need int) (time.Time, error) {
	rows, err := tx.Query(ctx, "SELECT at, points FROM budget_spent WHERE did = $1 AND at > $2 ORDER BY at", did, now.Add(-span))
	if err != nil {
		return time.Time{}, err
	}
	defer rows.Close()
	freed := 0
	for rows.Next() {
		var at time.Time
		var p int
		if err := rows.Scan(&at, &p); err != nil {
			return time.Time{}, err
		}
		freed += p
		if freed >= need {
			return at.Add(span), nil
		}
	}
	return now.Add(span), rows.Err()
}

// Settle records points of reservation id as spent now and gives back the
// rest of it.
func (l *Ledger) Settle(ctx context.Context, did, id string, points int) error {
	_, err := l.Charge(ctx, did, id, points)
	return err
}

// Charge is Settle before the batch is sent: reservation id (the batch's
// own) becomes points spent now, and the spent row's id is returned for
// Refund, should the batch turn out not to have landed.
func (l *Ledger) Charge(ctx context.Context, did, id string, points int) (int64, error) {
	var spent int64
	err := pgx.BeginFunc(ctx, l.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM budget_reserved WHERE id = $1", id); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "INSERT INTO budget_spent (did, points) VALUES ($1, $2) RETURNING id", did, points).Scan(&spent)
	})
	return spent, err
}

// SettlePart records points of reservation id (an operation's whole plan)
// as spent now; see ChargePart.
func (l *Ledger) SettlePart(ctx context.Context, did, id string, points int) error {
	_, err := l.ChargePart(ctx, did, id, points)
	return err
}

// ChargePart records points of reservation id (an operation's whole plan)
// as spent now, under did's advisory lock, before the batch they pay for is
// sent: they leave the reservation (never below zero) and its lease is
// renewed for another TTL. Points beyond what it still holds (it expired)
// are recorded all the same: the write may happen. The spent row's id is
// returned for Refund.
func (l *Ledger) ChargePart(ctx context.Context, did, id string, points int) (int64, error) {
	_, _, ttl := l.limits()
	var spent int64
	err := pgx.BeginFunc(ctx, l.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("budget:"+did)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE budget_reserved SET points = greatest(points - $2, 0), expires_at = now() + $3::interval WHERE id = $1",
			id, points, fmt.Sprintf("%d milliseconds", ttl.Milliseconds())); err != nil {
			return err
		}
		return tx.QueryRow(ctx, "INSERT INTO budget_spent (did, points) VALUES ($1, $2) RETURNING id", did, points).Scan(&spent)
	})
	return spent, err
}

// Refund gives back a charge (spent row id) whose batch is known not to
// have landed; the points return to reservation plan when it is an
// operation's (and still held), for the operation's next batches.
func (l *Ledger) Refund(ctx context.Context, did, plan string, spent int64, points int) error {
	return pgx.BeginFunc(ctx, l.DB, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("budget:"+did)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM budget_spent WHERE id = $1", spent); err != nil {
			return err
		}
		if plan == "" {
			return nil
		}
		_, err := tx.Exec(ctx, "UPDATE budget_reserved SET points = points + $2 WHERE id = $1", plan, points)
		return err
	})
}

// Release gives back reservation id.
func (l *Ledger) Release(ctx context.Context, id string) error {
	_, err := l.DB.Exec(ctx, "DELETE FROM budget_reserved WHERE id = $1", id)
	return err
}

// Pause stops did's writes until t (a PDS's 429), capped at a day.
func (l *Ledger) Pause(ctx context.Context, did string, t time.Time) error {
	if lim := time.Now().Add(24 * time.Hour); t.After(lim) {
		t = lim
	}
	_, err := l.DB.Exec(ctx, `INSERT INTO budget_pause (did, until) VALUES ($1, $2)
		ON CONFLICT (did) DO UPDATE SET until = greatest(budget_pause.until, excluded.until)`, did, t)
	return err
}

// Spent is the points did spent in the last span (tests, reports).
func (l *Ledger) Spent(ctx context.Context, did string, span time.Duration) (int, error) {
	var n int
	err := l.DB.QueryRow(ctx, "SELECT coalesce(sum(points), 0) FROM budget_spent WHERE did = $1 AND at > now() - $2::interval",
		did, fmt.Sprintf("%d milliseconds", span.Milliseconds())).Scan(&n)
	return n, err
}

// Prune drops spent points older than a day and expired reservations and
// pauses (run now and then; correctness does not depend on it).
func (l *Ledger) Prune(ctx context.Context) error {
	_, err := l.DB.Exec(ctx, `DELETE FROM budget_spent WHERE at < now() - interval '25 hours';
		DELETE FROM budget_reserved WHERE expires_at < now();
		DELETE FROM budget_pause WHERE until < now()`)
	return err
}
