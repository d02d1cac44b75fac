package budget

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
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
		if err := l.Check(cost); err != nil {
			var ex *Exceeded
			if !errors.As(err, &ex) || ex.FreeAt.IsZero() {
				t.Fatalf("check: %v", err)
			}
			c.t = ex.FreeAt
			continue
		}
		wait, err := l.Wait(cost)
		if err != nil {
			var ex *Exceeded
			if !errors.As(err, &ex) {
				t.Fatal(err)
			}
			c.t = ex.FreeAt
			continue
		}
		c.t = c.t.Add(wait)
		if !c.t.Before(end) {
			break
		}
		if err := l.Spend(cost); err != nil {
			t.Fatal(err)
		}
		log = append(log, entry{c.t, cost})
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
	for seed := uint64(1); seed <= 5; seed++ {
		perHour, maxRolling := simulate(t, 8, 60, seed)
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
	path := filepath.Join(t.TempDir(), "budget.json")
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	l.Now = c.now
	l.Spend(4990)
	l.Pause(c.t.Add(time.Minute))
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
	if w, err := l2.Wait(3); err != nil || w != 10*time.Second {
		t.Fatalf("short pause is waited out: %v %v", w, err)
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
		perHour, maxRolling := simulate(b, 8, maxCost, uint64(i+1))
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
	if err := b.Check(2500); !errors.As(err, &ex) || ex.Left != 2000 {
		t.Fatalf("b after a spent 3000: %v", err)
	}
	if err := b.Spend(2000); err != nil {
		t.Fatal(err)
	}
	if a.Left() != 0 || b.Left() != 0 {
		t.Fatalf("left: a %d, b %d", a.Left(), b.Left())
	}
	b.Pause(c.t.Add(10 * time.Minute))
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
