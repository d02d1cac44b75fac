package pds

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// ListPage is listRecords' largest page.
const ListPage = 100

// Attempts bounds how often one batch is sent after ambiguous failures.
const Attempts = 3

// Stats counts requests, for tests and benchmarks.
type Stats struct {
	Heads       atomic.Int64 // getLatestCommit
	CARs        atomic.Int64 // whole-repository getRepo
	Diffs       atomic.Int64 // getRepo?since=rev (revalidations)
	Walks       atomic.Int64 // walks of the whole MST (whole reads, snapshots made)
	CacheLoads  atomic.Int64 // reads of the cache file
	ListPages   atomic.Int64 // listRecords pages
	Writes      atomic.Int64 // applyWrites sent
	Ambiguous   atomic.Int64 // writes whose outcome had to be read back
	RateLimited atomic.Int64 // 429 answers
	Streamed    atomic.Int64 // commits taken in from the commit stream (follow.go)
	StreamGaps  atomic.Int64 // commits of the stream that could not be taken in (read instead)
	WholeWaits  atomic.Int64 // whole reads that waited for the one under way instead
	// StreamTimeouts: waits for a commit known to be on its way on the
	// stream that ran out (StreamWait), the PDS asked instead
	StreamTimeouts atomic.Int64
	Trusted        atomic.Int64 // writes planned without asking (KnownChanges: our own last commit, or the live stream)
	// NotSent: writes not sent because they were sure to be refused for
	// their swapCommit (a newer commit taken in or on its way: behind)
	NotSent atomic.Int64
}

// Repo is one repository on a PDS. Reading works for any repository; Apply
// needs an authenticated client of the repository's owner.
type Repo struct {
	c   *atclient.APIClient
	did syntax.DID

	// Budget is the owner's write budget (nil: unlimited).
	Budget *budget.Ledger
	// StreamWait bounds how long a call waits for a commit known to be on
	// its way on the followed stream before it asks the PDS (0:
	// streamWait).
	StreamWait time.Duration
	// ListOnly makes Snapshot page through listRecords instead of
	// downloading the CAR (the fallback path, selectable for tests).
	ListOnly bool
	// Compression of CAR downloads.
	Compression Compression
	// Limits bound CAR downloads (zero: the defaults).
	Limits Limits
	// Sleep waits (tests replace it).
	Sleep func(ctx context.Context, d time.Duration) error
	Stats Stats

	// Cache is a file that keeps the last read across restarts ("": none).
	Cache string
	// AfterCacheSave, when set, is called after the cache file is written
	// (serve gives back to the system what the save, a whole repository
	// encoded at once, and the read before it used: nothing else makes the
	// collector run once the server is idle).
	AfterCacheSave func()
	// AfterWholeRead, when set, is called once a whole read's repository
	// is kept, before the read returns and its cache file is written: the
	// download and its decoding are garbage by then (serve gives them back
	// to the system at once, so that what it holds after its first read is
	// what it keeps, not the read's peak).
	AfterWholeRead func()
	// Notices, if set, hears what the next tool result must say (a read
	// cache that could not be written); Warn, if set, hears it at once
	// (serve: stderr). Each failure is said once until a write succeeds.
	Notices *store.Notices
	Warn    func(msg string)
	// Directory verifies the commit stream's commits against the account's
	// signing key (Follow); without it they are not taken in, only heard.
	Directory identity.Directory
	// Cursor is a file that keeps the commit stream's position with the
	// cache, so that a restarted Follow replays what it missed ("": none).
	Cursor string
	// StreamHost is where Follow connects ("": the client's host).
	StreamHost string
	// Jetstream, if set, is a Jetstream /subscribe address that Follow
	// listens to instead of the PDS's own stream (jetstream.go).
	Jetstream string

	mu         sync.Mutex
	car        *carRepo        // the repository as last read, kept current (car.go)
	list       *store.Snapshot // the last listRecords read (when there is no car)
	head       string          // the latest commit known: car's, or our own commit on top of it
	headRev    string
	history    []transition // the last moves of head (delta.go)
	pending    int          // how many of them are our own commits not yet in car
	ownAt      time.Time    // when the last of them was made (KnownChanges)
	cacheTried bool
	// cacheLoading is closed when the load of the cache file under way
	// (cacheTried) has ended
	cacheLoading chan struct{}
	cacheFailing bool // the last write of the cache file (or position) failed, and was said
	unsaved      int  // blocks received since the cache was written
	noSince      bool // the PDS answers getRepo?since= with the whole repository
	stream       streamState
	whole        *wholeRead // the whole read under way, which others wait for (car.go)
}

// New returns the repository did served by c's host.
func New(c *atclient.APIClient, did syntax.DID) *Repo {
	return &Repo{c: c, did: did, Sleep: sleep}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// CheckBudget implements store.Budgeted with the repository's ledger
// (Budget; nil: no budget).
func (r *Repo) CheckBudget(_ context.Context, cost int) (int, error) {
	return budget.CheckPlan(r.Budget, cost)
}

// ReservePlan implements store.Budgeted with the repository's ledger.
func (r *Repo) ReservePlan(ctx context.Context, cost int) (context.Context, func(), error) {
	return budget.ReservePlan(ctx, r.Budget, cost)
}

// DID implements store.Repository.
func (r *Repo) DID() syntax.DID { return r.did }

// Client is the XRPC client.
func (r *Repo) Client() *atclient.APIClient { return r.c }

// Head implements store.Repository with com.atproto.sync.getLatestCommit.
func (r *Repo) Head(ctx context.Context) (string, string, error) {
	var out struct {
		CID string `json:"cid"`
		Rev string `json:"rev"`
	}
	r.Stats.Heads.Add(1)
	if err := call(ctx, r.c, http.MethodGet, "com.atproto.sync.getLatestCommit", url.Values{"did": {r.did.String()}}, nil, &out, nil); err != nil {
		return "", "", fmt.Errorf("getLatestCommit: %w", err)
	}
	return out.CID, out.Rev, nil
}

// Snapshot implements store.Repository. After a CAR read it revalidates
// with one getRepo?since=rev, which brings nothing if the repository is
// unchanged and only the new blocks if it changed, applied to the kept MST
// (getLatestCommit first with a PDS that ignores since, and for listRecords
// snapshots); else it reads the whole repository. The records are listed
// (a walk of the whole MST) once per commit read this way, when asked for:
// readers that follow Changes never ask.
func (r *Repo) Snapshot(ctx context.Context) (*store.Snapshot, error) {
	r.loadCache(ctx)
	r.mu.Lock()
	kept, list, noSince := r.car != nil, r.list, r.noSince
	// the commit stream keeps it current (follow.go), unless our own last
	// commits are not in it yet
	live := r.fresh() && r.pending == 0
	r.mu.Unlock()
	// (a kept tree that cannot be listed, errIncomplete, is read again)
	if !r.ListOnly && live {
		if s, err := r.materialise(); err == nil {
			r.noteRead(ctx, true)
			return s, nil
		}
	}
	r.noteRead(ctx, false)
	if !r.ListOnly && kept {
		if noSince {
			head, _, err := r.Head(ctx)
			if err != nil {
				return nil, err
			}
			r.mu.Lock()
			same := head == r.car.commit.String() && head == r.head
			r.mu.Unlock()
			if same {
				if s, err := r.materialise(); err == nil {
					return s, nil
				}
			}
		}
		err := r.advance(ctx)
		if err == nil {
			var s *store.Snapshot
			if s, err = r.materialise(); err == nil {
				return s, nil
			}
		}
		if fatal(ctx, err) {
			return nil, err // a whole read would stall or overflow the same way
		}
		// any other failure: the whole repository
	} else if list != nil {
		head, _, err := r.Head(ctx)
		if err != nil {
			return nil, err
		}
		if head == list.Commit {
			return list, nil
		}
	}
	if !r.ListOnly {
		s, err := r.SnapshotCAR(ctx)
		if !notFound(err) {
			return s, err
		}
	}
	s, err := r.SnapshotList(ctx)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.car == nil {
		r.list = s
	}
	r.mu.Unlock()
	return s, nil
}

func compareRecords(a, b store.Record) int {
	if c := strings.Compare(a.Collection, b.Collection); c != 0 {
		return c
	}
	return strings.Compare(a.RKey, b.RKey)
}

func sortRecords(rs []store.Record) { slices.SortFunc(rs, compareRecords) }

// SnapshotList pages through com.atproto.repo.listRecords for every
// app.bulleted collection, between two reads of the head; if the head moved
// meanwhile it starts again (bounded).
func (r *Repo) SnapshotList(ctx context.Context) (*store.Snapshot, error) {
	for attempt := 0; attempt < 5; attempt++ {
		head, rev, err := r.Head(ctx)
		if err != nil {
			return nil, err
		}
		s := &store.Snapshot{DID: r.did, Commit: head, Rev: rev}
		for _, coll := range lexicon.Collections {
			cursor := ""
			for {
				params := url.Values{"repo": {r.did.String()}, "collection": {coll}, "limit": {fmt.Sprint(ListPage)}}
				if cursor != "" {
					params.Set("cursor", cursor)
				}
				var out struct {
					Cursor  string `json:"cursor"`
					Records []struct {
						URI   string          `json:"uri"`
						CID   string          `json:"cid"`
						Value json.RawMessage `json:"value"`
					} `json:"records"`
				}
				r.Stats.ListPages.Add(1)
				if err := call(ctx, r.c, http.MethodGet, "com.atproto.repo.listRecords", params, nil, &out, nil); err != nil {
					return nil, fmt.Errorf("listRecords %s: %w", coll, err)
				}
				for _, rec := range out.Records {
					u, err := syntax.ParseATURI(rec.URI)
					if err != nil {
						return nil, fmt.Errorf("listRecords: %w", err)
					}
					m, err := atdata.UnmarshalJSON(rec.Value)
					if err != nil {
						return nil, fmt.Errorf("record %s: %w", rec.URI, err)
					}
					v, err := store.ValueOf(m)
					if err != nil {
						return nil, fmt.Errorf("record %s: %w", rec.URI, err)
					}
					s.Records = append(s.Records, store.Record{Collection: coll, RKey: u.RecordKey().String(), CID: rec.CID, Value: v})
				}
				// a cursor comes back even after the last, partial page
				if len(out.Records) < ListPage || out.Cursor == "" {
					break
				}
				cursor = out.Cursor
			}
		}
		again, _, err := r.Head(ctx)
		if err != nil {
			return nil, err
		}
		if again == head {
			sortRecords(s.Records)
			return s, nil
		}
	}
	return nil, fmt.Errorf("%w: the repository kept changing while listing records", store.ErrConflict)
}

// wire structs for com.atproto.repo.applyWrites
type applyWrite struct {
	Type       string         `json:"$type"`
	Collection string         `json:"collection"`
	RKey       string         `json:"rkey"`
	Value      map[string]any `json:"value,omitempty"`
}

type applyInput struct {
	Repo       string       `json:"repo"`
	Writes     []applyWrite `json:"writes"`
	SwapCommit string       `json:"swapCommit,omitempty"`
}

type applyOutput struct {
	Commit struct {
		CID string `json:"cid"`
		Rev string `json:"rev"`
	} `json:"commit"`
	Results []applyResult `json:"results"`
}

// GatesSend implements store.SendGated: Apply waits for the gate its
// context carries once the batch's points are charged, before it sends.
func (r *Repo) GatesSend() {}

// Apply implements store.Repository with one com.atproto.repo.applyWrites.
func (r *Repo) Apply(ctx context.Context, swapCommit string, writes []store.Write) (*store.Result, error) {
	if len(writes) > store.MaxBatch {
		return nil, fmt.Errorf("%w: %d > %d", store.ErrTooManyWrites, len(writes), store.MaxBatch)
	}
	// a write sure to be refused for its swapCommit is not sent (the PDS
	// would count it against the rate limits): the commit it would be
	// refused for was taken in since it was planned, or the followed
	// stream brought it and it is on its way; the caller plans again,
	// and its read waits for that commit (awaitStream)
	r.mu.Lock()
	stale := r.behind(swapCommit)
	r.mu.Unlock()
	if stale {
		r.Stats.NotSent.Add(1)
		r.swapRefused(swapCommit)
		return nil, fmt.Errorf("%w: %w: not sent: the repository has a commit newer than %s (taken in since the write was planned, or on its way on the followed commit stream)", store.ErrConflict, store.ErrStale, swapCommit)
	}
	in := applyInput{Repo: r.did.String(), SwapCommit: swapCommit}
	for _, w := range writes {
		aw := applyWrite{Type: "com.atproto.repo.applyWrites#" + string(w.Op), Collection: w.Collection, RKey: w.RKey}
		if w.Op != store.Delete {
			aw.Value = w.Value
		}
		in.Writes = append(in.Writes, aw)
	}
	cost := store.Cost(writes)
	// the points are reserved: by the operation (its reservation rides on
	// ctx) or here, for this batch alone
	res := budget.ReservationFrom(ctx)
	if r.Budget != nil && res == nil {
		rv, err := r.Budget.Reserve(cost)
		if err != nil {
			return nil, err
		}
		defer rv.Release()
		res = rv
	}
	// and charged before the request leaves (budget.Charge), under the
	// batch's key: given back only when the batch is known not to have
	// landed, so that no kill, crash or timeout leaves a landed batch
	// uncounted
	key := budget.BatchFrom(ctx)
	if key == "" {
		key = "apply/" + newKey()
	}
	var charge *budget.Charge
	// maybe: a request of this call may have reached the PDS and not been
	// answered, with the head still at swapCommit (it might still land)
	maybe := false
	refund := func() {
		if !maybe {
			charge.Refund()
			charge = nil
		}
	}
	for attempt := 1; ; attempt++ {
		if r.Budget != nil {
			if until := r.Budget.PausedUntil(); !until.IsZero() {
				wait := time.Until(until)
				if wait > budget.MaxWait {
					refund()
					err := r.Budget.Check(cost)
					if err == nil {
						err = (&budget.Exceeded{Cost: cost, Paused: true, Window: "hour"}).At(until, time.Now())
					}
					return nil, err
				}
				if err := r.Sleep(ctx, wait); err != nil {
					refund()
					return nil, err
				}
			}
		}
		if res != nil && charge == nil {
			c, err := res.Charge(key, cost)
			if err != nil {
				return nil, err
			}
			charge = c
		}
		// the caller's record of the batch's operation, written while the
		// points were charged, is written before the batch leaves
		if err := store.SendGate(ctx); err != nil {
			refund()
			return nil, err
		}
		var out applyOutput
		r.Stats.Writes.Add(1)
		err := call(ctx, r.c, http.MethodPost, "com.atproto.repo.applyWrites", nil, in, &out, nil)
		if err == nil {
			r.ownCommit(swapCommit, out.Commit.CID, out.Commit.Rev, writes, out.Results)
			return r.committed(out.Commit.CID, out.Commit.Rev, out.Results)
		}
		if isErrorName(err, http.StatusBadRequest, "InvalidSwap") {
			r.swapRefused(swapCommit)
			// not refunded: the PDS's rate limiter counts a request before
			// its handler refuses it for its swapCommit
			if !maybe {
				return nil, fmt.Errorf("%w: %w: %v", store.ErrConflict, store.ErrStale, err)
			}
			return nil, fmt.Errorf("%w: %v", store.ErrConflict, err)
		}
		var ae *atclient.APIError
		if errors.As(err, &ae) && ae.StatusCode == http.StatusRequestEntityTooLarge {
			refund()
			return nil, fmt.Errorf("%w: %v", store.ErrBatchTooLarge, err)
		}
		var rl *RateLimited
		if errors.As(err, &rl) {
			r.Stats.RateLimited.Add(1)
			// not refunded: the PDS's rate limiter adds a request's
			// points before it refuses it (countedByPDS); sent again
			// after the pause, the batch is charged again, under a key
			// of that attempt
			charge = nil
			key = fmt.Sprintf("%s/after429.%d", key, attempt)
			if r.Budget != nil {
				r.Budget.Pause(rl.Until, rl.Note)
				if attempt < Attempts && time.Until(rl.Until) <= budget.MaxWait {
					continue // the loop sleeps through the pause
				}
			}
			// the server's word on when writes are free again, capped
			ex := (&budget.Exceeded{Cost: cost, Paused: true, Window: "hour", Note: rl.Note}).At(rl.Until, time.Now())
			return nil, fmt.Errorf("%w (%v)", ex, err)
		}
		if !ambiguous(err) {
			if errors.Is(err, context.Canceled) {
				maybe = true // the request may have reached the PDS
			}
			if !countedByPDS(err) {
				refund()
			}
			if errors.As(err, &ae) && ae.StatusCode >= 400 && ae.StatusCode < 500 && ae.StatusCode != http.StatusRequestTimeout {
				return nil, fmt.Errorf("%w: applyWrites: %w", store.ErrRefused, err)
			}
			return nil, fmt.Errorf("applyWrites: %w", err)
		}
		// Unknown whether it committed: look before sending it again.
		r.Stats.Ambiguous.Add(1)
		maybe = true
		got, landed, rerr := r.landed(ctx, swapCommit, writes)
		if rerr != nil {
			return nil, fmt.Errorf("applyWrites failed (%v), and reading the repository back failed: %w", err, rerr)
		}
		if landed {
			return r.committed(got.Commit, got.Rev, nil, got.Results...)
		}
		if got == nil { // head unchanged: nothing landed; was the batch possible at all?
			if perr := r.precondition(ctx, swapCommit, writes); perr != nil {
				return nil, perr
			}
		}
		if got != nil { // the head moved and the writes are not there
			if swapCommit != "" {
				// every request of this call was swapped onto a commit
				// that is gone: none of them can land any more
				maybe = false
				refund()
			}
			return nil, fmt.Errorf("%w: after an ambiguous failure (%v) the repository had moved on", store.ErrConflict, err)
		}
		if attempt >= Attempts {
			return nil, fmt.Errorf("applyWrites failed %d times, nothing was committed: %w", attempt, err)
		}
		if err := r.Sleep(ctx, time.Duration(attempt)*250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// countedByPDS reports whether the reference PDS's rate limiter counted a
// write it refused with err (a 4xx; InvalidSwap is counted too, and kept
// by its own branch). @atproto/xrpc-server checks a request's auth (401),
// its body's size (413) and its input against the lexicon (400, "... at
// $.writes[0].rkey") before the route's rate limiter runs: those are not
// counted. The limiter counts a request before refusing it (429:
// rate-limiter-flexible adds the points, then refuses), and everything the
// handler refuses comes after it: counted.
func countedByPDS(err error) bool {
	var rl *RateLimited
	if errors.As(err, &rl) {
		return true
	}
	var ae *atclient.APIError
	if !errors.As(err, &ae) || ae.StatusCode < 400 || ae.StatusCode >= 500 {
		return false
	}
	switch ae.StatusCode {
	case http.StatusUnauthorized, http.StatusRequestEntityTooLarge:
		return false
	case http.StatusBadRequest:
		return !preHandler(ae.Message)
	}
	return true
}

// preHandler tells a 400 of xrpc-server's input checks (before the rate
// limiter) by its message: the lexicon's "... at $.path", or the body's
// encoding.
func preHandler(msg string) bool {
	for _, m := range []string{" at $.", "A request body", "request encoding", "Request encoding", "Invalid query parameter", "unexpected request body", "invalid xrpc path"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// newKey is a random batch key.
func newKey() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *Repo) committed(commit, rev string, results []applyResult, extra ...store.WriteResult) (*store.Result, error) {
	res := &store.Result{Commit: commit, Rev: rev}
	for _, x := range results {
		res.Results = append(res.Results, store.WriteResult{URI: x.URI, CID: x.CID})
	}
	res.Results = append(res.Results, extra...)
	return res, nil
}

// precondition checks writes against the snapshot at swapCommit: a create
// of an existing record or an update/delete of a missing one (which the
// reference PDS answers with HTTP 500, not a 4xx) will never succeed.
func (r *Repo) precondition(ctx context.Context, swapCommit string, writes []store.Write) error {
	s, err := r.Snapshot(ctx)
	if err != nil || s.Commit != swapCommit {
		return nil // cannot tell; let the retry decide
	}
	have := map[string]bool{}
	for _, rec := range s.Records {
		have[rec.Collection+"/"+rec.RKey] = true
	}
	for _, w := range writes {
		path := w.Collection + "/" + w.RKey
		switch {
		case w.Op == store.Create && have[path]:
			return fmt.Errorf("%w: %s", store.ErrRecordExists, path)
		case w.Op != store.Create && !have[path]:
			return fmt.Errorf("%w: %s", store.ErrRecordMissing, path)
		}
	}
	return nil
}

// landed decides, after an ambiguous failure, whether writes committed.
// It returns (result, true) if they all did; (nil, false) if the head is
// still swapCommit (nothing committed, safe to send again); and
// (non-nil, false) if the head moved without them.
func (r *Repo) landed(ctx context.Context, swapCommit string, writes []store.Write) (*store.Result, bool, error) {
	head, _, err := r.Head(ctx)
	if err != nil {
		return nil, false, err
	}
	if swapCommit != "" && head == swapCommit {
		return nil, false, nil
	}
	s, err := r.Snapshot(ctx)
	if err != nil {
		return nil, false, err
	}
	have := map[string]string{}
	for _, rec := range s.Records {
		have[rec.Collection+"/"+rec.RKey] = rec.CID
	}
	res := &store.Result{Commit: s.Commit, Rev: s.Rev}
	for _, w := range writes {
		path := w.Collection + "/" + w.RKey
		uri := "at://" + r.did.String() + "/" + path
		got, ok := have[path]
		if w.Op == store.Delete {
			if ok {
				return res, false, nil
			}
			res.Results = append(res.Results, store.WriteResult{URI: uri})
			continue
		}
		want, err := RecordCID(w.Value)
		if err != nil {
			return nil, false, err
		}
		if !ok || got != want {
			return res, false, nil
		}
		res.Results = append(res.Results, store.WriteResult{URI: uri, CID: want})
	}
	return res, true, nil
}

// RecordCID is the CID a record value gets in a repository (DAG-CBOR,
// SHA-256).
func RecordCID(v map[string]any) (string, error) { return store.RecordCID(v) }
