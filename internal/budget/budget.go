package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// The write limits of the reference PDS (@atproto/pds dist/rate-limits.js,
// "repo-write-hour" and "repo-write-day", keyed by the account's DID; the
// points per write come from applyWrites.js: create 3, update 2, delete 1).
const (
	Limit    = 5000      // points per rolling Window
	Window   = time.Hour // the hourly window
	DayLimit = 35000     // points per rolling Day
	Day      = 24 * time.Hour
	// MaxWait is the longest a write waits for a server pause before it
	// is refused instead.
	MaxWait = 15 * time.Second
	// ReservationTTL is how long a reservation made on another machine
	// holds its points without being settled: a reservation of a process on
	// this machine holds while the process runs, and is given back as soon
	// as it is gone (killed mid-operation).
	ReservationTTL = 15 * time.Minute
)

// ErrBudget means the points are not available now.
var ErrBudget = errors.New("write budget exceeded")

// Exceeded is the error of a plan that does not fit. It wraps ErrBudget.
type Exceeded struct {
	Cost   int       `json:"cost"`             // points the plan needs
	Left   int       `json:"left"`             // points left now in the binding window
	FreeAt time.Time `json:"freeAt,omitzero"`  // when Cost points will be free (zero: never, Cost > the limit)
	Paused bool      `json:"paused,omitempty"` // the server asked us to wait (429)
	Window string    `json:"window"`           // "hour" or "day": the limit that binds
	Limit  int       `json:"limit,omitempty"`  // that window's limit (0: the default Limit or DayLimit)
	// WaitSeconds is how long from when the refusal was made until FreeAt
	// (rounded up; 0 with a zero FreeAt or one already passed).
	WaitSeconds int64 `json:"waitSeconds,omitempty"`
	// Note says what was guessed or capped about a server's pause (a
	// Retry-After beyond what its limit can mean, without a
	// RateLimit-Policy naming the limit).
	Note string `json:"note,omitempty"`
}

// At sets FreeAt and WaitSeconds as seen at now; it returns e.
func (e *Exceeded) At(freeAt, now time.Time) *Exceeded {
	e.FreeAt = freeAt
	e.WaitSeconds = 0
	if !freeAt.IsZero() && freeAt.After(now) {
		e.WaitSeconds = int64((freeAt.Sub(now) + time.Second - 1) / time.Second)
	}
	return e
}

// When is FreeAt as text: an absolute UTC time and the seconds from when the
// refusal was made ("2026-12-04T13:00:00Z, in 3600 s").
func (e *Exceeded) When() string {
	if e.FreeAt.IsZero() {
		return ""
	}
	wait := e.WaitSeconds
	if wait == 0 && e.FreeAt.After(time.Now()) { // made without At
		wait = int64((time.Until(e.FreeAt) + time.Second - 1) / time.Second)
	}
	return fmt.Sprintf("%s, in %d s", e.FreeAt.UTC().Format(time.RFC3339), wait)
}

func (e *Exceeded) Error() string {
	when := "never: split it into smaller operations"
	if !e.FreeAt.IsZero() {
		when = "at " + e.When()
	}
	if e.Paused {
		msg := fmt.Sprintf("the server asked to pause writes; %d point(s) can be spent %s", e.Cost, when)
		if e.Note != "" {
			msg += " (" + e.Note + ")"
		}
		return msg
	}
	limit := e.Limit
	switch {
	case limit > 0:
	case e.Window == "day":
		limit = DayLimit
	default:
		limit = Limit
	}
	return fmt.Sprintf("this needs %d point(s), %d of %d are left in the rolling %s; enough will be free %s", e.Cost, e.Left, limit, e.Window, when)
}

func (e *Exceeded) Unwrap() error { return ErrBudget }

type entry struct {
	At     time.Time `json:"at"`
	Points int       `json:"points"`
	// Key names the batch the points paid for (Charge): charged once,
	// however often the batch is sent.
	Key string `json:"key,omitempty"`
	// Res is the reservation the charge came out of (given back to it on
	// Refund).
	Res string `json:"res,omitempty"`
	// Open: charged under Key by a reservation that was neither released
	// nor adopted since: its process stopped (killed) before it knew
	// whether the batch landed. GiveBack gives such a charge back.
	Open bool `json:"open,omitempty"`
}

type held struct {
	ID      string    `json:"id"`
	Points  int       `json:"points"`
	Expires time.Time `json:"expires"`
	PID     int       `json:"pid,omitempty"`
	Host    string    `json:"host,omitempty"`
}

// live reports whether a reservation still holds: while the process that
// made it runs (when it is on this machine), else until it expires. One
// spent to nothing is kept while it lives (it holds no points): its
// charges are then known to belong to a process that is still deciding
// their fate (GiveBack leaves them alone).
func (h held) live(now time.Time, host string) bool {
	if h.Points <= 0 && (h.PID <= 0 || h.Host != host) {
		return false
	}
	if h.PID > 0 && h.Host == host {
		return processAlive(h.PID)
	}
	return h.Expires.After(now)
}

// Ledger is the rolling record of spent and reserved points of one
// account. It is safe for concurrent use, and, kept in a file, shared by
// the processes that use the file: every call catches up with what the
// others appended, under a lock (flock on path+".lock"), and every change
// is appended before the lock is released, so that any number of processes
// on one account never spend more than Limit in any rolling hour nor
// DayLimit in any rolling day. The file and its format: ledgerfile.go.
type Ledger struct {
	// Now is the clock (tests inject one).
	Now func() time.Time
	// Limit per Window and DayLimit per Day (defaults Limit, DayLimit).
	Limit, DayLimit int

	mu   sync.Mutex
	path string
	pid  int // the process reservations are held by (tests fake a dead one)
	host string
	// lastSettle is the time the last Settle recorded (tests).
	lastSettle time.Time
	s          state
	lf         ledgerFile
}

// New returns a ledger kept in path ("" = memory only), loading what an
// earlier process spent.
func New(path string) (*Ledger, error) {
	host, _ := os.Hostname()
	l := &Ledger{Now: time.Now, Limit: Limit, DayLimit: DayLimit, path: path, pid: os.Getpid(), host: host}
	l.s.reset()
	if path == "" {
		return l, nil
	}
	if err := l.catchUp(); err != nil {
		return nil, err
	}
	return l, nil
}

// shared runs fn (caller holds mu) with the file's lock held, after
// catching up with what any process appended; the records fn returns (only
// exclusive calls return any) are appended to the file, fsynced when one
// of them spends points, then applied. fn's error is returned after its
// records are kept (Settle records a batch that landed past its budget).
func (l *Ledger) shared(exclusive bool, fn func(now time.Time) ([]rec, error)) error {
	if l.path == "" {
		now := l.Now()
		l.prune(now)
		recs, err := fn(now)
		for _, r := range recs {
			l.s.apply(r)
		}
		return err
	}
	if err := l.openLock(); err != nil {
		return err
	}
	if err := atomicfile.Lock(l.lf.lock, exclusive); err != nil {
		return err
	}
	defer atomicfile.Unlock(l.lf.lock)
	if err := l.catchUp(); err != nil {
		return err
	}
	now := l.Now()
	l.prune(now)
	recs, ferr := fn(now)
	if len(recs) == 0 {
		return ferr
	}
	if !exclusive {
		return errors.New("budget: a change under a shared lock")
	}
	if err := l.append(recs, now); err != nil {
		return err
	}
	return ferr
}

// prune drops spent points older than a day and reservations that no
// longer hold, and ends a pause that is over.
func (l *Ledger) prune(now time.Time) {
	l.s.advance(now)
	for id, h := range l.s.res {
		if !h.live(now, l.host) {
			delete(l.s.res, id)
		}
	}
	if !now.Before(l.s.paused) {
		l.s.paused = time.Time{}
		l.s.pauseNote, l.s.pauseLong = "", false
	}
}

// used is the points spent within window before now, plus every live
// reservation (after prune(now)).
func (l *Ledger) used(now time.Time, window time.Duration) int {
	n := l.s.spentSince(now, window)
	for _, r := range l.s.res {
		n += r.Points
	}
	return n
}

// fits refuses cost if it does not fit in the hour or the day now.
func (l *Ledger) fits(now time.Time, cost int) error {
	for _, w := range []struct {
		name   string
		window time.Duration
		limit  int
	}{{"hour", Window, l.Limit}, {"day", Day, l.DayLimit}} {
		left := w.limit - l.used(now, w.window)
		if cost > left {
			ex := &Exceeded{Cost: cost, Left: max(0, left), Window: w.name, Limit: w.limit}
			return ex.At(l.freeAt(now, cost), now)
		}
	}
	return nil
}

// freeAt is when cost points fit in both windows, counting on spent points
// leaving their windows (reservations are assumed settled by then). Only
// refusals ask, so it may walk the window.
func (l *Ledger) freeAt(now time.Time, cost int) time.Time {
	if cost > l.Limit || cost > l.DayLimit {
		return time.Time{}
	}
	at := now
	for _, w := range []struct {
		window time.Duration
		limit  int
	}{{Window, l.Limit}, {Day, l.DayLimit}} {
		left := w.limit - l.used(now, w.window)
		t := now
		for _, e := range l.s.spent {
			if left >= cost {
				break
			}
			if !e.At.After(now.Add(-w.window)) {
				continue
			}
			left += e.Points
			t = e.At.Add(w.window)
		}
		if t.After(at) {
			at = t
		}
	}
	if at.Before(l.s.paused) {
		at = l.s.paused
	}
	return at
}

// left is the points left now (caller holds mu, after prune).
func (l *Ledger) left(now time.Time) int {
	return max(0, min(l.Limit-l.used(now, Window), l.DayLimit-l.used(now, Day)))
}

// Left returns the points left now: the smaller of the hour's and the
// day's, reservations counted.
func (l *Ledger) Left() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	left := 0
	err := l.shared(false, func(now time.Time) ([]rec, error) {
		left = l.left(now)
		return nil, nil
	})
	if err != nil {
		now := l.Now() // unreadable: what this process knows
		l.prune(now)
		left = l.left(now)
	}
	return left
}

// Check reports whether cost points could be reserved now, without
// reserving them (dry runs). The error is an *Exceeded.
func (l *Ledger) Check(cost int) error {
	_, err := l.checkLeft(cost)
	return err
}

// checkLeft is Check and Left at once, under one lock.
func (l *Ledger) checkLeft(cost int) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	left := 0
	err := l.shared(false, func(now time.Time) ([]rec, error) {
		left = l.left(now)
		if cost <= 0 {
			return nil, nil
		}
		if l.s.paused.Sub(now) > MaxWait {
			return nil, l.pausedError(now, cost)
		}
		return nil, l.fits(now, cost)
	})
	var ex *Exceeded
	if err != nil && !errors.As(err, &ex) {
		now := l.Now() // unreadable: what this process knows
		l.prune(now)
		left = l.left(now)
	}
	return left, err
}

// pausedError refuses cost during a server pause (caller holds mu).
func (l *Ledger) pausedError(now time.Time, cost int) *Exceeded {
	ex := &Exceeded{Cost: cost, Left: max(0, l.Limit-l.used(now, Window)), Paused: true, Window: "hour", Limit: l.Limit, Note: l.s.pauseNote}
	return ex.At(l.freeAt(now, cost), now)
}

// Reservation holds points for one operation: reserved before its first
// write, settled batch by batch, the rest given back by Release.
type Reservation struct {
	l  *Ledger
	id string
}

// Reserve holds cost points, under the ledger file's exclusive lock, so that
// every process sharing the file counts them as used until they are settled
// or released (or the reservation expires). It refuses with an *Exceeded
// when cost does not fit in the hour or the day, or a server pause lasts
// longer than MaxWait.
func (l *Ledger) Reserve(cost int) (*Reservation, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b [8]byte
	rand.Read(b[:])
	r := &Reservation{l: l, id: hex.EncodeToString(b[:])}
	err := l.shared(true, func(now time.Time) ([]rec, error) {
		if l.s.paused.Sub(now) > MaxWait {
			return nil, l.pausedError(now, cost)
		}
		if err := l.fits(now, cost); err != nil {
			return nil, err
		}
		return []rec{{T: recReserve, ID: r.id, P: cost, Exp: now.Add(ReservationTTL).UnixNano(), PID: l.pid, Host: l.host}}, nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Settle records points of the reservation as spent now (a committed
// batch). Points beyond what is still reserved (the reservation expired,
// or the batch cost more) are spent only if they fit; otherwise they are
// still recorded, since the write happened, and the error says so.
func (r *Reservation) Settle(points int) error {
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared(true, func(now time.Time) ([]rec, error) {
		var over error
		covered := 0
		if h := l.s.res[r.id]; h != nil {
			covered = min(points, h.Points)
		}
		if extra := points - covered; extra > 0 {
			over = l.fits(now, extra)
		}
		l.lastSettle = now
		return []rec{{T: recCharge, At: now.UnixNano(), P: points, Cov: covered, ID: r.id}}, over
	})
}

// Charge records points of the reservation as spent now, durably (the
// record is appended to the ledger file and fsynced before it returns),
// before the batch they pay for is sent: a kill, crash or timeout after
// this can only count too much, never too little. key names the batch: a
// batch already charged under key (an earlier attempt, or a process killed
// while sending it) is not charged again, and Refund leaves that earlier
// charge alone. Points beyond what the reservation still holds must fit in
// the hour and the day, else nothing is recorded and the error is an
// *Exceeded.
func (r *Reservation) Charge(key string, points int) (*Charge, error) {
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &Charge{r: r, key: key, points: points}
	err := l.shared(true, func(now time.Time) ([]rec, error) {
		if e := l.s.charged(key); e != nil {
			// charged already; one left open by a process that stopped
			// (killed) is this reservation's now: used, no longer open
			if e.Open && e.Res != r.id && l.s.res[e.Res] == nil {
				return []rec{{T: recAdopt, K: key, ID: r.id}}, nil
			}
			return nil, nil
		}
		covered := 0
		if h := l.s.res[r.id]; h != nil {
			covered = min(points, h.Points)
		}
		if extra := points - covered; extra > 0 {
			if err := l.fits(now, extra); err != nil {
				return nil, err
			}
		}
		l.lastSettle = now
		c.own = true
		return []rec{{T: recCharge, At: now.UnixNano(), P: points, Cov: covered, K: key, ID: r.id}}, nil
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Charge is a batch's points recorded before it was sent.
type Charge struct {
	r      *Reservation
	key    string
	points int
	own    bool // made by this Charge call (else an earlier one's: never refunded)
}

// Refund gives a charge back to its reservation. Call it only when the
// batch is known not to have landed: refused before it was written, or
// read back absent with the repository moved past the commit it was to be
// swapped onto. A charge made earlier under the same key is not refunded.
func (c *Charge) Refund() error {
	if c == nil || !c.own {
		return nil
	}
	l := c.r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared(true, func(now time.Time) ([]rec, error) {
		c.own = false
		e := l.s.charged(c.key)
		if e == nil || e.Res != c.r.id {
			return nil, nil
		}
		back := 0 // to the reservation, if it still holds
		if l.s.res[c.r.id] != nil {
			back = e.Points
		}
		return []rec{{T: recRefund, K: c.key, ID: c.r.id, Cov: back}}, nil
	})
}

// GiveBack gives back the open charges of operation opID (charged under
// keys "opID/…" by a process that stopped before it knew whether their
// batches landed, neither used by a resume since nor released) except
// those under landed, the keys of its batches that landed. Call it only
// when the operation's other batches are known not to have landed and
// never can: it was undone or forgotten, the repository read past the
// commits they were to be swapped onto. A charge whose reservation still
// holds (its process runs) is left alone. It returns the points given
// back.
func (l *Ledger) GiveBack(opID string, landed []string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	keep := map[string]bool{}
	for _, k := range landed {
		keep[k] = true
	}
	back := 0
	err := l.shared(true, func(now time.Time) ([]rec, error) {
		back = 0
		var recs []rec
		for k := range l.s.keys {
			if !strings.HasPrefix(k, opID+"/") || keep[k] {
				continue
			}
			e := l.s.charged(k)
			if e == nil || !e.Open || l.s.res[e.Res] != nil {
				continue
			}
			back += e.Points
			recs = append(recs, rec{T: recGive, K: k})
		}
		slices.SortFunc(recs, func(a, b rec) int { return strings.Compare(a.K, b.K) })
		return recs, nil
	})
	if err != nil {
		return 0, err
	}
	return back, nil
}

// Charged says what the charge under key holds: its points (0: none
// recorded, or given back) and whether it is open (its process stopped
// before it knew whether the batch landed: a resume uses it, GiveBack
// gives it back).
func (l *Ledger) Charged(key string) (points int, open bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.shared(false, func(time.Time) ([]rec, error) {
		if e := l.s.charged(key); e != nil {
			points, open = e.Points, e.Open && l.s.res[e.Res] == nil
		}
		return nil, nil
	})
	return points, open
}

// OpenAs is New for a ledger whose reservations are held by process pid
// (tests that play a process that was killed: a pid that is not running).
func OpenAs(path string, pid int) (*Ledger, error) {
	l, err := New(path)
	if err != nil {
		return nil, err
	}
	l.pid = pid
	return l, nil
}

// Release gives back what the reservation still holds.
func (r *Reservation) Release() error {
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared(true, func(now time.Time) ([]rec, error) {
		// recorded even when this process no longer counts it (spent
		// to nothing): every process then forgets it alike
		return []rec{{T: recRelease, ID: r.id}}, nil
	})
}

// Remaining is what the reservation still holds.
func (r *Reservation) Remaining() int {
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	_ = l.shared(false, func(time.Time) ([]rec, error) {
		if h := l.s.res[r.id]; h != nil {
			n = h.Points
		}
		return nil, nil
	})
	return n
}

// Spend reserves and settles points at once (a write without an operation's
// reservation); it refuses with an *Exceeded if they do not fit.
func (l *Ledger) Spend(points int) error {
	r, err := l.Reserve(points)
	if err != nil {
		return err
	}
	return r.Settle(points)
}

// capPause bounds a server's pause to what a limit can mean: at most a day
// (the daily window) from now.
func capPause(now, t time.Time) time.Time {
	if t.After(now.Add(Day)) {
		return now.Add(Day)
	}
	return t
}

// Pause stops writes until t (a server's Retry-After), capped at a day:
// the caller caps it at the window of the limit the server named, or at an
// hour when it named none (pds.RateLimited). note (may be "") says what was
// capped or guessed about it; refusals during the pause repeat it.
func (l *Ledger) Pause(t time.Time, note string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared(true, func(now time.Time) ([]rec, error) {
		t = capPause(now, t)
		if !t.After(l.s.paused) {
			return nil, nil
		}
		return []rec{{T: recPause, At: t.UnixNano(), Note: note, Long: t.After(now.Add(Window))}}, nil
	})
}

// Spent is the points recorded as spent within window before now (tests,
// reports): charged batches included.
func (l *Ledger) Spent(window time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	_ = l.shared(false, func(now time.Time) ([]rec, error) {
		n = l.s.spentSince(now, window)
		return nil, nil
	})
	return n
}

// PausedUntil is the end of the current server pause (zero if none).
func (l *Ledger) PausedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.shared(false, func(time.Time) ([]rec, error) { return nil, nil })
	if l.Now().Before(l.s.paused) {
		return l.s.paused
	}
	return time.Time{}
}

type resKey struct{}

// CheckPlan tells whether cost points fit in l now and how many are left
// (store.Budgeted's CheckBudget for a repository kept by a file ledger): -1
// and nil when l is nil (no budget).
func CheckPlan(l *Ledger, cost int) (int, error) {
	if l == nil {
		return -1, nil
	}
	return l.checkLeft(cost)
}

// ReservePlan holds cost points of l for one operation (store.Budgeted's
// ReservePlan for a repository kept by a file ledger): the returned context
// carries the reservation to Apply; release gives back what was not spent.
// A nil l reserves nothing.
func ReservePlan(ctx context.Context, l *Ledger, cost int) (context.Context, func(), error) {
	if l == nil {
		return ctx, func() {}, nil
	}
	r, err := l.Reserve(cost)
	if err != nil {
		return ctx, nil, err
	}
	return WithReservation(ctx, r), func() { r.Release() }, nil
}

// WithReservation returns a context that carries r to the repository's
// Apply, which settles each committed batch against it.
func WithReservation(ctx context.Context, r *Reservation) context.Context {
	return context.WithValue(ctx, resKey{}, r)
}

// ReservationFrom returns the reservation ctx carries, or nil.
func ReservationFrom(ctx context.Context) *Reservation {
	r, _ := ctx.Value(resKey{}).(*Reservation)
	return r
}

type batchKey struct{}

// WithBatch returns a context that names the batch a write sends (an
// operation's ID and the batch's place in it): the key its points are
// charged under (Reservation.Charge), so that a batch sent again (a retry,
// or a resume after a kill) is charged once.
func WithBatch(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, batchKey{}, key)
}

// BatchFrom returns the batch key ctx carries, or "".
func BatchFrom(ctx context.Context) string {
	k, _ := ctx.Value(batchKey{}).(string)
	return k
}
