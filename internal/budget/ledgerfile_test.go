package budget

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A change is one line appended to the file, and a ledger catching up
// reads only what others appended since it last looked: what a write
// costs does not grow with the charges of the hour.
func TestAppendOnly(t *testing.T) {
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
	for i := range 500 {
		r, err := a.Reserve(3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Charge(fmt.Sprint("a/", i), 3); err != nil {
			t.Fatal(err)
		}
		r.Release()
		c.t = c.t.Add(time.Second)
	}
	if got := b.Spent(Window); got != 1500 {
		t.Fatalf("b sees %d spent, want 1500", got)
	}
	before, _ := os.Stat(path)
	r, err := a.Reserve(3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Charge("a/last", 3); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if grew := after.Size() - before.Size(); grew <= 0 || grew > 400 {
		t.Fatalf("a reservation and a charge grew the file by %d bytes, want two short lines", grew)
	}
	off := b.lf.off
	if got := b.Spent(Window); got != 1503 {
		t.Fatalf("b sees %d spent, want 1503", got)
	}
	if read := b.lf.off - off; read != after.Size()-before.Size() {
		t.Fatalf("b read %d bytes to catch up with %d appended", read, after.Size()-before.Size())
	}
	// charged once across ledgers: b's charge under a's key counts nothing
	rb, _ := b.Reserve(3)
	if _, err := rb.Charge("a/7", 3); err != nil {
		t.Fatal(err)
	}
	if got := open().Spent(Window); got != 1503 {
		t.Fatalf("a key charged twice: %d", got)
	}
}

// Compaction rewrites the file as one snapshot; the other ledgers read
// the new file and agree with the one that wrote it; a line cut short by a
// crash is skipped.
func TestCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "budget.json")
	defer func(n int) { compactAfter = n }(compactAfter)
	compactAfter = 64
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
	held, err := b.Reserve(100)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		r, err := a.Reserve(3)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := r.Charge(fmt.Sprint("a/", i), 3)
		if err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			ch.Refund()
		}
		r.Release()
		c.t = c.t.Add(30 * time.Second) // 400 × 30 s: the first ones leave the hour
	}
	raw, _ := os.ReadFile(path)
	// compacted when the records pass compactAfter and twice the entries
	// kept (the day's 400 and a reservation)
	if lines := bytes.Count(raw, []byte("\n")); lines > 2*401+2 {
		t.Fatalf("the file holds %d lines after 1,240 changes", lines)
	}
	want := 0
	for i := range 400 {
		if i%10 != 0 && c.t.Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*30*time.Second)) < Window {
			want += 3
		}
	}
	for name, l := range map[string]*Ledger{"a": a, "b": b, "new": open()} {
		if got := l.Spent(Window); got != want {
			t.Fatalf("%s: %d spent in the hour, want %d", name, got, want)
		}
		if got := l.Left(); got != Limit-want-100 {
			t.Fatalf("%s: %d left, want %d (b's reservation of 100 held)", name, got, Limit-want-100)
		}
	}
	held.Release()
	// a crash cut the last line short
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"t":"c","at":1,"p":40`)
	f.Close()
	if got := open().Spent(Window); got != want {
		t.Fatalf("with a cut line: %d, want %d", got, want)
	}
	hold, err := b.Reserve(50)
	if err != nil {
		t.Fatal(err)
	}
	if err := hold.Settle(5); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*Ledger{"a": a, "new": open()} {
		if got, left := l.Spent(Window), l.Left(); got != want+5 || left != Limit-want-50 {
			t.Fatalf("%s after the cut line: %d spent, %d left; want %d, %d", name, got, left, want+5, Limit-want-50)
		}
	}
}
