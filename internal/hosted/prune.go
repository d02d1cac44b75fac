package hosted

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// Pruning: expired authorization requests, codes and tokens are deleted in
// batches, by any number of instances at once (a batch takes the rows no
// other instance holds: FOR UPDATE SKIP LOCKED).
const (
	pruneBatch = 1000
	// pruneMaxBatches bounds one pass per table; what is left waits for
	// the next pass.
	pruneMaxBatches = 100
	// codeRetention keeps a code past its expiry, so that a used code
	// presented again within it is still recognised as a replay (and
	// revokes its grant) rather than unknown.
	codeRetention = time.Hour
	// DefaultPruneEvery is how often RunPruner prunes.
	DefaultPruneEvery = 5 * time.Minute
)

// PruneStats counts the rows one Prune deleted.
type PruneStats struct {
	Requests, Codes, Tokens int64
	// Sessions are MCP sessions idle for over a day past their idle
	// limit, Plans kept plans past their time.
	Sessions, Plans int64
	// More is true when a table had more expired rows than one pass
	// deletes (the next pass continues).
	More bool
}

var pruneQueries = []struct {
	table string
	sql   string
}{
	{"auth_requests", `DELETE FROM auth_requests WHERE id IN
		(SELECT id FROM auth_requests WHERE expires_at < now() LIMIT $1 FOR UPDATE SKIP LOCKED)`},
	{"auth_codes", fmt.Sprintf(`DELETE FROM auth_codes WHERE code_hash IN
		(SELECT code_hash FROM auth_codes WHERE expires_at < now() - interval '%d seconds' LIMIT $1 FOR UPDATE SKIP LOCKED)`, int(codeRetention.Seconds()))},
	{"tokens", `DELETE FROM tokens WHERE hash IN
		(SELECT hash FROM tokens WHERE expires_at < now() LIMIT $1 FOR UPDATE SKIP LOCKED)`},
	{"mcp_sessions", fmt.Sprintf(`DELETE FROM mcp_sessions WHERE id IN
		(SELECT id FROM mcp_sessions WHERE used_at < now() - interval '%d seconds' LIMIT $1 FOR UPDATE SKIP LOCKED)`, int((server.SessionIdle + 24*time.Hour).Seconds()))},
	{"plans", `DELETE FROM plans WHERE id IN
		(SELECT id FROM plans WHERE expires_at < now() LIMIT $1 FOR UPDATE SKIP LOCKED)`},
}

// Prune deletes expired authorization requests and tokens, and codes
// expired over an hour ago, at most pruneMaxBatches batches of pruneBatch
// rows per table.
func (s *Server) Prune(ctx context.Context) (PruneStats, error) {
	var st PruneStats
	counts := []*int64{&st.Requests, &st.Codes, &st.Tokens, &st.Sessions, &st.Plans}
	for i, q := range pruneQueries {
		for b := 0; ; b++ {
			if b == pruneMaxBatches {
				st.More = true
				break
			}
			tag, err := s.db.Exec(ctx, q.sql, pruneBatch)
			if err != nil {
				return st, fmt.Errorf("pruning %s: %w", q.table, err)
			}
			*counts[i] += tag.RowsAffected()
			if tag.RowsAffected() < pruneBatch {
				break
			}
		}
	}
	return st, nil
}

// pruneRoundFloor is the least time a pruning round is given.
const pruneRoundFloor = 10 * time.Second

// RunPruner prunes soon after it starts, then every interval (zero:
// DefaultPruneEvery; each wait jittered by up to a fifth, so that instances
// spread out) until ctx is done, reporting what it deleted and any failure
// to logf.
func (s *Server) RunPruner(ctx context.Context, every time.Duration, logf func(format string, args ...any)) {
	if every <= 0 {
		every = DefaultPruneEvery
	}
	for first := true; ; first = false {
		wait := time.Duration(rand.Int64N(int64(every/5) + 1))
		if !first {
			wait += every
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		// a round is bounded by the interval, but never below a floor: a
		// short interval on a loaded database would time every round out
		pctx, cancel := context.WithTimeout(ctx, max(every, pruneRoundFloor))
		st, err := s.Prune(pctx)
		cancel()
		switch {
		case err != nil:
			logf("pruning expired OAuth rows failed (retried in %s): %v", every, err)
		case st.Requests+st.Codes+st.Tokens+st.Sessions+st.Plans > 0:
			more := ""
			if st.More {
				more = " (more left for the next pass)"
			}
			logf("pruned %d expired authorization requests, %d codes, %d tokens, %d MCP sessions, %d plans%s", st.Requests, st.Codes, st.Tokens, st.Sessions, st.Plans, more)
		}
	}
}
