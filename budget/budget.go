package budget

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/bulleted-mcp/bulleted-mcp/atomicfile"
)

// Limit is Bulleted's write budget: points per rolling Window.
const (
	Limit  = 5000
	Window = time.Hour
	// Burst is how many points the pacer lets through at once; beyond it,
	// batches are spread at Limit per Window.
	Burst = 1200
	// MaxWait is the longest a write waits for the pacer or a server pause
	// before it is refused instead.
	MaxWait = 15 * time.Second
)

// ErrBudget means the points are not available now.
var ErrBudget = errors.New("write budget exceeded")

// Exceeded is the error of a plan that does not fit. It wraps ErrBudget.
type Exceeded struct {
	Cost   int       // points the plan needs
	Left   int       // points left now
	FreeAt time.Time // when Cost points will be free (zero: never, Cost > Limit)
	Paused bool      // the server asked us to wait (429 Retry-After)
}

func (e *Exceeded) Error() string {
	when := "never: split it into smaller plans"
	if !e.FreeAt.IsZero() {
		when = "at " + e.FreeAt.UTC().Format(time.RFC3339)
	}
	if e.Paused {
		return fmt.Sprintf("the server asked to pause writes; %d point(s) can be spent %s", e.Cost, when)
	}
	return fmt.Sprintf("this needs %d point(s), %d of %d are left in the rolling hour; enough will be free %s", e.Cost, e.Left, Limit, when)
}

func (e *Exceeded) Unwrap() error { return ErrBudget }

type entry struct {
	At     time.Time `json:"at"`
	Points int       `json:"points"`
}

type file struct {
	Spent       []entry   `json:"spent"`
	PausedUntil time.Time `json:"pausedUntil,omitzero"`
}

// Ledger is the rolling-hour record of spent points. It is safe for
// concurrent use, and, kept in a file, shared by the processes that use the
// file: every call reads it under a lock (flock on path+".lock"), and every
// spend is written back before the lock is released, so that two servers
// on one account (say Claude Desktop's and Claude Code's) never spend more
// than the limit between them.
type Ledger struct {
	// Now is the clock (tests inject one).
	Now func() time.Time
	// Limit per Window (default Limit).
	Limit int

	mu     sync.Mutex
	path   string
	spent  []entry // oldest first, all within the last Window
	paused time.Time
	pacer  *rate.Limiter
}

// New returns a ledger kept in path ("" = memory only), loading what an
// earlier process spent.
func New(path string) (*Ledger, error) {
	l := &Ledger{Now: time.Now, Limit: Limit, path: path,
		pacer: rate.NewLimiter(rate.Limit(float64(Limit)/Window.Seconds()), Burst)}
	if path == "" {
		return l, nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, err
	}
	var f file
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("budget ledger %s: %w", path, err)
	}
	l.spent, l.paused = f.Spent, f.PausedUntil
	return l, nil
}

// shared runs fn (caller holds mu) with the file's lock held, after
// reloading what any process wrote to the file.
func (l *Ledger) shared(exclusive bool, fn func() error) error {
	if l.path == "" {
		return fn()
	}
	lock, err := os.OpenFile(l.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := atomicfile.Lock(lock, exclusive); err != nil {
		return err
	}
	defer atomicfile.Unlock(lock)
	raw, err := os.ReadFile(l.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return err
	default:
		var f file
		if err := json.Unmarshal(raw, &f); err != nil {
			return fmt.Errorf("budget ledger %s: %w", l.path, err)
		}
		l.spent = f.Spent
		if f.PausedUntil.After(l.paused) {
			l.paused = f.PausedUntil
		}
	}
	return fn()
}

// SetBurst changes how many points the pacer lets through at once
// (Limit: no pacing beyond the rolling-hour bound).
func (l *Ledger) SetBurst(points int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	// a new pacer: its burst starts full
	l.pacer = rate.NewLimiter(rate.Limit(float64(l.Limit)/Window.Seconds()), points)
}

// prune drops entries older than the window (caller holds mu).
func (l *Ledger) prune(now time.Time) {
	i := 0
	for i < len(l.spent) && !l.spent[i].At.After(now.Add(-Window)) {
		i++
	}
	l.spent = l.spent[i:]
}

func (l *Ledger) used() int {
	n := 0
	for _, e := range l.spent {
		n += e.Points
	}
	return n
}

// Left returns the points left in the rolling hour now.
func (l *Ledger) Left() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.shared(false, func() error { return nil }) // unreadable: what this process knows
	l.prune(l.Now())
	return max(0, l.Limit-l.used())
}

// freeAt is when cost points will be free (caller holds mu, pruned).
func (l *Ledger) freeAt(now time.Time, cost int) time.Time {
	if cost > l.Limit {
		return time.Time{}
	}
	left := l.Limit - l.used()
	t := now
	for _, e := range l.spent {
		if left >= cost {
			break
		}
		left += e.Points
		t = e.At.Add(Window)
	}
	if t.Before(l.paused) {
		t = l.paused
	}
	return t
}

// Check reports whether cost points can be spent now, without spending
// them. The error is an *Exceeded.
func (l *Ledger) Check(cost int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.shared(false, func() error { return nil }); err != nil {
		return err
	}
	now := l.Now()
	l.prune(now)
	if now.Before(l.paused) && l.paused.Sub(now) > MaxWait {
		return &Exceeded{Cost: cost, Left: max(0, l.Limit-l.used()), FreeAt: l.freeAt(now, cost), Paused: true}
	}
	return l.checkLocked(now, cost)
}

// Wait is how long a batch of cost points must wait before it is sent: for
// a server pause, and for the pacer. It reserves the pacer's tokens; an
// error means the batch must not be sent (nothing is reserved then).
func (l *Ledger) Wait(cost int) (time.Duration, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.shared(false, func() error { return nil }); err != nil {
		return 0, err
	}
	now := l.Now()
	l.prune(now)
	if err := l.checkLocked(now, cost); err != nil {
		return 0, err
	}
	var wait time.Duration
	if now.Before(l.paused) {
		wait = l.paused.Sub(now)
	}
	n := min(cost, l.pacer.Burst())
	r := l.pacer.ReserveN(now, n)
	if !r.OK() {
		return 0, &Exceeded{Cost: cost, Left: l.Limit - l.used(), FreeAt: l.freeAt(now, cost)}
	}
	if d := r.DelayFrom(now); d > wait {
		wait = d
	}
	if wait > MaxWait {
		r.CancelAt(now)
		return 0, &Exceeded{Cost: cost, Left: l.Limit - l.used(), FreeAt: now.Add(wait), Paused: now.Before(l.paused)}
	}
	return wait, nil
}

// checkLocked refuses cost if it does not fit in the rolling hour (caller
// holds mu, pruned).
func (l *Ledger) checkLocked(now time.Time, cost int) error {
	left := l.Limit - l.used()
	if cost > left {
		return &Exceeded{Cost: cost, Left: max(0, left), FreeAt: l.freeAt(now, cost)}
	}
	return nil
}

// Spend records points spent now (a committed batch) and saves the ledger.
func (l *Ledger) Spend(points int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared(true, func() error {
		now := l.Now()
		l.prune(now)
		l.spent = append(l.spent, entry{At: now, Points: points})
		return l.save()
	})
}

// Pause stops writes until t (a server's Retry-After).
func (l *Ledger) Pause(t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.shared(true, func() error {
		if t.After(l.paused) {
			l.paused = t
		}
		return l.save()
	})
}

// PausedUntil is the end of the current server pause (zero if none).
func (l *Ledger) PausedUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.shared(false, func() error { return nil })
	if l.Now().Before(l.paused) {
		return l.paused
	}
	return time.Time{}
}

func (l *Ledger) save() error {
	if l.path == "" {
		return nil
	}
	raw, err := json.Marshal(file{Spent: l.spent, PausedUntil: l.paused})
	if err != nil {
		return err
	}
	return atomicfile.Write(l.path, raw, 0o600)
}
