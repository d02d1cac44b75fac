package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// servedEnv is, in process, a server just after `serve` answered its
// first read on the embedded store of n records (a copy when the benchmark
// writes): the store opened, the tree built, one read_outline answered,
// and the background warm-up (Warm) finished, as it is by the time an
// agent sends its next call; and the first section's record key.
func servedEnv(b *testing.B, n int, writes bool) (*tools.Env, string) {
	dir := seedStore(b, n)
	if writes {
		cp := b.TempDir()
		if out, err := exec.Command("cp", "-a", dir+"/.", cp).CombinedOutput(); err != nil {
			b.Fatalf("cp: %v %s", err, out)
		}
		// written to disk now: else the first write's fsync pays for
		// flushing the whole copy (tens of milliseconds at 249k records,
		// not what a served store costs)
		files, _ := filepath.Glob(filepath.Join(cp, "*"))
		if out, err := exec.Command("sync", files...).CombinedOutput(); err != nil {
			b.Fatalf("sync: %v %s", err, out)
		}
		dir = cp
	}
	l, err := store.OpenLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	e, err := newEngine(l, dir)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	env := &tools.Env{Engine: e}
	if _, err := e.Tree(ctx); err != nil {
		b.Fatal(err)
	}
	if res, err := callTool(ctx, env, "read_outline", `{}`); err != nil || res.IsError {
		b.Fatalf("%v %+v", err, res)
	}
	if err := env.Warm(ctx); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	return env, firstSection(b, env)
}

// firstCall times, in each iteration, the first call (call with i 0)
// on a freshly served env of n records (ns/op: run with -benchtime 1x and
// -count so that every first call is reported on its own), and reports the
// median of the next warm calls (warm-ms) and the first call's CPU time
// (first-cpu-ms).
func firstCall(b *testing.B, n int, writes bool, call func(b *testing.B, env *tools.Env, parent string, i int)) {
	const warm = 7
	var warms []float64
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		env, parent := servedEnv(b, n, writes)
		c0 := cpuNow()
		b.StartTimer()
		call(b, env, parent, 0)
		b.StopTimer()
		cpu += cpuNow() - c0
		for j := 1; j <= warm; j++ {
			start := time.Now()
			call(b, env, parent, j)
			warms = append(warms, float64(time.Since(start).Microseconds())/1000)
		}
		b.StartTimer()
	}
	slices.Sort(warms)
	b.ReportMetric(warms[len(warms)/2], "warm-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "first-cpu-ms")
}

// cpuNow is the CPU time (user and system) this process has used: the
// first call's CPU time is steadier than its wall time on a loaded machine
// (the wall time also waits for the disk's fsyncs).
func cpuNow() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFirstSearch is the first search after `serve` answered its
// first read (ns/op), and the warm ones after it (warm-ms):
//
//	BULLETED_SCALE=1 go test ./cmd/bulleted-mcp -run '^$' -bench FirstSearch -benchtime 1x -count 5
func BenchmarkFirstSearch(b *testing.B) {
	for _, n := range firstSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			firstCall(b, n, false, func(b *testing.B, env *tools.Env, _ string, i int) {
				q := []string{`{"text":"budget","state":"open"}`, `{"text":"review"}`, `{"tags":["plan"]}`}[i%3]
				res, err := callTool(context.Background(), env, "search", q)
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			})
		})
	}
}

// BenchmarkFirstWrite is the first insert_after after `serve` answered its
// first read (ns/op), and the warm ones after it (warm-ms):
//
//	BULLETED_SCALE=1 go test ./cmd/bulleted-mcp -run '^$' -bench FirstWrite -benchtime 1x -count 5
func BenchmarkFirstWrite(b *testing.B) {
	for _, n := range firstSizes() {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			firstCall(b, n, true, func(b *testing.B, env *tools.Env, parent string, i int) {
				res, err := callTool(context.Background(), env, "insert_after", fmt.Sprintf(`{"parent":%q,"position":"first","text":"first %d"}`, parent, i))
				if err != nil || res.IsError {
					b.Fatalf("%v %+v", err, res)
				}
			})
		})
	}
}

// firstSizes are the sizes of the first-call benchmarks: 10k always, 100k
// and 249k with BULLETED_SCALE=1.
func firstSizes() []int {
	s := scaleSizes()
	return s[1:]
}
