package pds_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// The kill loop's child process: the server's write path as the CLI opens
// it (app-password session, budget ledger and operations journal in one
// data directory) doing one insert, run by re-executing the test binary.
const (
	killChildEnv = "BULLETED_KILL_CHILD" // set: TestMain runs killChild instead of the tests
	killLimit    = 4500                  // the hourly limit the children keep (a 300-bullet insert is 900 points)
	killBullets  = 300
)

// killChild inserts killBullets bullets at the top level and exits 0 (done),
// 3 (refused by the budget) or 1 (anything else).
func killChild() int {
	ctx := context.Background()
	dir := os.Getenv("KILL_DIR")
	c, did, err := pds.Login{PDS: os.Getenv("KILL_PDS"), Identifier: os.Getenv("KILL_HANDLE"), Password: os.Getenv("KILL_PASSWORD"), Dir: dir}.Open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "login:", err)
		return 1
	}
	r := pds.New(c, did)
	ledger, err := budget.New(filepath.Join(dir, "budget.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ledger.Limit = killLimit
	r.Budget = ledger
	e, err := newEngine(r, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nodes := make([]outline.NewNode, killBullets)
	for i := range nodes {
		nodes[i] = outline.NewNode{Text: fmt.Sprintf("k%d-%d", os.Getpid(), i)}
	}
	_, err = insertOp(ctx, e, "", nodes)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, outline.ErrBudget):
		fmt.Fprintln(os.Stderr, "refused:", err)
		return 3
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// A process killed (kill -9) while it writes never leaves points that
// landed uncounted: 300-bullet inserts of separate processes on one data
// directory, killed after a batch reached the PDS but before its answer,
// while a batch is held before the PDS, at random moments, or not at all;
// after each, the repository read back never holds more points than the
// ledger counts, nor more than the limit (here 4,500 an hour, so that it
// is reached). Before points were counted ahead of the send, a batch that
// landed just before a kill was never counted, and later inserts were let
// through past the limit.
func TestKillLoopNeverOverspends(t *testing.T) {
	ctx := context.Background()
	a := account(t, srv)
	proxy := pdstest.NewFaultProxy(t, srv.URL)
	dir := t.TempDir()
	runs := 12
	if testing.Short() {
		runs = 5
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	t.Logf("seed %d", seed)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(90 * time.Second)
	refused, killed := 0, 0
	for i := 0; i < runs; i++ {
		// how this run ends
		var fault *pdstest.Fault
		var delay time.Duration
		mode := []string{"hang after batch 1 landed", "hang after batch 2 landed", "hang before batch 1 reached the PDS", "random moment"}[i%4]
		switch i % 4 {
		case 0:
			fault = &pdstest.Fault{Method: pdstest.ApplyWrites, Kind: pdstest.HangAfterForward, Nth: 1}
		case 1:
			fault = &pdstest.Fault{Method: pdstest.ApplyWrites, Kind: pdstest.HangAfterForward, Nth: 2}
		case 2:
			fault = &pdstest.Fault{Method: pdstest.ApplyWrites, Kind: pdstest.Hang, Nth: 1}
		default:
			delay = time.Duration(rng.IntN(2500)) * time.Millisecond
		}
		events := len(proxy.Events())
		if fault != nil {
			proxy.Arm(*fault)
		}
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"=1", "KILL_DIR="+dir, "KILL_PDS="+proxy.URL,
			"KILL_HANDLE="+a.Handle, "KILL_PASSWORD="+a.AppPassword)
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		var waitErr error
		done := false
		var timer <-chan time.Time
		if fault == nil {
			timer = time.After(delay)
		}
		tick := time.NewTicker(10 * time.Millisecond)
	wait:
		for {
			select {
			case waitErr = <-exited:
				done = true
				break wait
			case <-timer:
				break wait
			case <-tick.C:
				if fault != nil && len(proxy.Events()) > events {
					ev := proxy.Events()[events]
					if ev.Kind == pdstest.Hang || ev.PDSStatus != 0 {
						break wait // held before the PDS, or answered by it (landed)
					}
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatalf("run %d (%s) did not get anywhere: %s", i, mode, out)
				}
			}
		}
		tick.Stop()
		if !done {
			cmd.Process.Signal(os.Kill) // kill -9
			waitErr = <-exited          // reaped: its reservation is gone
			killed++
		}
		proxy.Disarm()
		status := "killed"
		if done {
			status = "exit 0"
			var ee *exec.ExitError
			if errors.As(waitErr, &ee) {
				status = "exit " + strconv.Itoa(ee.ExitCode())
				if ee.ExitCode() == 3 {
					refused++
				} else {
					t.Fatalf("run %d (%s): %v: %s", i, mode, waitErr, out)
				}
			}
		}
		recs, err := pdstest.ReadRecords(ctx, srv.URL, a.DID)
		if err != nil {
			t.Fatal(err)
		}
		// every record is a create of these inserts (3 points); the test
		// runs well within one rolling hour, so this is the hour's spending
		landed := 3 * len(recs)
		l, err := budget.New(filepath.Join(dir, "budget.json"))
		if err != nil {
			t.Fatal(err)
		}
		counted := l.Spent(budget.Window)
		t.Logf("run %d (%s): %s; landed %d points, the ledger counts %d", i, mode, status, landed, counted)
		if counted < landed {
			t.Errorf("run %d (%s): %d points landed, the ledger counts only %d", i, mode, landed, counted)
		}
		if landed > killLimit {
			t.Fatalf("run %d (%s): %d points landed in the hour, over the limit of %d", i, mode, landed, killLimit)
		}
	}
	if runs >= 12 && refused == 0 { // 12 runs charge at least 4,200 points by the 8th: the 9th cannot reserve 900
		t.Errorf("the limit was never reached (%d runs, %d killed)", runs, killed)
	}
	t.Logf("%d runs: %d killed, %d refused by the budget", runs, killed, refused)
}

// lockedBuffer collects a child's output (written by exec's copying
// goroutines, read by the test).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
