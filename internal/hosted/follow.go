package hosted

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
)

// Every user an instance holds is followed (RunFollowing): one
// subscribeRepos connection per PDS host (pds.Hub) carries the commits of
// all the users of that host the instance holds, each verified and taken
// into that user's kept repository as the single-user follower does; the
// user's tree is then brought forward and their subscribed sessions told
// (notifications/resources/updated), without a call. A user joins their
// host's hub when the instance opens them and leaves when it drops them.
// While a hub's connection is live, a user's reads and writes answer from
// the kept repository without asking the PDS (a write is planned on the
// followed head, guarded by swapCommit as always); while it is not, they
// ask as before.
//
// Instances tell each other of their own commits: after each batch that
// landed, the instance NOTIFYs commitChannel with the user and the rev;
// the others holding that user know their kept head is behind until the
// stream brings that commit (pds.Repo.Moved): their reads wait for it
// briefly, then ask, and their writes swapped on the old head are not
// sent. (The stream brings it too, but the reference PDS hands a commit
// to its subscribers up to a second after it was made.)

// commitNoticeTimeout bounds the NOTIFY of a commit that landed.
const commitNoticeTimeout = 2 * time.Second

// commitChannel is the NOTIFY channel of the instances' own commits.
const commitChannel = "bulleted_mcp_commits"

// following is the instance's following (nil until RunFollowing).
type following struct {
	ctx  context.Context
	self string // this instance's id in its notices
	// heard, tests: another instance's commit of a user held was heard
	// (called before it is taken in)
	heard func(did, rev string)

	mu   sync.Mutex
	hubs map[string]*followedHost // by PDS host

	// listening: the LISTEN connection is up; waits are the syncs
	// waiting for their notice to come back (caughtUp)
	lmu       sync.Mutex
	listening bool
	waits     map[string]chan struct{}
}

// notifySQL sends a notice ($1 the channel, $2 the payload). A notifying
// transaction commits under a cluster-wide lock (notices are delivered in
// commit order); this one's commit does not wait for its WAL to be
// flushed (synchronous_commit off for it alone: a notice is not durable
// anyway), so that it holds that lock briefly.
const notifySQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, $2)"

// syncChannel is the NOTIFY channel of this instance's own syncs
// (caughtUp).
func (f *following) syncChannel() string { return "bulleted_mcp_sync_" + f.self }

// syncWait bounds how long a call waits for its sync (caughtUp; a
// variable for tests).
var syncWait = 250 * time.Millisecond

// followedHost is one PDS host's hub and the end of its connection.
type followedHost struct {
	hub    *pds.Hub
	cancel context.CancelFunc
}

// hubIdle is how long a hub without members keeps its connection.
const hubIdle = time.Minute

// commitNote is one instance's commit, as NOTIFYed.
type commitNote struct {
	DID string `json:"d"`
	Rev string `json:"r"`
	By  string `json:"i"`
}

// RunFollowing follows the commit streams of the users this instance
// holds until ctx ends (see above), and listens for the other instances'
// commits.
func (s *Server) RunFollowing(ctx context.Context) { s.runFollowing(ctx, nil) }

func (s *Server) runFollowing(ctx context.Context, heard func(did, rev string)) {
	id := make([]byte, 8)
	rand.Read(id)
	f := &following{ctx: ctx, self: hex.EncodeToString(id), hubs: map[string]*followedHost{}, heard: heard, waits: map[string]chan struct{}{}}
	s.mu.Lock()
	s.follow = f
	var held []*user
	for _, u := range s.users {
		held = append(held, u)
	}
	s.mu.Unlock()
	for _, u := range held {
		s.join(u)
	}
	s.listenCommits(ctx, f)
	s.mu.Lock()
	if s.follow == f {
		s.follow = nil
	}
	s.mu.Unlock()
}

// join makes u followed, if the instance follows and u is over a PDS.
func (s *Server) join(u *user) {
	s.mu.Lock()
	f := s.follow
	s.mu.Unlock()
	if f == nil || u.repo == nil {
		return
	}
	host := u.repo.Client().Host
	e := u.env.Engine
	f.mu.Lock()
	fh, ok := f.hubs[host]
	if !ok {
		h := pds.NewHub(host)
		h.Errs = func(err error) { s.logf("following %s: %v", host, err) }
		ctx, cancel := context.WithCancel(f.ctx)
		fh = &followedHost{hub: h, cancel: cancel}
		f.hubs[host] = fh
		go h.Run(ctx)
	}
	// (joined under f.mu: a hub is closed under it once it has no members)
	left := fh.hub.Join(f.ctx, u.repo, func() {
		// the tree follows the stream without a call, and subscribed
		// sessions hear of it
		_, _ = e.Tree(f.ctx)
		s.subs.Seen(f.ctx, e)
	})
	f.mu.Unlock()
	leave := func() {
		left()
		// a hub left without members is closed after hubIdle
		time.AfterFunc(hubIdle, func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.hubs[host] == fh && fh.hub.Members() == 0 {
				fh.cancel()
				delete(f.hubs, host)
			}
		})
	}
	s.mu.Lock()
	if s.users[u.did] != u { // dropped meanwhile
		s.mu.Unlock()
		leave()
		return
	}
	u.leave = leave
	s.mu.Unlock()
}

// committed tells the other instances that u's repository is at rev (one
// of this instance's commits).
func (s *Server) committed(did, rev string) {
	s.mu.Lock()
	f := s.follow
	s.mu.Unlock()
	if f == nil || rev == "" {
		return
	}
	payload, _ := json.Marshal(commitNote{DID: did, Rev: rev, By: f.self})
	// short: the write has landed and waits for this (while the user's turn
	// is held); a notice not sent leaves the others to hear of the commit
	// from the stream
	ctx, cancel := context.WithTimeout(f.ctx, commitNoticeTimeout)
	defer cancel()
	if _, err := s.db.Exec(ctx, notifySQL, commitChannel, string(payload)); err != nil && ctx.Err() == nil {
		s.logf("telling the other instances of a commit: %v", err)
	}
}

// moved takes in another instance's commit notice.
func (s *Server) moved(f *following, payload string) {
	var n commitNote
	if json.Unmarshal([]byte(payload), &n) != nil || n.By == f.self || n.DID == "" {
		return
	}
	s.mu.Lock()
	u := s.users[n.DID]
	s.mu.Unlock()
	if u != nil && u.repo != nil {
		s.notices.Add(1)
		if f.heard != nil {
			f.heard(n.DID, n.Rev)
		}
		u.repo.Moved(n.Rev)
	}
}

// listenCommits LISTENs for the other instances' commits on a connection
// of its own until ctx ends (opened again when it is lost).
func (s *Server) listenCommits(ctx context.Context, f *following) {
	for ctx.Err() == nil {
		err := s.listenCommitsOnce(ctx, f)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errQuiet) {
			continue // a quiet minute ended the wait (and pgx the connection): listen again
		}
		s.logf("listening for the other instances' commits (again in %s): %v", listenRetry, err)
		select {
		case <-ctx.Done():
		case <-time.After(listenRetry):
		}
	}
}

func (s *Server) listenCommitsOnce(ctx context.Context, f *following) error {
	cctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	conn, err := pgx.ConnectConfig(cctx, s.db.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	lctx, cancel := context.WithTimeout(ctx, sessionTimeout)
	_, err = conn.Exec(lctx, "LISTEN "+commitChannel)
	if err == nil {
		_, err = conn.Exec(lctx, "LISTEN "+f.syncChannel())
	}
	cancel()
	if err != nil {
		return err
	}
	f.lmu.Lock()
	f.listening = true
	f.lmu.Unlock()
	defer func() {
		f.lmu.Lock()
		f.listening = false
		f.lmu.Unlock()
	}()
	for {
		// bounded, so that a connection that died without a reset (a
		// failover, a NAT's timeout) is noticed within listenQuiet rather
		// than the system's TCP keepalive: every call on a live user
		// NOTIFYs this connection, so a quiet minute is rare under use
		wctx, cancel := context.WithTimeout(ctx, listenQuiet)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		if err != nil && wctx.Err() != nil && ctx.Err() == nil {
			return errQuiet
		}
		if err != nil {
			return err
		}
		if n.Channel == f.syncChannel() {
			f.lmu.Lock()
			if ch := f.waits[n.Payload]; ch != nil {
				close(ch)
				delete(f.waits, n.Payload)
			}
			f.lmu.Unlock()
			continue
		}
		s.moved(f, n.Payload)
	}
}

// caughtUp waits until this instance has heard every commit notice the
// other instances sent before it was called, and reports whether it has
// (false: not listening, or not within syncWait). PostgreSQL delivers a
// listener the notices of different transactions in the order they
// committed: a notice of this instance's own, once back, comes after every
// notice committed before it was sent, such as that of the write another
// instance answered just before this call reached this one. A call on a
// user whose stream is live makes sure of it first (envFor), so that
// its read does not answer from a followed head another instance's write
// has left behind (one round trip to the database instead of a request
// to the PDS).
func (s *Server) caughtUp(ctx context.Context, f *following) bool {
	var b [8]byte
	rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	ch := make(chan struct{})
	f.lmu.Lock()
	if !f.listening {
		f.lmu.Unlock()
		return false
	}
	f.waits[nonce] = ch
	f.lmu.Unlock()
	defer func() {
		f.lmu.Lock()
		delete(f.waits, nonce)
		f.lmu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	if _, err := s.db.Exec(ctx, notifySQL, f.syncChannel(), nonce); err != nil {
		return false
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// syncCall makes sure, before a call on u, that this instance has heard
// the other instances' commits of u made before the call (caughtUp); only
// while u is followed live (otherwise its reads ask the PDS anyway). When
// it cannot (the database slow or down), the call takes u's repository to
// have moved up to now: its reads ask the PDS once, and a write is planned
// on the head the PDS gives, rather than on a followed head another
// instance's write may have left behind.
func (s *Server) syncCall(ctx context.Context, u *user) {
	s.mu.Lock()
	f := s.follow
	s.mu.Unlock()
	if f == nil || u.repo == nil || !u.repo.Live() {
		return
	}
	if !s.caughtUp(ctx, f) && ctx.Err() == nil {
		s.syncMissed.Add(1)
		u.repo.Moved(syntax.NewTIDNow(0).String())
	}
}

// hubOf is the hub u is followed through (nil: none; tests).
func (s *Server) hubOf(u *user) *pds.Hub {
	s.mu.Lock()
	f := s.follow
	s.mu.Unlock()
	if f == nil || u.repo == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if fh := f.hubs[u.repo.Client().Host]; fh != nil {
		return fh.hub
	}
	return nil
}

// followState is what the metrics say of following: the users followed,
// the PDS hosts' connections up, of all the hubs.
func (s *Server) followState() (users, up, hubs int) {
	s.mu.Lock()
	f := s.follow
	s.mu.Unlock()
	if f == nil {
		return 0, 0, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, fh := range f.hubs {
		users += fh.hub.Members()
		if fh.hub.Connected() {
			up++
		}
	}
	return users, up, len(f.hubs)
}
