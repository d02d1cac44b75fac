package hosted

import (
	"github.com/prometheus/client_golang/prometheus"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// sessionStore keeps the MCP sessions of every instance in Postgres
// (server.SessionStore, server.SeenStore): a balancer needs no affinity,
// any instance serves any request of a session (adopting it from the
// initialize request kept here), and a session is served only for the
// user who started it. A session ends when its client deletes it or after
// idle without a request on any instance; a GET stream open on an instance
// keeps its session from expiring while it lasts (it is touched when it
// opens and closes, and the instance holding it counts it).
type sessionStore struct {
	db   *pgxpool.Pool
	idle time.Duration
	logf func(format string, args ...any)

	mu      sync.Mutex
	streams map[string]int // open GET streams on this instance
	// deliver gets the clients' responses forwarded to this instance
	deliver func(session string, msg []byte)
	// changed hears of the sessions whose subscriptions changed
	// (server.SubscriptionStore)
	changed func(session string)
	// listening: the listener runs; listened: it listened once
	listening, listened bool
	// adopted counts sessions served here from the kept initialize
	// request (nil: none); forgotten those forgotten here (Forgot)
	adopted   prometheus.Counter
	forgotten atomic.Int64
}

var (
	_ server.SessionStore = (*sessionStore)(nil)
	_ server.SeenStore    = (*sessionStore)(nil)
	_ server.Forwarder    = (*sessionStore)(nil)
	_ server.Forgetter    = (*sessionStore)(nil)

	_ server.SubscriptionStore = (*sessionStore)(nil)
)

// Forgot counts a session the transport of this instance forgot to stay
// within its bound (server.Forgetter); the first one is logged.
func (st *sessionStore) Forgot(string) {
	if st.forgotten.Add(1) == 1 {
		st.logf("MCP sessions: more than %d known on this instance: the one unused the longest is forgotten here (adopted again when used; counted in bulleted_hosted_sessions_forgotten_total)", server.MaxSessions)
	}
}

// touchEvery: a session's last use is written at most this often.
const touchEvery = 30 * time.Second

// sessionTimeout bounds each statement of the session store.
const sessionTimeout = 10 * time.Second

func newSessionStore(db *pgxpool.Pool, idle time.Duration, logf func(string, ...any)) *sessionStore {
	if idle <= 0 {
		idle = server.SessionIdle
	}
	return &sessionStore{db: db, idle: idle, logf: logf, streams: map[string]int{}}
}

func (st *sessionStore) fail(what string, err error) error {
	st.logf("MCP session store: %s: %v", what, err)
	return fmt.Errorf("%s: %w", what, err)
}

func (st *sessionStore) Start(ctx context.Context, id string, init []byte) error {
	p, ok := identityFrom(ctx)
	if !ok {
		return errors.New("no signed-in user for this session")
	}
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	if _, err := st.db.Exec(ctx, "INSERT INTO mcp_sessions (id, did, init) VALUES ($1, $2, $3)", id, p.DID, init); err != nil {
		return st.fail("starting a session", err)
	}
	return nil
}

func (st *sessionStore) Check(ctx context.Context, id string, wantInit bool) ([]byte, string, error) {
	p, _ := identityFrom(ctx)
	st.mu.Lock()
	streaming := st.streams[id] > 0
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	idle := fmt.Sprintf("%d milliseconds", st.idle.Milliseconds())
	var did string
	var init []byte
	// (used_at is written at most every touchEvery: a request is a read)
	err := st.db.QueryRow(ctx, `WITH s AS (SELECT did FROM mcp_sessions
			WHERE id = $1 AND ended_at IS NULL AND (used_at > now() - $2::interval OR $3)),
		u AS (UPDATE mcp_sessions SET used_at = now()
			WHERE id = $1 AND used_at < now() - $5::interval AND EXISTS (SELECT 1 FROM s))
		SELECT s.did, CASE WHEN $4 THEN (SELECT init FROM mcp_sessions WHERE id = $1) END FROM s`,
		id, idle, streaming, wantInit, fmt.Sprintf("%d milliseconds", touchEvery.Milliseconds())).Scan(&did, &init)
	if err == nil {
		if did != p.DID {
			return nil, "session " + id + " belongs to another user", nil
		}
		if wantInit && init != nil && st.adopted != nil {
			st.adopted.Inc()
		}
		return init, "", nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, "", st.fail("checking a session", err)
	}
	// not live: say why (expired now, or ended before)
	var why *string
	err = st.db.QueryRow(ctx, `UPDATE mcp_sessions SET ended_at = coalesce(ended_at, now()),
		why = coalesce(why, $2) WHERE id = $1 RETURNING why`, id, "expired after "+st.idle.String()+" without a request").Scan(&why)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, "unknown session " + id + " (not started by this service, or forgotten since it ended)", nil
	}
	if err != nil {
		return nil, "", st.fail("checking a session", err)
	}
	return nil, "session " + id + " " + *why, nil
}

func (st *sessionStore) End(ctx context.Context, id, why string) error {
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	// its subscriptions end with it (the instance holding its GET stream
	// is told)
	if _, err := st.db.Exec(ctx, `WITH e AS (UPDATE mcp_sessions SET ended_at = now(), why = $2, init = NULL WHERE id = $1 AND ended_at IS NULL),
		d AS (DELETE FROM mcp_subscriptions WHERE session = $1 RETURNING 1)
		SELECT pg_notify($3, $1) WHERE EXISTS (SELECT 1 FROM d)`, id, why, subsChannel); err != nil {
		return st.fail("ending a session", err)
	}
	return nil
}

// subsChannel is the NOTIFY channel of the sessions whose subscriptions
// changed (the payload: the session id).
const subsChannel = "bulleted_mcp_subscriptions"

// Subscribe records a session's subscription (server.SubscriptionStore),
// at most max a session (the session's row locked meanwhile), and tells
// every instance.
func (st *sessionStore) Subscribe(ctx context.Context, session, uri, rev string, max int) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	full := false
	err := pgx.BeginFunc(ctx, st.db, func(tx pgx.Tx) error {
		var n int
		var again bool
		err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM mcp_subscriptions WHERE session = $1),
			EXISTS (SELECT 1 FROM mcp_subscriptions WHERE session = $1 AND uri = $2)
			FROM mcp_sessions WHERE id = $1 AND ended_at IS NULL FOR UPDATE`, session, uri).Scan(&n, &again)
		if errors.Is(err, pgx.ErrNoRows) {
			return errors.New("the session has ended")
		}
		if err != nil || again {
			return err
		}
		if n >= max {
			full = true
			return nil
		}
		if _, err := tx.Exec(ctx, "INSERT INTO mcp_subscriptions (session, uri, rev) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING", session, uri, rev); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "SELECT pg_notify($1, $2)", subsChannel, session)
		return err
	})
	if err != nil {
		return false, st.fail("keeping a subscription", err)
	}
	return full, nil
}

// Unsubscribe ends a session's subscription (server.SubscriptionStore)
// and tells every instance.
func (st *sessionStore) Unsubscribe(ctx context.Context, session, uri string) error {
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	if _, err := st.db.Exec(ctx, `WITH d AS (DELETE FROM mcp_subscriptions WHERE session = $1 AND uri = $2 RETURNING 1)
		SELECT pg_notify($3, $1) WHERE EXISTS (SELECT 1 FROM d)`, session, uri, subsChannel); err != nil {
		return st.fail("ending a subscription", err)
	}
	return nil
}

// Subscribed are a live session's subscriptions (server.SubscriptionStore).
func (st *sessionStore) Subscribed(ctx context.Context, session string) ([]server.StoredSubscription, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	rows, err := st.db.Query(ctx, `SELECT s.uri, s.rev FROM mcp_subscriptions s JOIN mcp_sessions m ON m.id = s.session
		WHERE s.session = $1 AND m.ended_at IS NULL ORDER BY s.created_at, s.uri LIMIT $2`, session, server.MaxSubscriptions)
	if err != nil {
		return nil, st.fail("reading a session's subscriptions", err)
	}
	subs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (server.StoredSubscription, error) {
		var s server.StoredSubscription
		err := r.Scan(&s.URI, &s.Rev)
		return s, err
	})
	if err != nil {
		return nil, st.fail("reading a session's subscriptions", err)
	}
	return subs, nil
}

// Told moves a session's subscriptions' revision forward to rev
// (server.SubscriptionStore).
func (st *sessionStore) Told(ctx context.Context, session, rev string) error {
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	if _, err := st.db.Exec(ctx, "UPDATE mcp_subscriptions SET rev = $2 WHERE session = $1 AND rev < $2", session, rev); err != nil {
		return st.fail("recording what a session's subscriptions were told", err)
	}
	return nil
}

// OnSubscriptions makes changed hear of the sessions whose subscriptions
// changed on any instance (server.SubscriptionStore), on the listening
// connection.
func (st *sessionStore) OnSubscriptions(changed func(session string)) {
	st.mu.Lock()
	st.changed = changed
	start := !st.listening
	st.listening = true
	st.mu.Unlock()
	if start {
		go st.listen()
	}
}

func (st *sessionStore) Stream(id string, d int) {
	st.mu.Lock()
	st.streams[id] += d
	if st.streams[id] <= 0 {
		delete(st.streams, id)
	}
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	// if it fails, the session's idle time counts from its last request
	if _, err := st.db.Exec(ctx, "UPDATE mcp_sessions SET used_at = now() WHERE id = $1 AND ended_at IS NULL", id); err != nil {
		st.logf("MCP session store: touching a session's stream: %v", err)
	}
}

func (st *sessionStore) Seen(ctx context.Context, id string) (string, string, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	var did, rev *string
	err := st.db.QueryRow(ctx, "SELECT seen_did, seen_rev FROM mcp_sessions WHERE id = $1", id).Scan(&did, &rev)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && (did == nil || rev == nil)) {
		return "", "", nil
	}
	if err != nil {
		return "", "", st.fail("reading what a session was told", err)
	}
	return *did, *rev, nil
}

func (st *sessionStore) SetSeen(ctx context.Context, id, did, rev string) error {
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	if _, err := st.db.Exec(ctx, "UPDATE mcp_sessions SET seen_did = $2, seen_rev = $3 WHERE id = $1", id, did, rev); err != nil {
		return st.fail("recording what a session was told", err)
	}
	return nil
}

// forwardChannel is the NOTIFY channel of clients' responses forwarded to
// the instance whose call waits for them (server.Forwarder).
const forwardChannel = "bulleted_mcp_responses"

// maxForward bounds a response forwarded in the NOTIFY itself (a payload
// is at most 8000 bytes); a larger one is kept in mcp_forwarded, the
// NOTIFY naming its row (every instance reads it): at most maxKept bytes,
// and at most maxKeptPerSession of a session's within keptFor (what the
// pruner then deletes); beyond, the client is told why (413, 429).
const (
	maxForward        = 7900
	maxKept           = 1 << 20
	maxKeptPerSession = 8
	keptFor           = time.Minute
)

// forwarded is a NOTIFY's payload: the session and its client's response,
// or the mcp_forwarded row that holds it (R).
type forwarded struct {
	S string          `json:"s"`
	M json.RawMessage `json:"m,omitempty"`
	R int64           `json:"r,omitempty"`
}

// Forward hands a client's response to every instance (NOTIFY); the one
// whose call waits for it takes it.
func (st *sessionStore) Forward(ctx context.Context, session string, msg []byte) error {
	payload, err := json.Marshal(forwarded{S: session, M: msg})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	defer cancel()
	if len(payload) > maxForward {
		if len(msg) > maxKept {
			return &server.ForwardRefusal{Status: http.StatusRequestEntityTooLarge,
				Reason: fmt.Sprintf("a response of %d bytes is too large to pass to the server instance waiting for it (at most %d)", len(msg), maxKept)}
		}
		var id int64
		// the session's count and its insert under one lock (a transaction's
		// advisory lock on the session): two responses sent at once, on
		// two instances, cannot both be the last one allowed
		err := pgx.BeginFunc(ctx, st.db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('mcp_forwarded:' || $1, 0))", session); err != nil {
				return err
			}
			return tx.QueryRow(ctx, `INSERT INTO mcp_forwarded (session, msg) SELECT $1, $2
			WHERE (SELECT count(*) FROM mcp_forwarded WHERE session = $1 AND created_at > now() - $3::interval) < $4 RETURNING id`,
				session, msg, fmt.Sprintf("%d milliseconds", keptFor.Milliseconds()), maxKeptPerSession).Scan(&id)
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return &server.ForwardRefusal{Status: http.StatusTooManyRequests,
				Reason: fmt.Sprintf("more than %d large responses (over %d bytes) of this session within %s: send it again later", maxKeptPerSession, maxForward, keptFor)}
		}
		if err != nil {
			return st.fail("keeping a client's response to forward it", err)
		}
		payload, _ = json.Marshal(forwarded{S: session, R: id})
	}
	if _, err := st.db.Exec(ctx, "SELECT pg_notify($1, $2)", forwardChannel, string(payload)); err != nil {
		return st.fail("forwarding a client's response", err)
	}
	return nil
}

// kept reads a forwarded response kept in mcp_forwarded.
func (st *sessionStore) kept(m forwarded) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sessionTimeout)
	defer cancel()
	var msg []byte
	err := st.db.QueryRow(ctx, "SELECT msg FROM mcp_forwarded WHERE id = $1 AND session = $2", m.R, m.S).Scan(&msg)
	return msg, err
}

// Receive makes deliver get the responses forwarded to this instance, on
// a connection of its own that LISTENs (opened again when it is lost).
func (st *sessionStore) Receive(deliver func(session string, msg []byte)) {
	st.mu.Lock()
	st.deliver = deliver
	start := !st.listening
	st.listening = true
	st.mu.Unlock()
	if start {
		go st.listen()
	}
}

// listenRetry is the wait before the listening connection is opened again.
const listenRetry = 2 * time.Second

func (st *sessionStore) listen() {
	ctx := context.Background()
	for {
		err := st.listenOnce(ctx)
		if err != nil && err.Error() == "closed pool" { // (puddle.ErrClosedPool: the instance is stopping)
			return
		}
		if errors.Is(err, errQuiet) {
			continue
		}
		st.logf("MCP session store: listening for forwarded responses (again in %s): %v", listenRetry, err)
		t := time.NewTimer(listenRetry)
		<-t.C
	}
}

func (st *sessionStore) listenOnce(ctx context.Context) error {
	// a connection of its own, not the pool's: the pool's Close does not
	// wait for it; it is closed when the pool is (found at the next quiet
	// minute) or when it fails
	cctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	conn, err := pgx.ConnectConfig(cctx, st.db.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		if _, perr := st.db.Acquire(ctx); perr != nil && perr.Error() == "closed pool" {
			return perr
		}
		return err
	}
	defer conn.Close(context.Background())
	lctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	_, err = conn.Exec(lctx, "LISTEN "+forwardChannel)
	if err == nil {
		_, err = conn.Exec(lctx, "LISTEN "+subsChannel)
	}
	cancel()
	if err != nil {
		return err
	}
	// (changes made while nobody listened, since the connection before,
	// were not heard: the sessions whose streams are held here load their
	// subscriptions again)
	st.mu.Lock()
	changed, again := st.changed, st.listened
	st.listened = true
	st.mu.Unlock()
	if changed != nil && again {
		changed("")
	}
	for {
		wctx, cancel := context.WithTimeout(ctx, listenQuiet)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			// a quiet minute: go on listening while the instance runs
			actx, cancel := context.WithTimeout(ctx, sessionTimeout)
			c, perr := st.db.Acquire(actx)
			cancel()
			if perr != nil && perr.Error() == "closed pool" {
				return perr
			}
			if c != nil {
				c.Release()
			}
			if conn.IsClosed() {
				return errQuiet // (the wait's end closed it) listen again
			}
			continue
		}
		if err != nil {
			return err
		}
		if n.Channel == subsChannel {
			st.mu.Lock()
			changed := st.changed
			st.mu.Unlock()
			if changed != nil && n.Payload != "" {
				changed(n.Payload)
			}
			continue
		}
		var m forwarded
		if json.Unmarshal([]byte(n.Payload), &m) != nil || m.S == "" || (m.M == nil && m.R == 0) {
			continue
		}
		st.mu.Lock()
		deliver := st.deliver
		st.mu.Unlock()
		if deliver == nil {
			continue
		}
		go func() {
			if m.R != 0 {
				msg, err := st.kept(m)
				if err != nil {
					st.logf("MCP session store: reading a forwarded response (row %d): %v", m.R, err)
					return
				}
				m.M = msg
			}
			deliver(m.S, m.M)
		}()
	}
}

// errQuiet: the listening connection was quiet for listenQuiet.
var errQuiet = errors.New("quiet")

// listenQuiet is how long the listening connection waits for a response
// before it checks that the instance still runs.
const listenQuiet = time.Minute
