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
	// DefaultClientUnused is how long an OAuth client (registered, or a
	// client ID document kept) may go unused before it is deleted
	// (Config.ClientUnused): unused means older than this with no pending
	// authorization request, no code and no token left; a token lives at
	// most the refresh lifetime (30 days by default) past its client's
	// last refresh, so a client still in use always has one.
	DefaultClientUnused = 30 * 24 * time.Hour
)

// PruneStats counts the rows one Prune deleted.
type PruneStats struct {
	Requests, Codes, Tokens int64
	// Sessions are MCP sessions idle for over a day past their idle
	// limit, Plans kept plans past their time.
	Sessions, Plans int64
	// Clients are OAuth clients unused for Config.ClientUnused.
	Clients int64
	// Views are expired sign-ins to /view (view.go), Forwarded clients'
	// responses kept to be forwarded (mcpsessions.go), over a minute old.
	Views, Forwarded int64
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
	{"view_sessions", `DELETE FROM view_sessions WHERE id IN
		(SELECT id FROM view_sessions WHERE expires_at < now() LIMIT $1 FOR UPDATE SKIP LOCKED)`},
	{"mcp_forwarded", fmt.Sprintf(`DELETE FROM mcp_forwarded WHERE id IN
		(SELECT id FROM mcp_forwarded WHERE created_at < now() - interval '%d seconds' LIMIT $1 FOR UPDATE SKIP LOCKED)`, int(keptFor.Seconds()))},
}

// pruneClients deletes the OAuth clients created before the cutoff that
// nothing refers to (run after the expired rows that referred to them are
// gone). A client being used right now holds its row (the reference's key
// share lock): skipped.
const pruneClients = `DELETE FROM oauth_clients WHERE client_id IN
	(SELECT client_id FROM oauth_clients c WHERE created_at < now() - $2::interval
		AND NOT EXISTS (SELECT 1 FROM auth_requests r WHERE r.client_id = c.client_id)
		AND NOT EXISTS (SELECT 1 FROM auth_codes a WHERE a.client_id = c.client_id)
		AND NOT EXISTS (SELECT 1 FROM tokens t WHERE t.client_id = c.client_id)
		LIMIT $1 FOR UPDATE SKIP LOCKED)`

// Prune deletes expired authorization requests and tokens, codes expired
// over an hour ago, and then OAuth clients unused for Config.ClientUnused,
// at most pruneMaxBatches batches of pruneBatch rows per table.
func (s *Server) Prune(ctx context.Context) (PruneStats, error) {
	var st PruneStats
	counts := []*int64{&st.Requests, &st.Codes, &st.Tokens, &st.Sessions, &st.Plans, &st.Views, &st.Forwarded}
	batches := func(table, sql string, n *int64, args ...any) error {
		for b := 0; ; b++ {
			if b == pruneMaxBatches {
				st.More = true
				return nil
			}
			tag, err := s.db.Exec(ctx, sql, append([]any{pruneBatch}, args...)...)
			if err != nil {
				return fmt.Errorf("pruning %s: %w", table, err)
			}
			*n += tag.RowsAffected()
			if tag.RowsAffected() < pruneBatch {
				return nil
			}
		}
	}
	for i, q := range pruneQueries {
		if err := batches(q.table, q.sql, counts[i]); err != nil {
			return st, err
		}
	}
	return st, batches("oauth_clients", pruneClients, &st.Clients, fmt.Sprintf("%d milliseconds", s.clientUnused().Milliseconds()))
}

func (s *Server) clientUnused() time.Duration { return or(s.cfg.ClientUnused, DefaultClientUnused) }

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
		case st.Requests+st.Codes+st.Tokens+st.Sessions+st.Plans+st.Views+st.Forwarded+st.Clients > 0:
			more := ""
			if st.More {
				more = " (more left for the next pass)"
			}
			logf("pruned %d expired authorization requests, %d codes, %d tokens, %d MCP sessions, %d plans, %d /view sign-ins, %d forwarded responses, %d OAuth clients unused for %s%s", st.Requests, st.Codes, st.Tokens, st.Sessions, st.Plans, st.Views, st.Forwarded, st.Clients, s.clientUnused(), more)
		}
	}
}
