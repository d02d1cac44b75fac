package pds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	comatproto "github.com/bluesky-social/indigo/api/atproto"
	atrepo "github.com/bluesky-social/indigo/atproto/repo"
	"github.com/bluesky-social/indigo/events"
	"github.com/gorilla/websocket"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// How the repository is followed without a call (Follow):
//
// The PDS's commit stream (com.atproto.sync.subscribeRepos) is read event
// by event (indigo's events decode them). A commit of this repository that
// follows the kept one (its since is the kept rev, its prevData the kept
// MST root) is verified against the account's signing key (Directory) and
// taken into the kept repository by the same MST difference a
// getRepo?since read makes (diff, follow): the blocks come with the event.
// Anything else of this repository (a commit that does not follow, one too
// big for the stream, one that fails verification, a #sync) is a gap, and
// the kept repository is brought forward by a read, as a call would.
//
// While the stream is live (connected, caught up and settled, every commit
// since taken in, and the connection answering pings within deadAfter),
// reads answer from the kept repository without a request; when it is
// not, they revalidate as without following (see Bounded staleness below). Writes are guarded by swapCommit either
// way, and a write refused for its swapCommit makes the next read ask the
// PDS (a commit the stream did not bring: Jetstream's filter leaves other
// collections out). A write swapped on a commit the stream has gone past
// (taken in since it was planned, or read off the connection and not yet
// taken in: heard) is not sent at all (Apply, behind): it is planned again
// on that commit once it is in. Messages are read off the connection on a
// goroutine of their own and dealt with in order on another; the changed
// callback runs on a third. The stream's position (the sequence number of the last commit taken
// in) is kept with the cache file (Cursor): a restarted Follow asks the PDS
// to replay from there, so what happened while it was down is taken in
// from the stream rather than read; a cursor the PDS no longer reaches
// back to is a gap like any other.

// followLimit bounds one stream message (a commit's blocks are at most
// 2 MB on the network, with headroom).
const followLimit = 4 << 20

// Bounded staleness. The connection is pinged every pingEvery, so that a
// healthy one is never silent (no message, no pong) for long. A read
// answered from the kept repository while the connection has been silent
// for more than quietAfter says how stale it may be (store.NoteCall: the
// call's result carries it); a connection silent for deadAfter is dropped
// (its read deadline), reads ask the PDS from then on (fresh), and Follow
// reconnects and catches up. A half-open connection (no FIN: the peer or a
// middlebox gone) is so noticed within deadAfter, not never.
//
// Caught up. A connection's catch-up (a read, or the replay reaching the
// PDS's head) proves the kept repository current as of the moment it
// asked; a commit made just after that reaches the stream only when the
// PDS hands it over (the reference PDS polls its own log, backing off to
// once a second when idle). Reads therefore keep asking the PDS for
// settleFor after a connection caught up, and a read that asks because the
// follower has not caught up since start says so (the first calls of a
// restarted server: a getRepo?since of what changed, not a whole read).
const (
	pingEvery  = 500 * time.Millisecond
	quietAfter = time.Second
	deadAfter  = 4 * time.Second
	settleFor  = 2 * time.Second
)

// replayWait is how long a replay from the kept cursor may take to reach
// the commit the PDS was at when it began before that is read instead.
const replayWait = 10 * time.Second

// ErrStreamDown wraps the end of a stream connection (Follow reconnects).
var ErrStreamDown = errors.New("the commit stream is down")

// errGap: a commit of the stream that cannot be taken in as it stands.
var errGap = errors.New("a gap in the commit stream")

// streamState is what Follow knows; r.mu guards all but life.
type streamState struct {
	live bool         // connected, caught up, every commit since taken in
	life atomic.Int64 // unix nanoseconds of the connection's last sign of life
	// shared, while the repository is a member of a Hub: the hub's
	// connection's life instead (lifeNanos)
	shared atomic.Pointer[atomic.Int64]
	// elsewhere: a rev another instance said it committed (Moved) that
	// the head known has not reached: reads and writes wait for the
	// stream to bring it, or ask (advance clears it)
	elsewhere string
	// settled: when the connection's catch-up is old enough to trust
	// (settleFor after it; zero: not caught up yet)
	settled time.Time
	// following: Follow runs; started: the first connection's settled
	// time (zero: none caught up yet since Follow started)
	following bool
	started   time.Time
	seq       int64  // the last event's sequence number
	carSeq    int64  // the last event taken into the kept repository (or passed by a read)
	target    string // while replaying: the rev that makes the stream live
	lastGap   string // why the last commit of the stream was not taken in (tests)
	// cursorTried: the kept position was used (by the first connection)
	cursorTried bool
	// swapped: a write was refused because the PDS's head is not the one
	// known (a commit the stream did not bring, as Jetstream's filter
	// leaves out other collections' commits): reads ask the PDS until one
	// has (advance, keep)
	swapped bool
	// refused: the commit the refused write was swapped onto (swapped)
	refused string
	// incoming: commits of this repository the stream delivered that are
	// being taken in (verified, diffed), or read off the connection newer
	// than the head known and waiting their turn (news): on their way to
	// the kept head
	incoming int
	// news: commits of this repository read off the connection with a rev
	// newer than the head known then, not yet dealt with (counted in
	// incoming too); heardRev: the newest of their revs (Apply sends no
	// write swapped on the head known while one is on its way: behind)
	news     int
	heardRev string
	// lastHeard: the rev of the last commit of this repository read off
	// the connection (tests)
	lastHeard string
	// foreignAt: when another writer's commit was last taken in, or a
	// write refused for one (WriteChanges asks first for OthersQuiet)
	foreignAt time.Time
	// foreignCommit: the commit that last set foreignAt (by follow),
	// foreignBefore what foreignAt was before it (ownCommit takes it back
	// when that commit turns out to be ours)
	foreignCommit string
	foreignBefore time.Time
	// moved is closed (and dropped) when the kept head moves or a
	// delivered commit was dealt with: awaitStream's waiters look again
	moved chan struct{}
	// drop, tests: events (by sequence number) to lose
	drop func(seq int64) bool
	// dealing, tests: called with each commit of this repository about to
	// be taken in, whether it was news when read off the connection
	// (heard), and whether reads wait for it (incoming)
	dealing func(rev string, heard, waited bool)
}

// fresh reports whether reads may answer from the kept repository without
// asking the PDS. r.mu is held.
func (r *Repo) fresh() bool {
	now := time.Now()
	return r.stream.live && !r.stream.swapped && r.car != nil && !r.stream.settled.IsZero() && !now.Before(r.stream.settled) &&
		now.Sub(time.Unix(0, r.lifeNanos())) < deadAfter && r.stream.elsewhere <= r.headRev
}

// lifeNanos is the unix nanoseconds of the followed connection's last
// sign of life (a Hub's, while the repository is its member).
func (r *Repo) lifeNanos() int64 {
	if p := r.stream.shared.Load(); p != nil {
		return p.Load()
	}
	return r.stream.life.Load()
}

// Moved tells the repository that its owner's repository has a commit of
// rev (another instance of a hosted service made it, and said so): until
// the head known reaches it, reads wait briefly for the stream to bring
// it and then ask the PDS, and a write swapped on the head known is not
// sent (behind). A rev not newer than the head known changes nothing.
func (r *Repo) Moved(rev string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.car == nil || rev <= r.headRev {
		return
	}
	r.stream.elsewhere = max(r.stream.elsewhere, rev)
}

// goLive makes the stream live (caught up); the connection's first time
// starts its settling. r.mu is held.
func (r *Repo) goLive() {
	r.stream.live, r.stream.target = true, ""
	if r.stream.settled.IsZero() {
		r.stream.settled = time.Now().Add(settleFor)
		if r.stream.started.IsZero() {
			r.stream.started = r.stream.settled
		}
	}
}

// catchingUp reports whether Follow runs and has not caught up (settled)
// since it started: reads ask the PDS, and say why. r.mu is held.
func (r *Repo) catchingUp() bool {
	return r.stream.following && (r.stream.started.IsZero() || time.Now().Before(r.stream.started))
}

// noteRead says, in the result of the call of ctx (store.NoteCall), what a
// read could not vouch for: answered from the kept repository (live) while
// the stream has been silent for more than quietAfter, how stale it may
// be; answered by asking the PDS because the follower is still catching
// up after start, why.
func (r *Repo) noteRead(ctx context.Context, live bool) {
	if live {
		quiet := time.Since(time.Unix(0, r.lifeNanos()))
		if quiet > quietAfter {
			store.NoteCall(ctx, "stream", fmt.Sprintf("This read answered from the followed commit stream, which has been silent for %.1f s: commits others made in the last %.1f s may be missing (a connection silent for %s is dropped and reads ask the PDS).",
				quiet.Seconds(), quiet.Seconds(), deadAfter))
		}
		return
	}
	r.mu.Lock()
	catching := r.catchingUp()
	r.mu.Unlock()
	if catching {
		store.NoteCall(ctx, "stream", "This read asked the PDS: the commit stream followed since start has not caught up yet (a commit made just before or after start may not have reached it); reads answer from it without a request once it has.")
	}
}

// Live reports whether reads answer from the followed stream.
func (r *Repo) Live() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fresh()
}

// swapRefused notes that a write swapped on swap was refused: the PDS has
// a commit the head known has not, so the next read waits for the stream
// to bring it (awaitStream) or asks the PDS.
func (r *Repo) swapRefused(swap string) {
	r.mu.Lock()
	r.stream.swapped, r.stream.refused = true, swap
	r.stream.foreignAt = time.Now()
	r.mu.Unlock()
}

// OthersQuiet is how long after another writer's commit was seen (taken
// in from the stream, or a write refused for it) a write asks the PDS's
// head before it is planned (WriteChanges): while the person edits in
// their app, a write planned on the followed head alone would often be
// refused (the stream brings a commit moments after it was made), and the
// refused request counts against the rate limits.
const OthersQuiet = 30 * time.Second

// WriteChanges implements store.WriteKnown: KnownChanges while nobody else
// wrote within OthersQuiet (or the stream is not live); otherwise it asks
// the PDS's head (getLatestCommit) and, if the head known is behind it,
// waits for the stream to bring it (at most streamWait): the write is then
// planned on what the PDS has. ok false: the caller reads (Changes).
func (r *Repo) WriteChanges(ctx context.Context, since string) (string, string, []store.Record, bool, bool, error) {
	r.mu.Lock()
	busy := r.fresh() && time.Since(r.stream.foreignAt) < OthersQuiet
	r.mu.Unlock()
	if !busy {
		c, rev, ch, ok := r.KnownChanges(since)
		return c, rev, ch, ok, ok, nil
	}
	head, _, err := r.Head(ctx)
	if err != nil {
		return "", "", nil, false, false, err
	}
	timer := time.NewTimer(r.streamWait())
	defer timer.Stop()
	for {
		r.mu.Lock()
		// at the PDS's head, or past it: the stream brought commits made
		// after it was asked (a busy repository); the write is swapped
		// onto the newest known
		at, live := (r.head == head || r.chain(head) != nil) && r.stream.incoming == 0, r.fresh()
		cur := r.head
		var ch chan struct{}
		if !at && live {
			if r.stream.moved == nil {
				r.stream.moved = make(chan struct{})
			}
			ch = r.stream.moved
		}
		r.mu.Unlock()
		if at {
			c, rev, changes, ok, same := r.composed(since, cur)
			return c, rev, changes, ok && same, false, nil
		}
		if !live {
			return "", "", nil, false, false, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			r.Stats.StreamTimeouts.Add(1)
			return "", "", nil, false, false, nil
		case <-ctx.Done():
			return "", "", nil, false, false, ctx.Err()
		}
	}
}

// wake tells awaitStream's waiters to look again. r.mu is held.
func (r *Repo) wake() {
	if r.stream.moved != nil {
		close(r.stream.moved)
		r.stream.moved = nil
	}
}

// streamWait bounds how long a read waits for a commit known to be on its
// way on the stream (awaitStream) before it asks the PDS.
const streamWait = 500 * time.Millisecond

func (r *Repo) streamWait() time.Duration {
	if r.StreamWait > 0 {
		return r.StreamWait
	}
	return streamWait
}

// awaitStream waits, while the stream is connected, for the commits known
// to be on their way to reach the kept head: those it delivered that are
// being taken in, and, after a write was refused for its swapCommit, the
// commit the PDS had that the head known had not (the stream brings it
// moments after it was made). It reports whether reads may then answer
// from the kept repository (fresh), having waited at most streamWait.
func (r *Repo) awaitStream(ctx context.Context) bool {
	timer := time.NewTimer(r.streamWait())
	defer timer.Stop()
	for {
		r.mu.Lock()
		if !r.stream.live || r.car == nil {
			r.mu.Unlock()
			return false
		}
		if r.stream.swapped && r.head != r.stream.refused && r.stream.incoming == 0 {
			r.stream.swapped = false // the stream brought the commit it was refused for
		}
		if r.stream.incoming == 0 && !r.stream.swapped && r.stream.elsewhere <= r.headRev {
			ok := r.fresh()
			r.mu.Unlock()
			return ok
		}
		if r.stream.moved == nil {
			r.stream.moved = make(chan struct{})
		}
		ch := r.stream.moved
		r.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			r.Stats.StreamTimeouts.Add(1)
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// notLive makes reads ask the PDS again.
func (r *Repo) notLive() {
	r.mu.Lock()
	r.stream.live = false
	r.mu.Unlock()
}

// liveIn makes the stream live unless ctx (its connection's) ended: a read
// that comes back after the connection ended must not make it live.
func (r *Repo) liveIn(ctx context.Context) {
	r.mu.Lock()
	if ctx.Err() == nil {
		r.goLive()
		r.stream.carSeq = max(r.stream.carSeq, r.stream.seq)
	}
	r.mu.Unlock()
}

// readLive brings the kept repository forward by a read, reads asking the
// PDS meanwhile, and then makes the stream live (unless ctx ended).
func (r *Repo) readLive(ctx context.Context) error {
	r.notLive()
	if _, err := r.Snapshot(ctx); err != nil {
		return err
	}
	r.liveIn(ctx)
	return nil
}

// account takes in an #account event of this repository: inactive, reads
// ask the PDS (which says what is wrong); active again while not live,
// what the stream may not have brought meanwhile is read.
func (r *Repo) account(ctx context.Context, active bool, errs func(error)) {
	if !active {
		r.notLive()
	} else if !r.Live() {
		r.resync(ctx, errs)
	}
}

// Follow keeps the repository current from the PDS's commit stream until
// ctx ends, calling changed after each commit of this repository it took
// in or read, and after each (re)connection: on a goroutine of its own,
// one call at a time, the calls asked for while one runs made once after
// it (so a slow callback, such as serve's bringing the tree forward, does
// not keep the next commits from being taken in, and its reads wait for
// those on their way as any other's do). It reconnects with backoff
// (1 s to 1 min); each connection has a handshake timeout, a read limit,
// a ping every pingEvery and a read deadline deadAfter after its last sign
// of life. errs, if set, hears each connection's end
// (wrapped ErrStreamDown) and each commit that could not be taken in.
func (r *Repo) Follow(ctx context.Context, changed func(), errs func(error)) {
	if errs == nil {
		errs = func(error) {}
	}
	host := r.StreamHost
	if host == "" {
		host = r.c.Host
	}
	u, err := subscribeURL(host)
	if r.Jetstream != "" {
		u, err = jetstreamURL(r.Jetstream, r.did)
	}
	if err != nil {
		errs(err)
		return
	}
	defer r.finalSave()
	kick, calls, call := make(chan struct{}, 1), make(chan struct{}), changed
	go func() {
		defer close(calls)
		for {
			select {
			case <-ctx.Done():
				return
			case <-kick:
				call()
			}
		}
	}()
	defer func() { <-calls }() // Follow returns once ctx ended
	changed = func() {
		select {
		case kick <- struct{}{}:
		default: // one is asked for already
		}
	}
	r.mu.Lock()
	r.stream.following, r.stream.started = true, time.Time{}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.stream.following = false
		r.mu.Unlock()
	}()
	backoff := time.Second
	for ctx.Err() == nil {
		start := time.Now()
		var err error
		if r.Jetstream != "" {
			err = r.jetstreamOnce(ctx, u, changed, errs)
		} else {
			err = r.followOnce(ctx, u, changed, errs)
		}
		if ctx.Err() != nil {
			return
		}
		errs(fmt.Errorf("%w: %v", ErrStreamDown, err))
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

func (r *Repo) followOnce(ctx context.Context, u string, changed func(), errs func(error)) error {
	r.loadCache(ctx)
	cursor := r.loadCursor(u, errs)
	addr := u
	if cursor > 0 {
		addr += "?cursor=" + strconv.FormatInt(cursor, 10)
	}
	did := r.did.String()
	return r.listen(ctx, addr, cursor > 0, changed, errs, func(mt int, rd io.Reader) (func(), error) {
		if mt != websocket.BinaryMessage {
			return nil, fmt.Errorf("the stream sent a non-binary message")
		}
		var ev events.XRPCStreamEvent
		if err := ev.Deserialize(rd); err != nil {
			return nil, fmt.Errorf("reading the stream: %w", err)
		}
		if ev.Error != nil {
			return nil, fmt.Errorf("the stream ended: %s: %s", ev.Error.Error, ev.Error.Message)
		}
		var h heardFrame
		if e := ev.RepoCommit; e != nil && e.Repo == did {
			r.mu.Lock()
			drop := r.stream.drop
			r.mu.Unlock()
			h.decided = true
			if h.dropped = drop != nil && drop(e.Seq); !h.dropped {
				h.counted = r.heard(e.Rev)
			}
		}
		return func() { r.dealWith(ctx, &ev, h, changed, errs) }, nil
	})
}

// listen connects to the stream at addr, catches up (catchUp), and hands
// each message to handle until the connection or handle fails. The
// connection has a handshake timeout, a read limit, a ping every pingEvery
// and a read deadline that each message and pong moves on; the stream is
// not live once it returns.
func (r *Repo) listen(ctx context.Context, addr string, replaying bool, changed func(), errs func(error), handle func(mt int, rd io.Reader) (func(), error)) error {
	con, err := dialStream(ctx, addr)
	if err != nil {
		return err
	}
	// not live once it returns, the connection's context ended first
	// (liveIn)
	defer r.notLive()
	r.mu.Lock()
	r.stream.settled = time.Time{} // this connection's catch-up settles anew
	r.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer con.Close()
	alive := keepAlive(ctx, con, &r.stream.life)
	if err := r.catchUp(ctx, replaying, errs); err != nil {
		return err
	}
	changed() // whatever happened while not connected
	// Messages are read off the connection as they come (handle decodes
	// them; a commit of this repository newer than the head known is then
	// known to be on its way: heard) and dealt with in order here, so that
	// a commit being taken in does not keep the next one from being known.
	// At most stepQueue wait their turn; the reader waits beyond that.
	steps := make(chan func(), stepQueue)
	var rerr error
	go func() {
		defer close(steps)
		for {
			mt, rd, err := con.NextReader()
			if err == nil {
				alive()
				var step func()
				if step, err = handle(mt, rd); err == nil {
					if step == nil {
						continue
					}
					select {
					case steps <- step:
						continue
					case <-ctx.Done():
						err = ctx.Err()
					}
				}
			}
			r.notLive() // reads ask the PDS from now (the queued are still taken in)
			rerr = err
			return
		}
	}()
	for step := range steps {
		if ctx.Err() == nil {
			step()
		}
	}
	r.forgetHeard()
	return rerr
}

// stepQueue bounds how many messages read off the connection wait to be
// dealt with (a commit's blocks are at most followLimit).
const stepQueue = 16

// heard notes a commit of this repository (rev) read off the connection,
// before it is dealt with: newer than the head known, it is on its way
// (incoming, news), and reads and writes wait for it. It reports whether
// it was counted so (the step that deals with it then says so: heardFrame).
func (r *Repo) heard(rev string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stream.lastHeard = max(r.stream.lastHeard, rev)
	if r.known(rev) || r.car == nil {
		return false
	}
	r.stream.incoming++
	r.stream.news++
	r.stream.heardRev = max(r.stream.heardRev, rev)
	return true
}

// known reports whether a commit of rev is no news to reads: the head
// known is at it or past it (our own commit, known from its write's
// answer), with blocks kept. r.mu is held.
func (r *Repo) known(rev string) bool {
	return r.car != nil && rev <= r.headRev
}

// dealtWith ends the wait for a commit counted by heard (taken in, or read
// after a gap, or lost). r.mu is held.
func (r *Repo) dealtWith() {
	r.stream.incoming--
	r.stream.news--
	if r.stream.news == 0 {
		r.stream.heardRev = ""
	}
	r.wake()
}

// forgetHeard drops the counts of commits heard on a connection that
// ended before they were dealt with (the next connection catches up).
func (r *Repo) forgetHeard() {
	r.mu.Lock()
	r.stream.incoming -= r.stream.news
	r.stream.news, r.stream.heardRev = 0, ""
	r.wake()
	r.mu.Unlock()
}

// behind reports whether a write swapped on swap is sure to be refused
// for it, so that Apply need not send it: the head known moved past swap
// since the write was planned (a commit taken in or read), or the stream
// brought a commit newer than the head known that is still on its way
// (heard: revs only grow, so the PDS's head is not swap). r.mu is held.
func (r *Repo) behind(swap string) bool {
	if swap == "" || r.car == nil {
		return false
	}
	if swap == r.head {
		return r.stream.news > 0 && r.stream.heardRev > r.headRev || r.stream.elsewhere > r.headRev
	}
	return len(r.chain(swap)) > 0
}

// catchUp makes the kept repository current at the start of a connection:
// by a read, or (replaying from a cursor) by the replay, which makes the
// stream live once it reaches the commit the PDS is at now.
func (r *Repo) catchUp(ctx context.Context, replaying bool, errs func(error)) error {
	if replaying {
		head, rev, err := r.Head(ctx)
		if err != nil {
			return err
		}
		r.mu.Lock()
		if r.car != nil && r.car.commit.String() == head {
			r.goLive()
		} else {
			r.stream.target = rev
		}
		r.mu.Unlock()
		// a replay that does not get there (the PDS kept less than it
		// said, or sent nothing) is read instead
		time.AfterFunc(replayWait, func() {
			r.mu.Lock()
			stuck := r.stream.target != ""
			r.mu.Unlock()
			if stuck && ctx.Err() == nil {
				r.Stats.StreamGaps.Add(1)
				errs(fmt.Errorf("the replay from the kept position did not reach the PDS's commit within %s: read instead", replayWait))
				r.resync(ctx, errs)
			}
		})
		return nil
	}
	return r.readLive(ctx)
}

// heardFrame is what was decided about a commit of this repository as it
// was read off the connection: whether it is lost (the tests' drop) and
// whether it was counted as on its way (heard).
type heardFrame struct {
	decided, dropped, counted bool
}

// event takes in one event of the stream.
func (r *Repo) event(ctx context.Context, ev *events.XRPCStreamEvent, changed func(), errs func(error)) {
	r.dealWith(ctx, ev, heardFrame{}, changed, errs)
}

// dealWith takes in one event of the stream, h being what was decided
// about it as it was read.
func (r *Repo) dealWith(ctx context.Context, ev *events.XRPCStreamEvent, h heardFrame, changed func(), errs func(error)) {
	did := r.did.String()
	var drop func(int64) bool
	seen := func(seq int64) {
		r.mu.Lock()
		r.stream.seq = max(r.stream.seq, seq)
		drop = r.stream.drop
		r.mu.Unlock()
	}
	switch {
	case ev.RepoCommit != nil:
		e := ev.RepoCommit
		seen(e.Seq)
		if e.Repo != did {
			return
		}
		if !h.decided {
			h.dropped = drop != nil && drop(e.Seq)
		}
		if h.dropped {
			return
		}
		// on its way to the kept head: reads wait for it (awaitStream),
		// until it is taken in (or read after a gap). Counted as it was
		// read off the connection, if it was newer than the head known
		// then (heard). One the head known has already (our own commit,
		// known from its write's answer, arriving again) keeps nobody
		// waiting: reads compose the head known without it, and taking
		// its blocks in only brings the kept blocks up to it.
		r.mu.Lock()
		count := !h.counted && !r.known(e.Rev)
		if count {
			r.stream.incoming++
		}
		dealing := r.stream.dealing
		r.mu.Unlock()
		if dealing != nil {
			dealing(e.Rev, h.counted, count || h.counted)
		}
		arrived := func() {
			r.mu.Lock()
			if h.counted {
				r.dealtWith()
			} else if count {
				r.stream.incoming--
				r.wake()
			}
			r.mu.Unlock()
		}
		if err := r.takeIn(ctx, e); err != nil {
			r.Stats.StreamGaps.Add(1)
			r.mu.Lock()
			r.stream.lastGap = err.Error()
			r.mu.Unlock()
			if !errors.Is(err, errGap) {
				errs(err)
			}
			r.resync(ctx, errs)
		}
		arrived()
		changed()
	case ev.RepoSync != nil:
		seen(ev.RepoSync.Seq)
		if ev.RepoSync.Did == did {
			if r.Directory != nil {
				if _, err := atrepo.VerifySyncMessage(ctx, r.Directory, ev.RepoSync); err != nil {
					errs(fmt.Errorf("a #sync of the stream failed verification against the account's key: %w (read from the PDS instead)", err))
				}
			}
			r.Stats.StreamGaps.Add(1)
			r.mu.Lock()
			r.stream.lastGap = "a #sync event for the account: read instead"
			r.mu.Unlock()
			r.resync(ctx, errs)
			changed()
		}
	case ev.RepoIdentity != nil:
		seen(ev.RepoIdentity.Seq)
		if ev.RepoIdentity.Did == did {
			if r.Directory != nil {
				_ = r.Directory.Purge(ctx, r.did.AtIdentifier()) // the signing key may have changed
			}
			changed()
		}
	case ev.RepoAccount != nil:
		seen(ev.RepoAccount.Seq)
		if ev.RepoAccount.Did == did {
			r.account(ctx, ev.RepoAccount.Active, errs)
			changed()
		}
	case ev.RepoInfo != nil:
		if ev.RepoInfo.Name == "OutdatedCursor" {
			errs(fmt.Errorf("the PDS no longer keeps the stream from the kept cursor: what it cannot replay is read instead"))
		}
	}
}

// takeIn takes commit e of this repository into the kept repository.
func (r *Repo) takeIn(ctx context.Context, e *comatproto.SyncSubscribeRepos_Commit) error {
	if e.TooBig {
		return fmt.Errorf("%w: commit %s is too big for the stream", errGap, e.Rev)
	}
	r.mu.Lock()
	c := r.car
	var rev, data string
	if c != nil {
		rev, data = c.rev, c.data()
	}
	r.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%w: nothing is kept yet", errGap)
	}
	if e.Rev <= rev {
		// already in: a read went past it (past the replay's target too,
		// if it was reached so: the commits after come next)
		r.mu.Lock()
		if r.stream.target != "" && r.car == c && c.rev >= r.stream.target {
			r.goLive()
		}
		r.mu.Unlock()
		return nil
	}
	if e.Since == nil || *e.Since != rev || e.PrevData != nil && data != "" && e.PrevData.String() != data {
		return fmt.Errorf("%w: commit %s does not follow the kept %s", errGap, e.Rev, rev)
	}
	// our own commit (the PDS answered our write with its CID; its blocks
	// are checked against it below) costs no signature check
	r.mu.Lock()
	own := false
	for _, t := range r.history[len(r.history)-r.pending:] {
		own = own || t.to == e.Commit.String()
	}
	r.mu.Unlock()
	if !own {
		if r.Directory == nil {
			return fmt.Errorf("%w: no identity directory to verify commits with", errGap)
		}
		if err := atrepo.VerifyCommitSignature(ctx, r.Directory, e); err != nil {
			return fmt.Errorf("commit %s of the stream failed verification against the account's key: %w (read from the PDS instead)", e.Rev, err)
		}
	}
	f, err := readBlocks(ctx, bytes.NewReader(e.Blocks), 1, true)
	if err != nil {
		return fmt.Errorf("commit %s of the stream: %w", e.Rev, err)
	}
	if f.root.String() != e.Commit.String() {
		return fmt.Errorf("commit %s of the stream: its blocks are of commit %s", e.Commit, f.root)
	}
	r.mu.Lock()
	if r.car != c || c.rev != rev {
		r.mu.Unlock()
		return fmt.Errorf("%w: the kept repository moved meanwhile", errGap)
	}
	st, err := c.diff(f, r.did)
	if err == nil && st.rev != e.Rev {
		err = fmt.Errorf("commit %s of the stream carries rev %s", e.Rev, st.rev)
	}
	if err != nil {
		r.mu.Unlock()
		if errors.Is(err, errIncomplete) {
			return fmt.Errorf("%w: %v", errGap, err)
		}
		return fmt.Errorf("commit %s of the stream: %w", e.Rev, err)
	}
	r.follow(st)
	r.stream.carSeq = e.Seq
	if r.stream.target != "" && st.rev >= r.stream.target {
		r.goLive()
	}
	r.mu.Unlock()
	r.Stats.Streamed.Add(1)
	r.saveCache(f.received, false)
	return nil
}

// resync brings the kept repository forward by a read after a gap.
func (r *Repo) resync(ctx context.Context, errs func(error)) {
	if err := r.readLive(ctx); err != nil && ctx.Err() == nil {
		errs(fmt.Errorf("reading after a gap in the commit stream: %w", err))
	}
}

// data is the MST root of the kept commit ("" if it cannot be read).
// Repo.mu is held.
func (c *carRepo) data() string {
	blk, ok := c.blocks[c.commit.KeyString()]
	if !ok {
		return ""
	}
	var commit atrepo.Commit
	if err := commit.UnmarshalCBOR(bytes.NewReader(blk.RawData())); err != nil {
		return ""
	}
	return commit.Data.String()
}

// cursorFile is the Cursor file: the stream's position after the commit of
// the cache file it was written with.
type cursorFile struct {
	Stream string `json:"stream"`
	Seq    int64  `json:"seq"`
	Commit string `json:"commit"`
}

// loadCursor is the position to replay the stream u from: the kept one if
// it belongs to the kept repository (0: none; the connection then catches
// up by a read). A cursor that cannot be used is said.
func (r *Repo) loadCursor(u string, errs func(error)) int64 {
	if r.Cursor == "" {
		return 0
	}
	raw, err := os.ReadFile(r.Cursor)
	r.mu.Lock()
	commit := ""
	if r.car != nil {
		commit = r.car.commit.String()
	}
	tried := r.stream.cursorTried
	r.stream.cursorTried = true
	r.mu.Unlock()
	if tried {
		return 0 // a reconnection catches up by a read (the kept position may be what failed)
	}
	if errors.Is(err, os.ErrNotExist) {
		if _, cerr := os.Stat(r.Cache); cerr == nil && commit != "" {
			errs(fmt.Errorf("the commit stream's position (%s) is missing beside the cache: caught up by a read instead", r.Cursor))
		}
		return 0
	}
	var cf cursorFile
	if err == nil {
		err = json.Unmarshal(raw, &cf)
	}
	switch {
	case err != nil:
		errs(fmt.Errorf("the commit stream's position (%s) cannot be read (%v): caught up by a read instead", r.Cursor, err))
		return 0
	case cf.Stream != u || commit == "" || cf.Commit != commit || cf.Seq <= 0:
		errs(fmt.Errorf("the commit stream's position (%s) is not that of the kept repository: caught up by a read instead", r.Cursor))
		return 0
	}
	return cf.Seq
}

// saveCursor writes the stream's position seq after commit (with the cache
// file of that commit). A failed write costs the next start a read, no
// more (the caller says it).
func (r *Repo) saveCursor(seq int64, commit string) error {
	if r.Cursor == "" || seq <= 0 || r.Jetstream != "" {
		return nil // (Jetstream's position is a time, kept in memory only)
	}
	host := r.StreamHost
	if host == "" {
		host = r.c.Host
	}
	u, err := subscribeURL(host)
	if err != nil {
		return nil // not following this host
	}
	raw, _ := json.Marshal(cursorFile{Stream: u, Seq: seq, Commit: commit})
	if err := atomicfile.Write(r.Cursor, raw, 0o600); err != nil {
		return fmt.Errorf("the commit stream's position: %w", err)
	}
	return nil
}

// finalSave writes the cache (and so the cursor) when Follow ends with
// commits taken in since the last save, so that a restart replays little.
func (r *Repo) finalSave() {
	r.mu.Lock()
	due := r.unsaved > 0 && r.car != nil
	r.mu.Unlock()
	if due {
		r.saveCache(0, true)
	}
}

// dialStream opens a stream connection (a 10 s handshake); its error
// names the address without its query (a cursor, filters).
func dialStream(ctx context.Context, addr string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second, Proxy: http.ProxyFromEnvironment}
	con, resp, err := d.DialContext(ctx, addr, http.Header{"User-Agent": []string{"bulleted-mcp"}})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if i := strings.IndexByte(addr, '?'); i >= 0 {
			addr = addr[:i]
		}
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	return con, nil
}

// keepAlive bounds a stream connection (its messages to followLimit) and
// keeps it alive: a ping every pingEvery, and the connection closed (which
// unblocks its reader) when ctx ends, a ping fails, or nothing (no
// message, no pong) came for deadAfter. alive, called on each message
// read, stores the time in life.
func keepAlive(ctx context.Context, con *websocket.Conn, life *atomic.Int64) (alive func()) {
	con.SetReadLimit(followLimit)
	alive = func() {
		life.Store(time.Now().UnixNano())
		_ = con.SetReadDeadline(time.Now().Add(deadAfter))
	}
	alive()
	con.SetPongHandler(func(string) error { alive(); return nil })
	go func() {
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				con.Close() // unblocks the reader
				return
			case <-t.C:
				if err := con.WriteControl(websocket.PingMessage, nil, time.Now().Add(pingEvery)); err != nil {
					con.Close()
					return
				}
			}
		}
	}()
	return alive
}

// subscribeURL is the PDS's commit stream as a websocket URL.
func subscribeURL(host string) (string, error) {
	u, err := websocketURL("PDS", host, false)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/xrpc/com.atproto.sync.subscribeRepos"
	return u.String(), nil
}

// websocketURL parses addr (what: whose address, for the error) as
// http(s), or also ws(s) if ws, and gives it the websocket scheme.
func websocketURL(what, addr string, ws bool) (*url.URL, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("following: the %s address %q: %w", what, addr, err)
	}
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	case "ws", "wss":
		if ws {
			break
		}
		fallthrough
	default:
		return nil, fmt.Errorf("following: the %s address %q is not http(s)%s", what, addr, map[bool]string{true: " or ws(s)"}[ws])
	}
	return u, nil
}
