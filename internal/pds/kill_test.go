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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
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
	killOneByOne = 12 // one-bullet inserts of a KILL_ONE_BY_ONE child
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
	e, err := pdstest.NewEngine(r, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv("KILL_ONE_BY_ONE") != "" {
		// one-bullet inserts, each after the last: all but the first are
		// planned on the child's own last commit without asking the PDS
		for i := range killOneByOne {
			if _, err := pdstest.InsertOp(ctx, e, "", []intent.NewNode{{Text: fmt.Sprintf("k%d-%d", os.Getpid(), i)}}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			fmt.Fprintf(os.Stderr, "inserted %d, trusted %d\n", i+1, r.Stats.Trusted.Load())
		}
		return 0
	}
	nodes := make([]intent.NewNode, killBullets)
	for i := range nodes {
		nodes[i] = intent.NewNode{Text: fmt.Sprintf("k%d-%d", os.Getpid(), i)}
	}
	_, err = pdstest.InsertOp(ctx, e, "", nodes)
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
	a := pdstest.NewAccount(t, srv)
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
		cmd, out, exited := startKillChild(t, self, dir, proxy.URL, a)
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

// A process killed (kill -9) while a write planned on its own last commit
// (without asking the PDS) is on its way: the PDS commits it, the answer
// never comes. Three children of one data directory, each killed at a
// later write; then one left to finish. Read back from the PDS: every
// bullet once, and the ledger counts at least every point that landed.
func TestKillTrustedWrite(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	proxy := pdstest.NewFaultProxy(t, srv.URL)
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for run, nth := range []int{2, 5, 9, 0} { // 0: no fault, it finishes
		events := len(proxy.Events())
		if nth > 0 {
			proxy.Arm(pdstest.Fault{Method: pdstest.ApplyWrites, Kind: pdstest.HangAfterForward, Nth: nth})
		}
		cmd, out, exited := startKillChild(t, self, dir, proxy.URL, a, "KILL_ONE_BY_ONE=1")
		deadline := time.After(60 * time.Second) // a bound for a stuck child, not a speed check
		killed := false
	wait:
		for {
			select {
			case err := <-exited:
				if err != nil || nth > 0 {
					t.Fatalf("run %d: the child ended (%v) before the held write: %s", run, err, out)
				}
				break wait
			case <-deadline:
				cmd.Process.Kill()
				t.Fatalf("run %d: the child did not get anywhere: %s", run, out)
			case <-time.After(10 * time.Millisecond):
				if evs := proxy.Events(); nth > 0 && len(evs) > events && evs[events].PDSStatus != 0 {
					cmd.Process.Signal(os.Kill) // the held write landed; its answer never comes
					<-exited
					killed = true
					break wait
				}
			}
		}
		proxy.Disarm()
		if killed && !strings.Contains(out.String(), fmt.Sprintf("inserted %d, trusted %d", nth-1, nth-2)) {
			t.Fatalf("run %d: the writes before the held one were not all planned on the child's own last commit: %s", run, out)
		}
		tr := pdstest.ReadBack(t, ctx, srv, a.DID.String())
		if p := tr.CheckConsistent(true); len(p) > 0 {
			t.Fatalf("run %d: read back: %v", run, p)
		}
		landed := 3 * pdstest.RecordCount(tr)
		l, err := budget.New(filepath.Join(dir, "budget.json"))
		if err != nil {
			t.Fatal(err)
		}
		counted := l.Spent(budget.Window)
		t.Logf("run %d (held write %d): killed %v; %d bullets, %d points landed, the ledger counts %d", run, nth, killed, pdstest.RecordCount(tr), landed, counted)
		if counted < landed {
			t.Errorf("run %d: %d points landed, the ledger counts only %d", run, landed, counted)
		}
		if want := 3 * (2 + 5 + 9 + killOneByOne); run == 3 && landed != want {
			t.Errorf("after the last child finished: %d points landed, want %d (each killed child's writes up to the held one, which landed, and %d)", landed, want, killOneByOne)
		}
	}
}

// startKillChild starts the test binary self as a kill child (killChild)
// writing as a through pdsURL with data directory dir, env added: its
// process, its output so far, and its end.
func startKillChild(t *testing.T, self, dir, pdsURL string, a *pdstest.Account, env ...string) (*exec.Cmd, *lockedBuffer, chan error) {
	t.Helper()
	cmd := exec.Command(self, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), killChildEnv+"=1", "KILL_DIR="+dir, "KILL_PDS="+pdsURL,
		"KILL_HANDLE="+a.Handle, "KILL_PASSWORD="+a.AppPassword), env...)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, out, exited
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
