package budget

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// simulate drives a ledger with saturating load for hours: a writer that
// always has another plan (1–maxCost points) and sends it as soon as the ledger
// lets it. It returns the points spent in each clock hour and the largest
// sum over any rolling hour.
func simulate(t testing.TB, hours, maxCost int, seed uint64) (perHour []int, maxRolling int) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, err := New("")
	if err != nil {
		t.Fatal(err)
	}
	l.Now = c.now
	rng := rand.New(rand.NewPCG(seed, 1))
	start := c.t
	end := start.Add(time.Duration(hours) * time.Hour)
	perHour = make([]int, hours)
	var log []entry
	for c.t.Before(end) {
		cost := 1 + rng.IntN(maxCost)
		r, err := l.Reserve(cost)
		if err != nil {
			var ex *Exceeded
			if !errors.As(err, &ex) || ex.FreeAt.IsZero() {
				t.Fatalf("reserve: %v", err)
			}
			c.t = ex.FreeAt
			continue
		}
		if err := r.Settle(cost); err != nil {
			t.Fatal(err)
		}
		r.Release()
		log = append(log, entry{At: c.t, Points: cost})
		perHour[int(c.t.Sub(start)/time.Hour)] += cost
		sum := 0
		for i := len(log) - 1; i >= 0 && log[i].At.After(c.t.Add(-Window)); i-- {
			sum += log[i].Points
		}
		maxRolling = max(maxRolling, sum)
		c.t = c.t.Add(time.Duration(rng.IntN(3)) * time.Second) // planning time
	}
	return perHour, maxRolling
}

func TestSaturatingLoad(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 5; seed++ {
		perHour, maxRolling := simulate(t, 6, 60, seed) // 6 h: within the daily limit
		if maxRolling > Limit {
			t.Fatalf("seed %d: %d points in one rolling hour (limit %d)", seed, maxRolling, Limit)
		}
		for h, n := range perHour {
			if n < Limit*95/100 {
				t.Fatalf("seed %d: hour %d used only %d of %d points (%v)", seed, h, n, Limit, perHour)
			}
		}
		t.Logf("seed %d: per hour %v, max rolling hour %d", seed, perHour, maxRolling)
	}
}

// The reason for the ledger: a plain token bucket with burst 5,000 at
// 5,000/h lets ~10,000 points through in the first hour.
func TestPlainBucketOveradmits(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := rate.NewLimiter(rate.Limit(float64(Limit)/3600), Limit)
	n := 0
	for s := 0; s < 3600; s++ {
		for lim.AllowN(start.Add(time.Duration(s)*time.Second), 3) {
			n += 3
		}
	}
	if n < 9500 {
		t.Fatalf("plain bucket admitted %d in an hour; the premise changed", n)
	}
}

func TestCheckSaysWhen(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, _ := New("")
	l.Now = c.now
	l.Spend(4000)
	c.t = c.t.Add(10 * time.Minute)
	l.Spend(900)
	err := l.Check(300)
	var ex *Exceeded
	if !errors.As(err, &ex) || !errors.Is(err, ErrBudget) {
		t.Fatalf("want *Exceeded, got %v", err)
	}
	if ex.Left != 100 || ex.Cost != 300 || !ex.FreeAt.Equal(time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)) {
		t.Fatalf("got %+v", ex)
	}
	if err := l.Check(100); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(Limit + 1); !errors.As(err, &ex) || !ex.FreeAt.IsZero() {
		t.Fatalf("a plan over the limit never fits: %v", err)
	}
	c.t = time.Date(2026, 1, 1, 1, 0, 1, 0, time.UTC)
	if got := l.Left(); got != 4100 {
		t.Fatalf("left after the first hour: %d", got)
	}
}

func TestKeptAcrossRestartAndPause(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "budget.json")
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Now = c.now
	l.Spend(4990)
	l.Pause(c.t.Add(time.Minute), "")
	l2, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	l2.Now = c.now
	if got := l2.Left(); got != 10 {
		t.Fatalf("left after reload: %d", got)
	}
	var ex *Exceeded
	if err := l2.Check(3); !errors.As(err, &ex) || !ex.Paused {
		t.Fatalf("paused for a minute: %v", err)
	}
	c.t = c.t.Add(50 * time.Second)
	if err := l2.Check(3); err != nil {
		t.Fatalf("a pause of 10 s more is short enough to wait out: %v", err)
	}
}

// BenchmarkSaturation reports the share of the hourly budget used under
// saturating load (simulated clock) and the largest rolling-hour sum.
func BenchmarkSaturation(b *testing.B) {
	for _, maxCost := range []int{60, 600} {
		b.Run(fmt.Sprintf("plans-up-to-%d-points", maxCost), func(b *testing.B) { saturation(b, maxCost) })
	}
}

func saturation(b *testing.B, maxCost int) {
	for i := 0; i < b.N; i++ {
		perHour, maxRolling := simulate(b, 6, maxCost, uint64(i+1))
		minH := Limit
		for _, n := range perHour {
			minH = min(minH, n)
		}
		b.ReportMetric(100*float64(minH)/Limit, "min-hour-%")
		b.ReportMetric(float64(maxRolling), "max-rolling-points")
	}
}

// Two processes on one account share the ledger file: each sees what the
// other spent and paused, and together they never pass the limit.
func TestSharedBetweenProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "budget.json")
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	open := func() *Ledger {
		l, err := New(path)
		if err != nil {
			t.Fatal(err)
		}
		l.Now = c.now
		return l
	}
	a, b := open(), open()
	if err := a.Spend(3000); err != nil {
		t.Fatal(err)
	}
	var ex *Exceeded
	if err := b.Check(2500); !errors.As(err, &ex) || ex.Left != 2000 || ex.Window != "hour" {
		t.Fatalf("b after a spent 3000: %v", err)
	}
	if err := b.Spend(2000); err != nil {
		t.Fatal(err)
	}
	if a.Left() != 0 || b.Left() != 0 {
		t.Fatalf("left: a %d, b %d", a.Left(), b.Left())
	}
	b.Pause(c.t.Add(10*time.Minute), "")
	if !a.PausedUntil().Equal(c.t.Add(10 * time.Minute)) {
		t.Fatal("a does not see b's pause")
	}

	// concurrent spenders: every spend is in the file
	c.t = c.t.Add(2 * Window)
	var wg sync.WaitGroup
	for _, l := range []*Ledger{a, b, open()} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := l.Spend(10); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if got := open().Left(); got != Limit-1500 {
		t.Fatalf("after 150 concurrent spends of 10: %d left, want %d", got, Limit-1500)
	}
}

// The daily limit binds after seven saturated hours: a rolling day never
// holds more than DayLimit, and the refusal names the day.
func TestDailyLimit(t *testing.T) {
	t.Parallel()
	perHour, _ := simulate(t, 30, 60, 7)
	day := 0
	for _, n := range perHour[:24] {
		day += n
	}
	if day > DayLimit || day < DayLimit*95/100 {
		t.Fatalf("first day: %d points (limit %d): %v", day, DayLimit, perHour)
	}
	if perHour[8] != 0 {
		t.Fatalf("hour 8 spent %d after the day's limit was reached", perHour[8])
	}
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, _ := New("")
	l.Now = c.now
	for h := 0; h < 7; h++ {
		if err := l.Spend(Limit); err != nil {
			t.Fatal(err)
		}
		c.t = c.t.Add(Window)
	}
	var ex *Exceeded
	if err := l.Check(3); !errors.As(err, &ex) || ex.Window != "day" || !ex.FreeAt.Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("after 35,000 points in 7 hours: %v (%+v)", err, ex)
	}
}

// Reservations are visible to every ledger on the file: what one holds,
// another cannot take; a release gives it back; a reservation of a killed
// process expires.
func TestReservationsShared(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "budget.json")
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	open := func() *Ledger {
		l, err := New(path)
		if err != nil {
			t.Fatal(err)
		}
		l.Now = c.now
		return l
	}
	a, b := open(), open()
	ra, err := a.Reserve(4000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve(1001); !errors.Is(err, ErrBudget) {
		t.Fatalf("b reserved past a's reservation: %v", err)
	}
	if err := ra.Settle(600); err != nil {
		t.Fatal(err)
	}
	if got := b.Left(); got != 1000 {
		t.Fatalf("left with 600 spent and 3,400 held: %d", got)
	}
	ra.Release()
	if got := b.Left(); got != 4400 {
		t.Fatalf("left after release: %d", got)
	}
	// another process: reserved, never settled nor released; it holds
	// while that process runs and is given back once it is killed
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	other := open()
	other.pid = child.Process.Pid
	if _, err := other.Reserve(4400); err != nil {
		t.Fatal(err)
	}
	c.t = c.t.Add(2 * ReservationTTL)
	if got := b.Left(); got != 0 {
		t.Fatalf("left while the other process runs: %d", got)
	}
	child.Process.Kill()
	child.Wait()
	if got := b.Left(); got != 4400 {
		t.Fatalf("left after the holder was killed: %d", got)
	}
	// one made on another machine holds until it expires
	remote := open()
	remote.host = "elsewhere"
	if _, err := remote.Reserve(400); err != nil {
		t.Fatal(err)
	}
	if got := b.Left(); got != 4000 {
		t.Fatalf("left with a remote reservation: %d", got)
	}
	c.t = c.t.Add(ReservationTTL + time.Second)
	if got := b.Left(); got != 4400 {
		t.Fatalf("left after the remote reservation expired: %d", got)
	}
}

// A server pause of ten years is capped at a day, in memory and on disk.
func TestPauseCapped(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "budget.json")
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, _ := New(path)
	l.Now = c.now
	l.Pause(c.t.Add(10*365*24*time.Hour), "")
	if got := l.PausedUntil(); !got.Equal(c.t.Add(Day)) {
		t.Fatalf("paused until %s", got)
	}
	c.t = c.t.Add(Day + time.Second)
	l2, _ := New(path)
	l2.Now = c.now
	if err := l2.Check(3); err != nil {
		t.Fatalf("still paused a day later, after a restart: %v", err)
	}
}

// Several processes (ledgers on one file) race with random operations and a
// shared simulated clock: whatever their timing, no rolling hour holds more
// than Limit and no rolling day more than DayLimit, and an operation whose
// reservation succeeded is never refused while settling its batches.
func TestManyLedgersNeverOverspend(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "budget.json")
	var clk sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := func(d time.Duration) {
		clk.Lock()
		now = now.Add(d)
		clk.Unlock()
	}
	read := func() time.Time {
		clk.Lock()
		defer clk.Unlock()
		return now
	}
	var logMu sync.Mutex
	var log []entry
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		l, err := New(path)
		if err != nil {
			t.Fatal(err)
		}
		l.Now = read
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), 9))
			for i := 0; i < 300; i++ {
				cost := 1 + rng.IntN(600)
				r, err := l.Reserve(cost)
				if err != nil {
					tick(time.Duration(rng.IntN(300)) * time.Second)
					continue
				}
				for left := cost; left > 0; {
					batch := min(left, 1+rng.IntN(200))
					tick(time.Duration(rng.IntN(5)) * time.Second)
					if err := r.Settle(batch); err != nil {
						t.Errorf("a reserved operation was refused mid-way: %v", err)
						return
					}
					logMu.Lock()
					log = append(log, entry{At: l.lastSettle, Points: batch})
					logMu.Unlock()
					left -= batch
				}
				r.Release()
			}
		}(p)
	}
	wg.Wait()
	slices.SortFunc(log, func(a, b entry) int { return a.At.Compare(b.At) })
	maxHour, maxDay, total := 0, 0, 0
	for _, w := range []struct {
		d   time.Duration
		max *int
	}{{Window, &maxHour}, {Day, &maxDay}} {
		sum, j := 0, 0
		for i := range log {
			sum += log[i].Points
			for !log[j].At.After(log[i].At.Add(-w.d)) {
				sum -= log[j].Points
				j++
			}
			*w.max = max(*w.max, sum)
		}
	}
	for _, e := range log {
		total += e.Points
	}
	t.Logf("%d settled batches, %d points over %s; max rolling hour %d, max rolling day %d", len(log), total, read().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), maxHour, maxDay)
	if maxHour > Limit || maxDay > DayLimit {
		t.Fatalf("overspent: max rolling hour %d (limit %d), max rolling day %d (limit %d)", maxHour, Limit, maxDay, DayLimit)
	}
	if total < Limit {
		t.Fatalf("the simulation spent only %d points", total)
	}
}

// TestExceededQuotesConfiguredLimit: a refusal quotes the limit in force
// (here a configured 1,000 points an hour), not the default.
func TestExceededQuotesConfiguredLimit(t *testing.T) {
	t.Parallel()
	l, _ := New("")
	l.Limit = 1000
	l.Spend(900)
	err := l.Check(300)
	var ex *Exceeded
	if !errors.As(err, &ex) {
		t.Fatalf("want *Exceeded, got %v", err)
	}
	if ex.Limit != 1000 || ex.Left != 100 || !strings.Contains(err.Error(), "100 of 1000 are left") {
		t.Fatalf("got %+v: %v", ex, err)
	}
}

// A batch's points are charged before it is sent and stay charged when the
// process that sent it is killed (its reservation is given back, the
// charge is not); the same batch sent again (a retry, a resume) is charged
// once; a refund gives a charge back to its reservation, never an earlier
// process's charge of the same batch; points past the reservation are
// charged only if they fit.
func TestChargeBeforeSend(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "budget.json")
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	open := func() *Ledger {
		l, err := New(path)
		if err != nil {
			t.Fatal(err)
		}
		l.Now = c.now
		return l
	}
	// a process that reserves 900, charges its first batch (600) and is
	// killed before it hears back
	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	dead := open()
	dead.pid = child.Process.Pid
	r, err := dead.Reserve(900)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Charge("op1/0+200", 600); err != nil {
		t.Fatal(err)
	}
	child.Process.Kill()
	child.Wait()
	l := open()
	if got := l.Spent(Window); got != 600 {
		t.Fatalf("after the kill the ledger counts %d, want the 600 charged", got)
	}
	if got := l.Left(); got != Limit-600 {
		t.Fatalf("left %d, want %d (the dead reservation's other 300 given back)", got, Limit-600)
	}
	// the resume sends the same batch again: charged once
	r2, err := l.Reserve(900)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r2.Charge("op1/0+200", 600)
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Spent(Window); got != 600 {
		t.Fatalf("the batch sent again is counted %d, want 600", got)
	}
	// it was refused this time: the earlier charge stays (that send may
	// have landed)
	again.Refund()
	if got := l.Spent(Window); got != 600 {
		t.Fatalf("a refund took back another process's charge: %d", got)
	}
	// this process's own charge, refused: back to its reservation
	ch, err := r2.Charge("op1/200+100", 300)
	if err != nil {
		t.Fatal(err)
	}
	if got, held := l.Spent(Window), r2.Remaining(); got != 900 || held != 600 {
		t.Fatalf("after a charge: spent %d, held %d; want 900, 600", got, held)
	}
	ch.Refund()
	if got, held := l.Spent(Window), r2.Remaining(); got != 600 || held != 900 {
		t.Fatalf("after a refund: spent %d, held %d; want 600, 900", got, held)
	}
	r2.Release()
	// past its reservation a charge must fit
	small, err := l.Reserve(10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Charge("big", Limit); !errors.Is(err, ErrBudget) {
		t.Fatalf("a charge past the reservation and the limit: %v", err)
	}
	if got := l.Spent(Window); got != 600 {
		t.Fatalf("a refused charge was recorded: %d", got)
	}
}

// A ledger written by an earlier version holds a 24-hour pause that no
// named limit allowed: it is capped at an hour from when it was recorded,
// and refusals say so.
func TestOldDayPauseCappedAtAnHour(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "budget.json")
	now := time.Now()
	old := fmt.Sprintf(`{"spent":[],"pausedUntil":%q}`, now.Add(Day).UTC().Format(time.RFC3339Nano))
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	got := l.PausedUntil()
	if got.After(time.Now().Add(Window)) || got.Before(now.Add(Window-time.Minute)) {
		t.Fatalf("paused until %s, want an hour from now", got.UTC().Format(time.RFC3339))
	}
	var ex *Exceeded
	if err := l.Check(3); !errors.As(err, &ex) || !ex.Paused || !strings.Contains(ex.Error(), "capped at 1 h") {
		t.Fatalf("refusal during the capped pause: %v", err)
	}
	// written back (another write), it stays where it was capped
	if _, err := l.Reserve(0); err == nil {
		t.Fatal("reserved during the pause")
	}
	l.Pause(time.Now(), "")
	if again := l.PausedUntil(); !again.Equal(got) {
		t.Fatalf("the capped pause moved: %s, then %s", got, again)
	}
}
