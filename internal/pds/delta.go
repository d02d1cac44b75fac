package pds

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// How the repository is followed commit by commit (store.Deltas):
//
// The kept repository (carRepo, at commit K) is brought forward by
// getRepo?since=K's rev and the MST difference of the blocks that come
// (advance). Our own commits are known without reading anything: Apply
// records each one it made on top of the latest commit known (swapCommit =
// that commit) with its writes' values and the CIDs the PDS returned, so
// the latest commit known (head) can be ahead of K by a few of our own
// commits (pending). A read then costs one getLatestCommit: if the PDS is
// still at head, what changed is in the history. When it moved on, advance
// reads the blocks since K, and what changed since head is composed from
// the difference K → new commit and our commits K → head.
//
// history is the chain of the last moves of head, each with the
// app.bulleted records it changed (Changes answers from it for any commit
// on the chain, so a reader that fell behind catches up); the last pending
// of them are our own commits on top of K.

// History is how many moves of the head a Repo remembers for Changes.
const History = 256

// maxPending is how many of our own commits head may be ahead of the kept
// repository before a read brings the kept repository forward (which keeps
// the cache file and the difference to read bounded).
const maxPending = 64

// transition is one move of the head.
type transition struct {
	from, to, rev string
	changes       []store.Record // Value nil: deleted
	// fromRev is from's rev; before is each change's record at from
	// (Value nil: absent), for History (history.go)
	fromRev string
	before  []store.Record
}

// keep makes c the kept repository, read whole: the history starts again.
// r.mu is held.
func (r *Repo) keep(c *carRepo) {
	r.car, r.list = c, nil
	r.head, r.headRev = c.commit.String(), c.rev
	r.history, r.pending = nil, 0
	r.stream.swapped = false
	r.wake()
}

// push appends t to the history (which starts again if t does not follow
// its last move). r.mu is held.
func (r *Repo) push(t transition) {
	if n := len(r.history); n > 0 && r.history[n-1].to != t.from {
		r.history = r.history[:0]
		r.pending = 0
	}
	if len(r.history) >= History {
		r.history = slices.Delete(r.history, 0, len(r.history)-History+1)
	}
	t.fromRev = r.headRev
	r.history = append(r.history, t)
	r.head, r.headRev = t.to, t.rev
	r.wake()
}

// Changes implements store.Deltas. One request tells whether anything
// changed: getLatestCommit while our own last commits are not yet in the
// kept repository (nothing more is needed if the PDS is still at the last
// of them), otherwise getRepo?since=rev, whose blocks, if any, are the
// difference. ok is false when since is not a commit of the history, when
// the repository is read by listRecords, and when the difference could not
// be completed (the snapshot the caller reads instead reads it whole).
func (r *Repo) Changes(ctx context.Context, since string) (string, string, []store.Record, bool, error) {
	if r.ListOnly {
		return "", "", nil, false, nil
	}
	r.loadCache(ctx)
	r.mu.Lock()
	known := r.car != nil && r.chain(since) != nil
	pending, noSince, live := r.pending, r.noSince, r.fresh()
	onItsWay := r.stream.live && (r.stream.incoming > 0 || r.stream.swapped || r.stream.elsewhere > r.headRev)
	r.mu.Unlock()
	if !known {
		return "", "", nil, false, nil
	}
	if onItsWay {
		// a commit is known to be on its way on the stream (delivered and
		// being taken in, or the one a write was just refused for): wait
		// for it, briefly, rather than ask (the follower's changed
		// callback too: it runs beside the follower, not in its way)
		live = r.awaitStream(ctx)
	}
	if live {
		// the commit stream keeps the kept repository current (follow.go)
		c, rev, ch, ok, _ := r.composed(since, "")
		r.noteRead(ctx, true)
		return c, rev, ch, ok, nil
	}
	r.noteRead(ctx, false)
	if pending > 0 && pending < maxPending || noSince {
		head, _, err := r.Head(ctx)
		if err != nil {
			return "", "", nil, false, err
		}
		if c, rev, ch, ok, same := r.composed(since, head); same {
			return c, rev, ch, ok, nil
		}
	}
	if err := r.advance(ctx); err != nil {
		if fatal(ctx, err) {
			return "", "", nil, false, err
		}
		return "", "", nil, false, nil
	}
	c, rev, ch, ok, _ := r.composed(since, "")
	return c, rev, ch, ok, nil
}

// TrustOwn is how long after our own last commit a write may be planned on
// it without asking the PDS whether anyone else wrote since
// (KnownChanges): the write is swapped onto it, so if someone did, it is
// refused, nothing is written, and it is planned again after a read. A
// series of writes by one agent saves a request each; a write that meets
// another writer's commit costs one refused request more.
const TrustOwn = 30 * time.Second

// KnownChanges implements store.Known: Changes without a request, while
// the commit stream is live or when the head known is our own last commit,
// made within TrustOwn, with nothing since that says the PDS moved on (a
// write refused for its swapCommit). A read that raced the write, a
// foreign commit taken in, or a whole read ends the trust (pending is 0).
func (r *Repo) KnownChanges(since string) (string, string, []store.Record, bool) {
	if r.ListOnly {
		return "", "", nil, false
	}
	r.mu.Lock()
	// not while a commit the stream delivered is being taken in: the
	// caller then reads (Changes), which waits for it
	trusted := r.car != nil && r.stream.incoming == 0 && (r.fresh() ||
		r.pending > 0 && r.pending < maxPending && !r.stream.swapped && time.Since(r.ownAt) < TrustOwn)
	r.mu.Unlock()
	if !trusted {
		return "", "", nil, false
	}
	c, rev, ch, ok, _ := r.composed(since, "")
	if ok {
		r.Stats.Trusted.Add(1)
	}
	return c, rev, ch, ok
}

// composed is what changed from since to the head known, if the head known
// is want (or want is ""): same reports that.
func (r *Repo) composed(since, want string) (commit, rev string, changes []store.Record, ok, same bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if want != "" && want != r.head {
		return "", "", nil, false, false
	}
	chain := r.chain(since)
	if chain == nil {
		return "", "", nil, false, true
	}
	return r.head, r.headRev, compose(chain), true, true
}

// chain is the moves from since to the head (empty, not nil, if since is
// the head; nil if since is not on the history). r.mu is held.
func (r *Repo) chain(since string) []transition {
	if since == "" {
		return nil
	}
	if since == r.head {
		return []transition{}
	}
	i := len(r.history) - 1
	if i < 0 || r.history[i].to != r.head {
		return nil
	}
	for ; i >= 0; i-- {
		if r.history[i].from == since {
			return r.history[i:]
		}
		if i > 0 && r.history[i-1].to != r.history[i].from {
			return nil
		}
	}
	return nil
}

// compose is the changes of moves, each record once (its last change), in
// the order of those last changes.
func compose(moves []transition) []store.Record {
	n := 0
	for _, t := range moves {
		n += len(t.changes)
	}
	if len(moves) == 1 {
		return slices.Clone(moves[0].changes)
	}
	last := make(map[string]int, n)
	i := 0
	for _, t := range moves {
		for _, c := range t.changes {
			last[c.Collection+"/"+c.RKey] = i
			i++
		}
	}
	out := make([]store.Record, 0, len(last))
	i = 0
	for _, t := range moves {
		for _, c := range t.changes {
			if last[c.Collection+"/"+c.RKey] == i {
				out = append(out, c)
			}
			i++
		}
	}
	return out
}

// fatal reports whether a failed incremental read would fail the same way
// if the whole repository were read instead.
func fatal(ctx context.Context, err error) bool {
	var rl *RateLimited
	return ctx.Err() != nil || errors.As(err, &rl) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrTooLarge)
}

// advance brings the kept repository to the PDS's current commit with one
// getRepo?since=rev (the whole CAR from a PDS that ignores since), applying
// the MST difference of the blocks that came. No lock is held while they
// are read; if the kept repository moved meanwhile, it reads again.
func (r *Repo) advance(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		r.mu.Lock()
		base := r.car
		from, rev, size, noSince := base.commit, base.rev, base.blockCount(), r.noSince
		said := r.stream.elsewhere // another instance's commit said before the PDS is asked
		r.mu.Unlock()
		since := rev
		if noSince {
			since = ""
		}
		f, err := r.fetch(ctx, since, true)
		if err != nil {
			return err
		}
		r.mu.Lock()
		if r.car != base || base.commit != from {
			r.mu.Unlock()
			if attempt < 3 {
				continue
			}
			return nil // others keep bringing it forward
		}
		if r.stream.elsewhere == said {
			// the PDS was asked after that commit was said: its answer holds
			// it (one said while the answer was on its way may be newer)
			r.stream.elsewhere = ""
		}
		if f.root == from {
			r.stream.swapped = false // the PDS was asked (follow.go)
			if since != "" && f.received > size/2 {
				r.noSince = true // the whole repository again: this PDS ignores since
			}
			r.mu.Unlock()
			return nil
		}
		st, err := base.diff(f, r.did)
		if err != nil {
			r.mu.Unlock()
			return err
		}
		r.follow(st)
		r.stream.swapped = false
		r.mu.Unlock()
		r.saveCache(f.received, false)
		return nil
	}
}

// follow applies st to the kept repository and records the move of the
// head it makes. r.mu is held.
func (r *Repo) follow(st *step) {
	c := r.car
	to := st.commit.String()
	own := r.history[len(r.history)-r.pending:]
	for i, t := range own {
		if t.to == to { // one of our own commits (a read that raced a write)
			c.apply(st)
			r.pending = len(own) - i - 1
			return
		}
	}
	var changes []store.Record
	if r.pending == 0 {
		changes = st.records(c)
	} else {
		changes = st.after(c, own)
	}
	before := r.atHead(changes) // history.go
	c.apply(st)
	r.push(transition{from: r.head, to: to, rev: st.rev, changes: changes, before: before})
	r.pending = 0
	// another writer's commit, as far as is known: a read (or the stream)
	// can bring our own commit before its write has returned
	// (ownCommit then takes this back)
	r.stream.foreignBefore, r.stream.foreignAt, r.stream.foreignCommit = r.stream.foreignAt, time.Now(), to
}

// after is what changed from the head (our own commits own on top of c) to
// st's commit: a key st changed differs from its value at the head, or a
// key our commits changed that st did not touch went back to its value in
// c. c is not modified yet.
func (st *step) after(c *carRepo, own []transition) []store.Record {
	atHead := map[string]store.Record{}
	for _, t := range own {
		for _, ch := range t.changes {
			atHead[ch.Collection+"/"+ch.RKey] = ch
		}
	}
	var out []store.Record
	touched := make(map[string]bool, len(st.changes))
	for _, ch := range st.changes {
		touched[ch.key] = true
		was := ""
		if ch.old.Defined() {
			was = ch.old.String()
		}
		if h, ok := atHead[ch.key]; ok {
			was = h.CID
		}
		now := ""
		if ch.new.Defined() {
			now = ch.new.String()
		}
		if was != now {
			out = append(out, st.record(c, ch.key, ch.new))
		}
	}
	for key, h := range atHead {
		if touched[key] {
			continue
		}
		v, val, err := c.lookup([]byte(key))
		if err != nil {
			// every node reachable from the root is kept (carRepo): a
			// kept node that does not decode is this program's fault
			panic(fmt.Sprintf("pds: looking up %s in the kept repository: %v", key, err))
		}
		kept := ""
		if v.Defined() {
			kept = v.String()
		}
		if h.CID != kept {
			coll, rkey, _ := strings.Cut(key, "/")
			r := store.Record{Collection: coll, RKey: rkey}
			if v.Defined() {
				r.CID, r.Value = kept, val
			}
			out = append(out, r)
		}
	}
	slices.SortFunc(out, store.CompareRecords)
	return out
}

// applyResult is one write's result from applyWrites.
type applyResult struct {
	URI string `json:"uri"`
	CID string `json:"cid"`
}

// ownCommit records a commit Apply made on top of swap: if swap is the
// head known, the commit is the new head, and its writes (their values as
// a read of the commit would decode them, checked against the CIDs the PDS
// returned) are what changed. Anything that does not add up leaves the
// head where it is: the next read then finds out by reading the blocks.
func (r *Repo) ownCommit(swap, commit, rev string, writes []store.Write, results []applyResult) {
	// a commit of ours that is not recorded ends the trust in the head
	// known (KnownChanges): it is not the PDS's any more
	untrust := func() {
		r.mu.Lock()
		r.ownAt = time.Time{}
		r.mu.Unlock()
	}
	if swap == "" || commit == "" || len(results) != len(writes) {
		untrust()
		return
	}
	changes := make([]store.Record, 0, len(writes))
	for i, w := range writes {
		if !strings.HasPrefix(w.Collection, store.Prefix) {
			continue
		}
		rec := store.Record{Collection: w.Collection, RKey: w.RKey}
		if w.Op != store.Delete {
			v, err := store.ValueOf(w.Value) // as a read of the commit keeps it
			if err != nil || v.CID() != results[i].CID {
				untrust()
				return
			}
			rec.CID, rec.Value = results[i].CID, v
		}
		changes = append(changes, rec)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stream.foreignCommit == commit {
		// taken in before its write returned: ours, not another writer's
		r.stream.foreignAt, r.stream.foreignCommit = r.stream.foreignBefore, ""
	}
	if r.car == nil || r.head != swap || r.pending >= maxPending {
		r.ownAt = time.Time{}
		return
	}
	r.push(transition{from: swap, to: commit, rev: rev, changes: changes, before: r.atHead(changes)})
	r.pending++
	r.ownAt = time.Now()
}

// materialise is the snapshot of the kept repository.
func (r *Repo) materialise() (*store.Snapshot, error) {
	r.mu.Lock()
	s, made, err := r.car.snapshot(r.did)
	r.mu.Unlock()
	if made {
		r.Stats.Walks.Add(1)
	}
	return s, err
}

// notFound reports whether getRepo is not served (listRecords instead).
func notFound(err error) bool {
	var ae *atclient.APIError
	return errors.As(err, &ae) && (ae.StatusCode == 404 || ae.StatusCode == 501)
}
