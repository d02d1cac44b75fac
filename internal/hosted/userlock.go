package hosted

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Writes for one user queue on the user: within an instance on a queue of
// its own, across instances on a Postgres advisory lock (session-level,
// on one pooled connection held while the write runs), so that instances
// racing for one user wait their turn instead of each reading the same
// head, planning on it, and sending batches the PDS refuses for their
// swapCommit (counted by the PDS's rate limit and by the budget all the
// same). Correctness never depends on it: a write that waited writeLockWait
// without its turn goes on beside the others (swapCommit still refuses a
// stale batch), and the operator's log says so.

// writeLockWait bounds the wait for the user's turn across instances.
var writeLockWait = 30 * time.Second

// writeQueue is this instance's queue per user (the token held by the
// call whose turn it is).
type writeQueue struct {
	mu    sync.Mutex
	users map[string]*userTurn
	// slots bound the connections holding locks (half the pool)
	slots chan struct{}
	// beside counts the writes that went on without their turn
	beside atomic.Int64
}

type userTurn struct {
	turn    chan struct{} // capacity 1: the token
	waiting int
}

func (q *writeQueue) join(did string) *userTurn {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.users == nil {
		q.users = map[string]*userTurn{}
	}
	t := q.users[did]
	if t == nil {
		t = &userTurn{turn: make(chan struct{}, 1)}
		q.users[did] = t
	}
	t.waiting++
	return t
}

func (q *writeQueue) leave(did string, t *userTurn) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.waiting--; t.waiting == 0 {
		delete(q.users, did)
	}
}

// queueWrite waits for did's turn to write and returns the function that
// ends it. It fails only when ctx ends first.
func (s *Server) queueWrite(ctx context.Context, did string) (func(), error) {
	t := s.writeQueue.join(did)
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		s.writeQueue.leave(did, t)
		return nil, ctx.Err()
	}
	local := func() {
		<-t.turn
		s.writeQueue.leave(did, t)
	}
	// a lock holds a pooled connection while the write runs, and the write
	// needs others (budget, journal): at most half the pool holds locks,
	// so that writes never wait for connections their locks hold. Beyond
	// that a write goes on beside (counted).
	select {
	case s.writeQueue.slots <- struct{}{}:
	default:
		s.writeQueue.beside.Add(1)
		return local, nil
	}
	slot := func() { <-s.writeQueue.slots }
	conn, err := lockUser(ctx, s.db, did)
	if err != nil {
		slot()
		if ctx.Err() != nil {
			local()
			return nil, ctx.Err()
		}
		s.writeQueue.beside.Add(1)
		s.logf("a write for %s goes on without its turn across instances (the lock was not had in %s): %v", did, writeLockWait, err)
		return local, nil
	}
	return func() {
		unlockUser(conn, did)
		slot()
		local()
	}, nil
}

// lockUser takes did's write lock on a pooled connection, which holds it
// until unlockUser.
func lockUser(ctx context.Context, db *pgxpool.Pool, did string) (*pgxpool.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, writeLockWait)
	defer cancel()
	conn, err := db.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lockKey("write:"+did)); err != nil {
		// the lock may have been had as the wait was cut: the connection
		// is closed, which lets go of it
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, err
	}
	return conn, nil
}

func unlockUser(conn *pgxpool.Conn, did string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", lockKey("write:"+did)); err != nil {
		_ = conn.Conn().Close(ctx) // closing the session lets go of its lock
	}
	conn.Release()
}

// heldTurn is a call's turn to write for its user, let go while the call
// waits for its person (server.CallInfo.Yield) and taken again after.
type heldTurn struct {
	mu  sync.Mutex
	end func() // nil: not held
}

// yield lets go of the turn, if held.
func (h *heldTurn) yield() {
	if h == nil {
		return
	}
	h.mu.Lock()
	end := h.end
	h.end = nil
	h.mu.Unlock()
	if end != nil {
		end()
	}
}

// again waits for the turn again; a call whose context ended goes on
// without it (the write is still refused if stale).
func (h *heldTurn) again(ctx context.Context, s *Server, did string) {
	end, err := s.queueWrite(ctx, did)
	if err != nil {
		return
	}
	h.mu.Lock()
	h.end = end
	h.mu.Unlock()
}
