package budget

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// deadPID is the id of a process that ran and is gone.
func deadPID(t *testing.T) int {
	t.Helper()
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	return child.Process.Pid
}

// A batch charged by a process killed before it knew whether the batch
// landed stays counted (it may have landed), open; once its operation is
// known to have landed only some batches (undone or forgotten), GiveBack
// returns the rest, in every process sharing the file. A charge its
// process released (its fate decided: kept because the PDS counted it),
// one a resume used, and one whose process still runs stay.
func TestGiveBackKilled(t *testing.T) {
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
	dead, err := OpenAs(path, deadPID(t))
	if err != nil {
		t.Fatal(err)
	}
	dead.Now = c.now
	r, err := dead.Reserve(900)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"op1/0+100", "op1/100+100", "op2/0+50"} {
		p := 300
		if k == "op2/0+50" {
			p = 150
		}
		if _, err := r.Charge(k, p); err != nil {
			t.Fatal(err)
		}
	}
	// a live process's operation: charged and released (the PDS counted
	// it), and another still running
	l := open()
	done, _ := l.Reserve(30)
	done.Charge("op3/0+10", 30)
	done.Release()
	running, _ := l.Reserve(30)
	running.Charge("op4/0+10", 30)

	if got := l.Spent(Window); got != 810 {
		t.Fatalf("spent %d, want 810", got)
	}
	if p, open := l.Charged("op1/100+100"); p != 300 || !open {
		t.Fatalf("the killed process's unknown batch: %d points, open %v; want 300, open", p, open)
	}
	if _, open := l.Charged("op3/0+10"); open {
		t.Fatal("a released charge reads as open")
	}
	// op2 resumed: the resume uses the charge, which is no longer open
	res, _ := l.Reserve(150)
	if ch, err := res.Charge("op2/0+50", 150); err != nil || ch.own {
		t.Fatalf("resume charged again (%v)", err)
	}
	if got := l.Spent(Window); got != 810 {
		t.Fatalf("after the resume's charge spent %d, want 810", got)
	}
	res.Release()

	// op1 undone: its first batch landed, the second did not
	back, err := l.GiveBack("op1", []string{"op1/0+100"})
	if err != nil || back != 300 {
		t.Fatalf("gave back %d (%v), want 300", back, err)
	}
	for _, op := range []string{"op2", "op3", "op4"} {
		if back, err := l.GiveBack(op, nil); err != nil || back != 0 {
			t.Fatalf("%s: gave back %d (%v), want 0", op, back, err)
		}
	}
	if back, _ := l.GiveBack("op1", []string{"op1/0+100"}); back != 0 {
		t.Fatalf("given back twice: %d", back)
	}
	if got := l.Spent(Window); got != 510 {
		t.Fatalf("spent %d after the give-back, want 510", got)
	}
	// another process reading the file, and the file compacted, agree
	other := open()
	if got := other.Spent(Window); got != 510 {
		t.Fatalf("another process reads %d spent, want 510", got)
	}
	other.mu.Lock()
	other.s.res = map[string]*held{}
	if err := other.compact(); err != nil {
		t.Fatal(err)
	}
	other.mu.Unlock()
	l2, err := OpenAs(path, deadPID(t))
	if err != nil {
		t.Fatal(err)
	}
	l2.Now = c.now
	if p, _ := l2.Charged("op1/100+100"); p != 0 {
		t.Fatalf("after compaction the given-back charge holds %d", p)
	}
	if got := l2.Spent(Window); got != 510 {
		t.Fatalf("after compaction spent %d, want 510", got)
	}
	running.Release()
}

// The open mark survives compaction: a killed process's charge read from a
// snapshot is still given back.
func TestGiveBackAfterCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "budget.json")
	dead, err := OpenAs(path, deadPID(t))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := dead.Reserve(300)
	r.Charge("op9/0+100", 300)
	dead.mu.Lock()
	if err := dead.compact(); err != nil {
		t.Fatal(err)
	}
	dead.mu.Unlock()
	l, err := New(path)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := l.GiveBack("op9", nil); err != nil || back != 300 {
		t.Fatalf("gave back %d (%v) from a compacted file, want 300", back, err)
	}
}
