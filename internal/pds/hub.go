package pds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluesky-social/indigo/events"
	"github.com/gorilla/websocket"
)

// How many repositories of one PDS host are followed at once (Hub):
//
// A PDS's subscribeRepos carries the commits of every repository it
// hosts, so one connection serves all the repositories of that host a
// process holds: a Hub reads it, and hands each commit (and #sync,
// #identity, #account) of a member to that member, to be verified and
// taken in exactly as Follow does (dealWith: the same verification
// against the signing key, the same takeIn, heard and behind); the
// commits of repositories nobody holds are dropped as soon as their DID is
// read, before their blocks are parsed or their signature checked. A
// repository joins (Join) and leaves without a connection of its own.
//
// Each member's messages are dealt with in order on a goroutine that runs
// only while it has some (none for an idle member), so a slow member does
// not hold up the others; a member that falls more than hubQueue messages
// behind drops them and is read instead (a gap, as any other). The
// connection's life (pings, deadAfter) is the members' life; when it ends
// every member stops being live (reads ask the PDS again), and at the
// next connection each member catches up on its own, one getLatestCommit
// (getRepo?since only if it moved), at most hubCatchUps at once, and is
// live again settleFor after that, as with Follow.

// hubQueue bounds the messages one member has waiting.
const hubQueue = 64

// hubCatchUps bounds the members catching up at once after a connection.
const hubCatchUps = 8

// NewHub returns the hub of the PDS at host (Run follows it).
func NewHub(host string) *Hub {
	h := &Hub{Host: host, members: map[string]*hubMember{}, sem: make(chan struct{}, hubCatchUps)}
	h.idle = sync.NewCond(&h.drainMu)
	return h
}

// Hub follows one PDS host's commit stream for many repositories (NewHub).
type Hub struct {
	// Host is the PDS (http(s)://host).
	Host string
	// Errs, if set, hears each connection's end (wrapped ErrStreamDown)
	// and each member's commit that could not be taken in.
	Errs func(error)

	life atomic.Int64
	// Dispatched counts messages handed to members; Ignored those of
	// repositories no member holds (tests, metrics).
	Dispatched, Ignored atomic.Int64
	// Connections counts the connections made.
	Connections atomic.Int64

	mu      sync.Mutex
	members map[string]*hubMember // by DID
	conn    context.Context       // the connection's (nil: not connected)
	sem     chan struct{}
	// drains: members' queues being worked through (drain), which Run
	// waits for before it returns, so that nothing of a member (a commit
	// taken in, its read cache written) runs after it
	drainMu sync.Mutex // not mu: Join enqueues holding mu
	drains  int
	idle    *sync.Cond // on drainMu: drains reached 0
}

// hubMember is one repository followed through a Hub.
type hubMember struct {
	h       *Hub
	r       *Repo
	ctx     context.Context // ended when it leaves
	cancel  context.CancelFunc
	changed func() // coalesced (kick)

	mu      sync.Mutex
	queue   []hubStep
	running bool
	// calling, again: the changed callback runs, and is asked for again
	calling, again bool
	user           func()
}

type hubStep struct {
	conn    context.Context // the connection it came from (skipped once ended), nil: always run
	counted bool            // heard counted it (dealtWith if dropped)
	run     func()
}

func (h *Hub) errs(err error) {
	if h.Errs != nil {
		h.Errs(err)
	}
}

// Join makes r followed through the hub until leave is called (or ctx
// ends): changed is called after each commit of r taken in or read and
// after each catch-up, one call at a time, on a goroutine of its own,
// calls asked for while one runs made once after it (as Follow's).
func (h *Hub) Join(ctx context.Context, r *Repo, changed func()) (leave func()) {
	mctx, cancel := context.WithCancel(ctx)
	m := &hubMember{h: h, r: r, ctx: mctx, cancel: cancel, user: changed}
	m.changed = m.kick
	did := r.did.String()
	h.mu.Lock()
	if old := h.members[did]; old != nil {
		// first: stopping it (the same repository joined again, or an
		// older one of that DID) clears what its repository follows by
		old.stop()
	}
	r.stream.shared.Store(&h.life)
	r.mu.Lock()
	r.stream.following, r.stream.started, r.stream.live = true, time.Time{}, false
	r.mu.Unlock()
	h.members[did] = m
	if conn := h.conn; conn != nil {
		// (under h.mu: before any message of r the reader hands it)
		m.enqueue(hubStep{conn: conn, run: func() { h.catchUp(conn, m) }})
	}
	h.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			current := h.members[did] == m
			if current {
				delete(h.members, did)
			}
			h.mu.Unlock()
			if current {
				m.stop() // (a member replaced by a later Join was stopped then; stopping it again would end its successor's following)
			}
		})
	}
}

// Connected reports whether the hub's connection is up.
func (h *Hub) Connected() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn != nil
}

// Members is how many repositories the hub follows.
func (h *Hub) Members() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.members)
}

// stop ends the member: its queued messages are dropped, it is not live.
func (m *hubMember) stop() {
	m.cancel()
	m.mu.Lock()
	dropped := m.queue
	m.queue = nil
	m.mu.Unlock()
	m.uncount(dropped)
	r := m.r
	r.mu.Lock()
	r.stream.live, r.stream.following = false, false
	r.mu.Unlock()
	r.stream.shared.Store(nil)
}

// uncount ends the waits for dropped messages counted as on their way.
func (m *hubMember) uncount(dropped []hubStep) {
	r := m.r
	r.mu.Lock()
	for _, s := range dropped {
		if s.counted {
			r.dealtWith()
		}
	}
	r.mu.Unlock()
}

// kick asks for the changed callback (coalesced).
func (m *hubMember) kick() {
	m.mu.Lock()
	if m.calling {
		m.again = true
		m.mu.Unlock()
		return
	}
	m.calling = true
	m.mu.Unlock()
	go func() {
		for {
			if m.ctx.Err() == nil {
				m.user()
			}
			m.mu.Lock()
			if !m.again {
				m.calling = false
				m.mu.Unlock()
				return
			}
			m.again = false
			m.mu.Unlock()
		}
	}()
}

// enqueue adds a step to the member's queue (its goroutine started if it
// has none); past hubQueue the waiting messages are dropped and the
// member is read instead.
func (m *hubMember) enqueue(s hubStep) {
	m.mu.Lock()
	if m.ctx.Err() != nil {
		m.mu.Unlock()
		m.uncount([]hubStep{s})
		return
	}
	var dropped []hubStep
	if len(m.queue) >= hubQueue && s.conn != nil {
		// too far behind: what waits is dropped, and read instead
		dropped = append(m.queue, s)
		conn := s.conn
		m.queue = []hubStep{{conn: conn, run: func() {
			m.r.Stats.StreamGaps.Add(1)
			m.h.catchUp(conn, m)
		}}}
	} else {
		m.queue = append(m.queue, s)
	}
	start := !m.running
	m.running = true
	m.mu.Unlock()
	if dropped != nil {
		m.uncount(dropped)
	}
	if start {
		m.h.drainMu.Lock()
		m.h.drains++
		m.h.drainMu.Unlock()
		go func() {
			defer func() {
				m.h.drainMu.Lock()
				if m.h.drains--; m.h.drains == 0 {
					m.h.idle.Broadcast()
				}
				m.h.drainMu.Unlock()
			}()
			m.drain()
		}()
	}
}

func (m *hubMember) drain() {
	for {
		m.mu.Lock()
		if len(m.queue) == 0 || m.ctx.Err() != nil {
			m.running = false
			m.mu.Unlock()
			return
		}
		s := m.queue[0]
		m.queue = m.queue[1:]
		m.mu.Unlock()
		if s.conn == nil || s.conn.Err() == nil {
			s.run()
		} else {
			m.uncount([]hubStep{s})
		}
	}
}

// catchUp makes m's kept repository current at the start of connection
// conn (or of its membership): one getLatestCommit, and a read only if
// the repository moved; live once done (unless conn ended meanwhile). A
// catch-up that fails (the PDS slow, a 5xx) is said and tried again, after
// 1 s, then twice as long each time up to a minute, for as long as conn
// and the membership last: until then the member's reads ask the PDS.
func (h *Hub) catchUp(conn context.Context, m *hubMember) {
	wait := catchUpRetry
	for {
		err := h.catchUpOnce(conn, m)
		if err == nil || conn.Err() != nil || m.ctx.Err() != nil {
			return
		}
		h.errs(fmt.Errorf("%s: catching up on the commit stream: %w (reads ask the PDS; tried again in %v)", m.r.did, err, wait))
		select {
		case <-conn.Done():
			return
		case <-m.ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// catchUpRetry is the first wait before a failed catch-up is tried again
// (a variable for tests).
var catchUpRetry = time.Second

// catchUpOnce is one attempt of catchUp (nil: done, or conn or the
// membership ended).
func (h *Hub) catchUpOnce(conn context.Context, m *hubMember) error {
	select {
	case h.sem <- struct{}{}:
		defer func() { <-h.sem }()
	case <-conn.Done():
		return nil
	case <-m.ctx.Done():
		return nil
	}
	r := m.r
	r.mu.Lock()
	r.stream.live, r.stream.settled = false, time.Time{} // this catch-up settles anew
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(conn)
	stop := context.AfterFunc(m.ctx, cancel)
	defer stop()
	defer cancel()
	r.loadCache(ctx)
	r.mu.Lock()
	kept := ""
	if r.car != nil {
		kept = r.car.commit.String()
	}
	r.mu.Unlock()
	var err error
	if kept != "" {
		var head string
		if head, _, err = r.Head(ctx); err == nil && head != kept {
			err = r.advance(ctx)
		}
	} else {
		_, err = r.Snapshot(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	r.liveIn(ctx)
	m.changed()
	return nil
}

// Run follows the host's stream until ctx ends, reconnecting with backoff
// (1 s to 1 min).
func (h *Hub) Run(ctx context.Context) {
	defer func() {
		// the members' steps under way end with the connection's
		// context: wait for them
		h.drainMu.Lock()
		for h.drains > 0 {
			h.idle.Wait()
		}
		h.drainMu.Unlock()
	}()
	u, err := subscribeURL(h.Host)
	if err != nil {
		h.errs(err)
		return
	}
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		err := h.once(ctx, u)
		if ctx.Err() != nil {
			return
		}
		h.errs(fmt.Errorf("%w: %v", ErrStreamDown, err))
		if time.Since(start) > time.Minute {
			backoff = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Minute)
	}
}

// once is one connection: every member catches up, then each message is
// handed to the member whose repository it is.
func (h *Hub) once(ctx context.Context, addr string) error {
	con, err := dialStream(ctx, addr)
	if err != nil {
		return err
	}
	h.Connections.Add(1)
	conn, cancel := context.WithCancel(ctx)
	defer cancel()
	defer con.Close()
	alive := keepAlive(conn, con, &h.life)
	h.mu.Lock()
	h.conn = conn
	members := make([]*hubMember, 0, len(h.members))
	for _, m := range h.members {
		members = append(members, m)
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.conn = nil
		members := make([]*hubMember, 0, len(h.members))
		for _, m := range h.members {
			members = append(members, m)
		}
		h.mu.Unlock()
		cancel()
		for _, m := range members {
			m.r.notLive() // reads ask the PDS (the next connection catches up)
		}
	}()
	for _, m := range members {
		m.enqueue(hubStep{conn: conn, run: func() { h.catchUp(conn, m) }})
	}
	for {
		mt, rd, err := con.NextReader()
		if err != nil {
			return err
		}
		alive()
		if mt != websocket.BinaryMessage {
			return fmt.Errorf("the stream sent a non-binary message")
		}
		var ev events.XRPCStreamEvent
		if err := ev.Deserialize(rd); err != nil {
			return fmt.Errorf("reading the stream: %w", err)
		}
		if ev.Error != nil {
			return fmt.Errorf("the stream ended: %s: %s", ev.Error.Error, ev.Error.Message)
		}
		did := ""
		switch {
		case ev.RepoCommit != nil:
			did = ev.RepoCommit.Repo
		case ev.RepoSync != nil:
			did = ev.RepoSync.Did
		case ev.RepoIdentity != nil:
			did = ev.RepoIdentity.Did
		case ev.RepoAccount != nil:
			did = ev.RepoAccount.Did
		}
		h.mu.Lock()
		m := h.members[did]
		h.mu.Unlock()
		if m == nil {
			h.Ignored.Add(1)
			continue
		}
		h.Dispatched.Add(1)
		r := m.r
		var hf heardFrame
		if e := ev.RepoCommit; e != nil {
			r.mu.Lock()
			drop := r.stream.drop
			r.mu.Unlock()
			hf.decided = true
			if hf.dropped = drop != nil && drop(e.Seq); !hf.dropped {
				hf.counted = r.heard(e.Rev)
			}
		}
		errs := func(err error) { h.errs(fmt.Errorf("%s: %w", did, err)) }
		m.enqueue(hubStep{conn: conn, counted: hf.counted, run: func() { r.dealWith(conn, &ev, hf, m.changed, errs) }})
	}
}
