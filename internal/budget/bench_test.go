package budget

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkWrite is the ledger's part of one write as the server does it
// (CheckPlan, Reserve, PausedUntil, Charge before sending, Release), on a
// file, after prior charges in the rolling hour: the cost per write must
// not grow with them.
//
//	go test ./internal/budget -run '^$' -bench Write -benchtime 200x
func BenchmarkWrite(b *testing.B) {
	for _, prior := range []int{0, 1000, 5000} {
		b.Run(fmt.Sprintf("prior=%d", prior), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "budget.json")
			l, err := New(path)
			if err != nil {
				b.Fatal(err)
			}
			l.Limit, l.DayLimit = 1<<30, 1<<30
			start := time.Now()
			for i := range prior {
				r, err := l.Reserve(3)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Charge(fmt.Sprintf("prior/%d", i), 3); err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
			if prior > 0 {
				b.Logf("%d prior writes in %s", prior, time.Since(start))
			}
			cpu := processCPU()
			n := 0
			for i := 0; b.Loop(); i++ {
				n++
				if _, err := CheckPlan(l, 3); err != nil {
					b.Fatal(err)
				}
				r, err := l.Reserve(3)
				if err != nil {
					b.Fatal(err)
				}
				l.PausedUntil()
				if _, err := r.Charge(fmt.Sprintf("w/%d", i), 3); err != nil {
					b.Fatal(err)
				}
				r.Release()
			}
			b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(n), "cpu-µs/write")
		})
	}
}

// processCPU is the CPU time (user and system) of this process.
func processCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
