package hosted

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// journal is one identity's operations journal in Postgres, used by the
// engine directly (outline.Journal): one row per operation in operations,
// its body the engine's record (outline.EncodeOperation, with
// outline.EncodeProgress lines appended as it runs), so that every
// instance lists, resumes and undoes every operation, and nothing of it is
// in files.
//
// The claim on an operation being committed is a lease row in
// operation_claims, renewed every claimRenew while the instance commits and
// deleted when it is done; when the instance dies the lease runs out after
// claimTTL, and the operation then reads as incomplete (resumable) on every
// instance. A lease, rather than pg_try_advisory_lock on a held
// connection: it holds no pool connection for the minutes a long operation
// takes (the pool is shared with the ledger and the sign-in), works behind
// a transaction-pooling proxy, and frees a dead instance's claims after a
// known time rather than when TCP notices the lost connection.
type journal struct {
	db   *pgxpool.Pool
	did  string
	logf func(format string, args ...any) // the operator's log (nil: none)

	mu      sync.Mutex
	rows    map[string]journalRow // operations as last read, by id
	written map[string][]int      // operations this instance wrote whole, with their batches
	held    map[string]*lease     // claims this instance holds
	// releasing are the claims released here whose row could not be
	// deleted yet (the database was down): the token of each, deleted in
	// the background (releaseLater), and taken over by a Claim here
	releasing map[string]string
	// current is the operation claimed last and still held: the one the
	// engine commits now (it commits one at a time), whose reservation
	// the budget takes over (userRepo.ReservePlan)
	current string
}

type journalRow struct {
	version int64
	op      *outline.Operation
}

type lease struct {
	token string
	stop  chan struct{}
	done  chan struct{}
}

const (
	// journalTimeout bounds each statement of the journal.
	journalTimeout = 15 * time.Second
	// claimTTL is how long a claim lasts unless renewed; claimRenew how
	// often the instance committing renews it.
	claimTTL   = time.Minute
	claimRenew = 15 * time.Second
	// claimKept: expired claims (of instances that died) are deleted once
	// they are this old.
	claimKept = 24 * time.Hour
)

var _ outline.Journal = (*journal)(nil)

func newJournal(db *pgxpool.Pool, did string) *journal {
	return &journal{db: db, did: did, rows: map[string]journalRow{}, written: map[string][]int{}, held: map[string]*lease{}, releasing: map[string]string{}}
}

// Save writes op's progress as a line appended to its row when this
// instance wrote the row whole with the same batches; otherwise, or when
// the row is gone, the whole record.
func (j *journal) Save(ctx context.Context, op *outline.Operation, whole bool) (err error) {
	defer j.hide(&err, "recording an operation")
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	j.mu.Lock()
	w, ok := j.written[op.ID]
	j.mu.Unlock()
	if ok && !whole && slices.Equal(w, op.Batches) {
		line, err := outline.EncodeProgress(op)
		if err != nil {
			return dataErr{err}
		}
		tag, err := j.db.Exec(ctx, `UPDATE operations SET body = body || $3, version = version + 1, updated_at = now()
			WHERE did = $1 AND id = $2`, j.did, op.ID, line)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		// the row is gone: write it whole
	}
	raw, err := outline.EncodeOperation(op)
	if err != nil {
		return dataErr{err}
	}
	if _, err := j.db.Exec(ctx, `INSERT INTO operations (did, id, body) VALUES ($1, $2, $3)
		ON CONFLICT (did, id) DO UPDATE SET body = excluded.body, version = operations.version + 1, updated_at = now()`, j.did, op.ID, raw); err != nil {
		return err
	}
	j.mu.Lock()
	j.written[op.ID] = slices.Clone(op.Batches)
	j.mu.Unlock()
	return nil
}

// decode reads a row's body, keeping it by version.
func (j *journal) decode(id string, version int64, body []byte) (*outline.Operation, error) {
	op, err := outline.DecodeOperation(body)
	if err != nil {
		return nil, dataErr{fmt.Errorf("operation record %s: %w", id, err)}
	}
	j.mu.Lock()
	j.rows[id] = journalRow{version: version, op: op}
	j.mu.Unlock()
	return op, nil
}

// Get reads operation id's row.
func (j *journal) Get(ctx context.Context, id string) (_ *outline.Operation, err error) {
	defer j.hide(&err, "reading an operation")
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	var version int64
	var body []byte
	err = j.db.QueryRow(ctx, "SELECT version, body FROM operations WHERE did = $1 AND id = $2", j.did, id).Scan(&version, &body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return j.decode(id, version, body)
}

// List reads the identity's operations: the versions of every row, then the
// bodies of the rows changed since this instance last read them.
func (j *journal) List(ctx context.Context) (_ []*outline.Operation, err error) {
	defer j.hide(&err, "listing the operations")
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	rows, err := j.db.Query(ctx, "SELECT id, version FROM operations WHERE did = $1", j.did)
	if err != nil {
		return nil, err
	}
	versions := map[string]int64{}
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			rows.Close()
			return nil, err
		}
		versions[id] = v
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var stale []string
	j.mu.Lock()
	for id := range j.rows {
		if _, ok := versions[id]; !ok {
			delete(j.rows, id)
		}
	}
	for id, v := range versions {
		if r, ok := j.rows[id]; !ok || r.version != v {
			stale = append(stale, id)
		}
	}
	j.mu.Unlock()
	if len(stale) > 0 {
		rows, err := j.db.Query(ctx, "SELECT id, version, body FROM operations WHERE did = $1 AND id = ANY($2)", j.did, stale)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id string
			var v int64
			var body []byte
			if err := rows.Scan(&id, &v, &body); err != nil {
				rows.Close()
				return nil, err
			}
			if _, err := j.decode(id, v, body); err != nil {
				rows.Close()
				return nil, err
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]*outline.Operation, 0, len(versions))
	for id := range versions {
		if r, ok := j.rows[id]; ok { // a row deleted meanwhile is left out
			out = append(out, r.op)
		}
	}
	return out, nil
}

// Remove deletes operation id's row.
func (j *journal) Remove(ctx context.Context, id string) (err error) {
	defer j.hide(&err, "removing an operation")
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	j.mu.Lock()
	delete(j.written, id)
	delete(j.rows, id)
	j.mu.Unlock()
	_, err = j.db.Exec(ctx, "DELETE FROM operations WHERE did = $1 AND id = $2", j.did, id)
	return err
}

// errDatabaseDown is what a client is told of a database that did not
// answer: the engine puts the journal's errors in the tool's result, and
// pgx's text can name the database's host, port, user and name; the
// details go to the operator's log.
var errDatabaseDown = errors.New("its database did not answer")

// dataErr is an error of a record's contents (encoding, decoding), said
// as it is.
type dataErr struct{ error }

func (e dataErr) Unwrap() error { return e.error }

// hide makes *err, unless nil or of a record's contents, errDatabaseDown,
// logging what it was (doing says what the journal was doing).
func (j *journal) hide(err *error, doing string) {
	if *err != nil {
		*err = j.hidden(*err, doing)
	}
}

func (j *journal) hidden(err error, doing string) error {
	var d dataErr
	if errors.As(err, &d) {
		return d.error
	}
	if j.logf != nil {
		j.logf("operations journal of %s, %s: %v", j.did, doing, err)
	}
	return errDatabaseDown
}

// Claim takes the lease on operation id unless another instance (or
// another engine of this one) holds it unexpired, and keeps it renewed
// until Release.
func (j *journal) Claim(ctx context.Context, id string) (bool, error) {
	j.mu.Lock()
	_, mine := j.held[id]
	j.mu.Unlock()
	if mine {
		j.mu.Lock()
		j.current = id
		j.mu.Unlock()
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	l := &lease{token: newToken("claim-"), stop: make(chan struct{}), done: make(chan struct{})}
	j.mu.Lock()
	was := j.releasing[id] // a claim of ours released, its row not yet deleted: ours to take over
	j.mu.Unlock()
	var holder string
	err := j.db.QueryRow(ctx, `INSERT INTO operation_claims (did, id, holder, expires_at) VALUES ($1, $2, $3, now() + $4 * interval '1 second')
		ON CONFLICT (did, id) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
		WHERE operation_claims.expires_at <= now() OR operation_claims.holder = $5
		RETURNING holder`, j.did, id, l.token, claimTTL.Seconds(), was).Scan(&holder)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil // held by another, unexpired
	}
	if err != nil {
		return false, j.hidden(err, "claiming an operation")
	}
	j.mu.Lock()
	j.held[id] = l
	j.current = id
	if j.releasing[id] == was {
		delete(j.releasing, id) // taken over: the background delete names a holder no longer there
	}
	j.mu.Unlock()
	go j.renew(id, l)
	return true, nil
}

// renew extends l every claimRenew until it is released.
func (j *journal) renew(id string, l *lease) {
	defer close(l.done)
	t := time.NewTicker(claimRenew)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), claimRenew)
		// a failure is retried at the next tick; the lease lasts claimTTL
		j.db.Exec(ctx, `UPDATE operation_claims SET expires_at = now() + $4 * interval '1 second'
			WHERE did = $1 AND id = $2 AND holder = $3`, j.did, id, l.token, claimTTL.Seconds())
		cancel()
	}
}

// Release stops renewing the claim on id and deletes it (and the claims
// of instances that died long ago). If the delete fails (the database is
// down), it is tried again in the background until it is done or the
// lease has run out (releaseLater): until then every instance reads the
// operation as being committed, and a resume is refused for it.
func (j *journal) Release(ctx context.Context, id string) {
	j.mu.Lock()
	l, ok := j.held[id]
	delete(j.held, id)
	if j.current == id {
		j.current = ""
	}
	j.mu.Unlock()
	if !ok {
		return
	}
	close(l.stop)
	<-l.done
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	if err := j.deleteClaim(ctx, id, l.token); err != nil {
		j.mu.Lock()
		j.releasing[id] = l.token
		j.mu.Unlock()
		go j.releaseLater(id, l.token, time.Now().Add(claimTTL))
	}
}

// deleteClaim deletes the claim row of id held by token (and the claims of
// instances that died long ago).
func (j *journal) deleteClaim(ctx context.Context, id, token string) error {
	_, err := j.db.Exec(ctx, `DELETE FROM operation_claims WHERE (did = $1 AND id = $2 AND holder = $3) OR expires_at < now() - $4 * interval '1 second'`,
		j.did, id, token, claimKept.Seconds())
	return err
}

// releaseRetry is the first wait before a released claim's delete is tried
// again; each wait doubles, up to releaseRetryMax.
var releaseRetry, releaseRetryMax = 200 * time.Millisecond, 2 * time.Second

// releaseLater deletes the claim row of id held by token, retrying until
// it is done, taken over by a Claim here, or the lease has run out (until).
func (j *journal) releaseLater(id, token string, until time.Time) {
	defer func() {
		j.mu.Lock()
		if j.releasing[id] == token {
			delete(j.releasing, id)
		}
		j.mu.Unlock()
	}()
	wait := releaseRetry
	for time.Now().Before(until) {
		time.Sleep(wait)
		wait = min(2*wait, releaseRetryMax)
		j.mu.Lock()
		mine := j.releasing[id] == token
		j.mu.Unlock()
		if !mine {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), journalTimeout)
		err := j.deleteClaim(ctx, id, token)
		cancel()
		if err == nil {
			return
		}
	}
}

// Live reports whether some instance holds an unexpired claim on id.
func (j *journal) Live(ctx context.Context, id string) (_ bool, err error) {
	defer j.hide(&err, "reading an operation's claim")
	j.mu.Lock()
	_, mine := j.held[id]
	j.mu.Unlock()
	if mine {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, journalTimeout)
	defer cancel()
	var live bool
	err = j.db.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM operation_claims WHERE did = $1 AND id = $2 AND expires_at > now())", j.did, id).Scan(&live)
	return live, err
}

// committing is the operation this instance commits now for the identity
// ("": none).
func (j *journal) committing() string {
	if j == nil {
		return ""
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.held[j.current]; !ok {
		return ""
	}
	return j.current
}
