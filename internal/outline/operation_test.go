package outline_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// faultRepo is the embedded store with hooks around each Apply, to stand
// for a PDS that fails in the ways the fault matrix names.
type faultRepo struct {
	*store.Local
	mu    sync.Mutex
	calls int
	// before runs before Apply number n (0-based); a non-nil error is
	// returned without committing.
	before func(n int) error
	// after runs after Apply number n committed; a non-nil error is
	// returned instead of the result (the commit stays: a lost answer).
	after func(n int) error
}

func (f *faultRepo) Apply(ctx context.Context, swap string, ws []store.Write) (*store.Result, error) {
	f.mu.Lock()
	n := f.calls
	f.calls++
	f.mu.Unlock()
	if f.before != nil {
		if err := f.before(n); err != nil {
			return nil, err
		}
	}
	res, err := f.Local.Apply(ctx, swap, ws)
	if err == nil && f.after != nil {
		if aerr := f.after(n); aerr != nil {
			return nil, aerr
		}
	}
	return res, err
}

func openLocal(t testing.TB, dir string) *store.Local {
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// nodesWithNotes is n top-level bullets "b0".."bN-1", each with a note and
// two children: 4n records.
func nodesWithNotes(n int) []intent.NewNode {
	ns := make([]intent.NewNode, n)
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("b%d", i), Note: fmt.Sprintf("note %d", i),
			Children: []intent.NewNode{{Text: fmt.Sprintf("b%d.0", i)}, {Text: fmt.Sprintf("b%d.1", i)}}}
	}
	return ns
}

// checkWhole reads the repository back and checks that it is exactly the
// outline nodesWithNotes(n) would make (in order), plus extra top-level
// texts anywhere: no duplicate, nothing missing, nothing detached, every
// note beside its node.
func checkWhole(t *testing.T, repo store.Repository, n int, extra ...string) {
	t.Helper()
	s, err := repo.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tr := outline.Build(s)
	if tr.Detached.Len() > 0 {
		t.Fatalf("%d detached bullet(s), e.g. %s", tr.Detached.Len(), tr.Detached.At(0).Key())
	}
	for k := range tr.Notes.All() {
		if tr.Nodes.Get(k) == nil {
			t.Fatalf("note %s without its node", k)
		}
	}
	var got []string
	for r := range tr.Roots.Items() {
		if slicesContains(extra, r.Str("text")) {
			continue
		}
		got = append(got, r.Str("text"))
		if r.Note == nil || r.Note.Value.Get("text") != "note "+strings.TrimPrefix(r.Str("text"), "b") {
			t.Fatalf("%s: note missing or wrong", r.Str("text"))
		}
		if r.Children.Len() != 2 || r.Children.At(0).Str("text") != r.Str("text")+".0" || r.Children.At(1).Str("text") != r.Str("text")+".1" {
			t.Fatalf("%s: children wrong", r.Str("text"))
		}
	}
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("b%d", i))
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("top level: got %d bullets %v…, want %d", len(got), head(got), len(want))
	}
	if c := tr.Roots.Len() - n; c != len(extra) {
		t.Fatalf("%d extra top-level bullet(s), want %d", c, len(extra))
	}
}

func slicesContains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func head(xs []string) []string {
	if len(xs) > 6 {
		return xs[:6]
	}
	return xs
}

func insertTop(ctx context.Context, e *outline.Engine, ns []intent.NewNode) (*outline.Outcome, error) {
	return e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Pos: outline.Position{}, Nodes: ns}.Plan(p) })
}

// A multi-batch insert is one operation; every commit holds nodes with
// their notes, and undo rolls the whole of it back.
func TestMultiBatchOperationAndUndo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openLocal(t, dir+"/repo")
	var seen []int
	f := &faultRepo{Local: l}
	f.before = func(n int) error { return nil }
	e := outline.New(f)
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	out, err := insertTop(ctx, e, nodesWithNotes(250)) // 1,000 writes
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Commits) < 5 || out.Op == nil || out.Op.State != outline.OpDone {
		t.Fatalf("commits %d, op %+v", len(out.Commits), out.Op)
	}
	for i, end := range out.Plan.Batches {
		start := 0
		if i > 0 {
			start = out.Plan.Batches[i-1]
		}
		seen = append(seen, end-start)
		// a node's note is in the node's commit
		for _, w := range out.Plan.Writes[start:end] {
			if w.Collection == lexicon.Note {
				found := false
				for _, x := range out.Plan.Writes[start:end] {
					if x.Collection == lexicon.Node && x.RKey == w.RKey {
						found = true
					}
				}
				if !found {
					t.Fatalf("batch %d: note %s apart from its node", i, w.RKey)
				}
			}
		}
	}
	checkWhole(t, l, 250)
	if _, err := e.Undo(ctx, 1, "", false); err != nil {
		t.Fatal(err)
	}
	s, _ := l.Snapshot(ctx)
	if len(s.Records) != 0 {
		t.Fatalf("after undo: %d records (batches %v)", len(s.Records), seen)
	}
}

// A conflict between batches (a person editing the same repository) is
// ridden out: the rest is re-checked and committed, nothing is lost or
// duplicated, and the person's bullets stay.
func TestConflictBetweenBatches(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openLocal(t, dir+"/repo")
	human := outline.New(l)
	f := &faultRepo{Local: l}
	edits := 0
	f.before = func(n int) error {
		if n%2 == 1 && edits < 3 { // someone writes before every other batch
			edits++
			enginetest.Insert(t, human, outline.Position{}, fmt.Sprintf("human %d", edits))
		}
		return nil
	}
	e := outline.New(f)
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	out, err := insertTop(ctx, e, nodesWithNotes(200)) // 800 writes, 4+ batches
	if err != nil {
		t.Fatal(err)
	}
	if out.Op.State != outline.OpDone || edits != 3 {
		t.Fatalf("op %+v, %d human edits", out.Op, edits)
	}
	checkWhole(t, l, 200, "human 1", "human 2", "human 3")
}

// An answer lost after the commit (a 5xx or a dropped connection after the
// PDS committed) is resolved by reading the repository: nothing twice.
func TestLostAnswerNoDuplicate(t *testing.T) {
	for _, at := range []int{0, 2} {
		t.Run(fmt.Sprintf("batch%d", at), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			l := openLocal(t, dir+"/repo")
			f := &faultRepo{Local: l}
			f.after = func(n int) error {
				if n == at {
					return fmt.Errorf("%w: answer lost after commit", store.ErrConflict)
				}
				return nil
			}
			e := outline.New(f)
			if _, err := insertTop(ctx, e, nodesWithNotes(150)); err != nil {
				t.Fatal(err)
			}
			checkWhole(t, l, 150)
		})
	}
}

// A write that lands late (the client saw a gateway error; the PDS
// committed afterwards) leaves an incomplete operation; resume finds the
// landed batch by its record keys and finishes without duplicates.
func TestLateLandingThenResume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openLocal(t, dir+"/repo")
	f := &faultRepo{Local: l}
	var late []store.Write
	var lateSwap string
	f.before = func(n int) error {
		if n == 1 {
			return errors.New("504 gateway timeout")
		}
		return nil
	}
	e := outline.New(&lateRepo{faultRepo: f, late: &late, lateSwap: &lateSwap})
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	_, err := insertTop(ctx, e, nodesWithNotes(150))
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	rep := oe.Data.(outline.OpReport)
	if rep.Landed != 1 {
		t.Fatalf("landed %d batches, want 1", rep.Landed)
	}
	// now the gateway's request lands
	if _, err := l.Apply(ctx, lateSwap, late); err != nil {
		t.Fatal(err)
	}
	inc := e.Incomplete()
	if len(inc) != 1 || inc[0].ID != rep.ID {
		t.Fatalf("incomplete: %+v", inc)
	}
	if _, err := e.Resume(ctx, rep.ID, false); err != nil {
		t.Fatal(err)
	}
	checkWhole(t, l, 150)
	if len(e.Incomplete()) != 0 {
		t.Fatal("still incomplete after resume")
	}
}

// lateRepo remembers the batch that failed with a gateway error so the
// test can land it later.
type lateRepo struct {
	*faultRepo
	late     *[]store.Write
	lateSwap *string
}

func (r *lateRepo) Apply(ctx context.Context, swap string, ws []store.Write) (*store.Result, error) {
	res, err := r.faultRepo.Apply(ctx, swap, ws)
	if err != nil && strings.Contains(err.Error(), "504") {
		*r.late, *r.lateSwap = ws, swap
	}
	return res, err
}

// Cancelling the call stops the operation between batches: what landed is
// reported and recorded, and undo rolls back exactly that.
func TestCancelBetweenBatchesThenUndo(t *testing.T) {
	dir := t.TempDir()
	l := openLocal(t, dir+"/repo")
	enginetest.Insert(t, outline.New(l), outline.Position{}, "before")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &faultRepo{Local: l}
	f.after = func(n int) error {
		if n == 1 {
			cancel() // the client cancels while batch 1 is in flight
		}
		return nil
	}
	e := outline.New(f)
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	_, err := insertTop(ctx, e, nodesWithNotes(200))
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want incomplete, got %v", err)
	}
	rep := oe.Data.(outline.OpReport)
	if rep.Landed != 2 || !strings.Contains(rep.Reason, "cancel") {
		t.Fatalf("report %+v", rep)
	}
	s, _ := l.Snapshot(context.Background())
	if got := len(s.Records); got != 1+rep.LandedWrites {
		t.Fatalf("%d records, want %d", got, 1+rep.LandedWrites)
	}
	// the plain undo reverts the newest operation, which is this one
	if _, err := e.Undo(context.Background(), 1, "", false); err != nil {
		t.Fatal(err)
	}
	if got := enginetest.Texts(t, e, ""); !reflect.DeepEqual(got, []string{"before"}) {
		t.Fatalf("after undo: %v", got)
	}
	if ops, _ := e.Operations(); ops[len(ops)-1].State == outline.OpIncomplete {
		t.Fatalf("operation still incomplete after undo: %+v", ops)
	}
}

// Undo refuses to delete a bullet that gained a child since.
func TestUndoRefusesToDetach(t *testing.T) {
	ctx := context.Background()
	l := openLocal(t, t.TempDir())
	e := outline.New(l)
	keys := enginetest.Insert(t, e, outline.Position{}, "parent")
	other := outline.New(l) // someone else, not in this engine's journal
	enginetest.Insert(t, other, outline.Position{Parent: keys[0]}, "their child")
	other2 := outline.New(l)
	_ = other2
	before, _ := l.Snapshot(ctx)
	// the newest operation in e's journal is the insert of "parent"
	_, err := e.Undo(ctx, 1, "", false)
	if !errors.Is(err, outline.ErrHasChildren) {
		t.Fatalf("want has-children refusal, got %v", err)
	}
	after, _ := l.Snapshot(ctx)
	if after.Commit != before.Commit {
		t.Fatal("the refused undo wrote")
	}
}

// Operations are shared by processes using one data directory: each sees
// the other's, and undo takes the newest, whoever wrote it.
func TestOperationsSharedByProcesses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l1 := openLocal(t, dir+"/repo")
	l2 := openLocal(t, dir+"/repo")
	e1, e2 := outline.New(l1), outline.New(l2)
	for _, e := range []*outline.Engine{e1, e2} {
		if err := e.KeepOperations(dir); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.Insert(t, e1, outline.Position{}, "one")
	enginetest.Insert(t, e2, outline.Position{}, "two")
	enginetest.Insert(t, e1, outline.Position{}, "three")
	ops1, _ := e1.Operations()
	ops2, _ := e2.Operations()
	if len(ops1) != 3 || len(ops2) != 3 {
		t.Fatalf("operations seen: %d and %d, want 3 each", len(ops1), len(ops2))
	}
	if _, err := e2.Undo(ctx, 2, "", false); err != nil {
		t.Fatal(err)
	}
	if got := enginetest.Texts(t, e1, ""); !reflect.DeepEqual(got, []string{"one"}) {
		t.Fatalf("after undo of 2 from the other process: %v", got)
	}
	if _, err := e1.Undo(ctx, 1, "", false); err != nil {
		t.Fatal(err)
	}
	if got := enginetest.Texts(t, e1, ""); len(got) != 0 {
		t.Fatalf("after the last undo: %v", got)
	}
}

// ---- kill -9 during a multi-batch operation on the embedded store ----

const killChildEnv = "BULLETED_KILL_CHILD"

// TestMain lets the test binary act as the process that is killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	os.Exit(m.Run())
}

// killChild inserts 500 bullets with notes and children (2,000 writes, 10+
// batches), printing a line before each batch; the parent kills it.
func killChild(dir string) {
	l, err := store.OpenLocal(dir + "/repo")
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	e := outline.New(l)
	if err := e.KeepOperations(dir); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	ctx := outline.WithProgress(context.Background(), func(done, total, _, _ int) {
		fmt.Printf("BATCH %d %d\n", done, total)
		os.Stdout.Sync()
	})
	if _, err := insertTop(ctx, e, nodesWithNotes(500)); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("DONE")
	os.Exit(0)
}

func TestKillDuringOperation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts subprocesses")
	}
	for _, tc := range []struct {
		name   string
		killAt int // kill once this many batches are reported done
		resume bool
	}{
		{"kill after 1, resume", 1, true},
		{"kill after 4, resume", 4, true},
		{"kill after 3, undo", 3, false},
		{"kill after 7, undo", 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// something there before, which undo must leave
			l0 := openLocal(t, dir+"/repo")
			enginetest.Insert(t, outline.New(l0), outline.Position{}, "kept")
			l0.Close()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(stdout)
			killed := false
			for sc.Scan() {
				var done, total int
				if _, err := fmt.Sscanf(sc.Text(), "BATCH %d %d", &done, &total); err == nil && done >= tc.killAt {
					cmd.Process.Signal(syscall.SIGKILL)
					killed = true
					break
				}
				if strings.HasPrefix(sc.Text(), "ERR") || sc.Text() == "DONE" {
					t.Fatalf("child: %s", sc.Text())
				}
			}
			cmd.Wait()
			if !killed {
				t.Fatal("the child finished before it could be killed")
			}
			l := openLocal(t, dir+"/repo")
			e := outline.New(l)
			if err := e.KeepOperations(dir); err != nil {
				t.Fatal(err)
			}
			inc := e.Incomplete()
			if len(inc) != 1 {
				t.Fatalf("incomplete operations after the kill: %+v", inc)
			}
			if tc.resume {
				if _, err := e.Resume(context.Background(), inc[0].ID, false); err != nil {
					t.Fatal(err)
				}
				checkWhole(t, l, 500, "kept")
			} else {
				if _, err := e.Undo(context.Background(), 0, inc[0].ID, false); err != nil {
					t.Fatal(err)
				}
				if got := enginetest.Texts(t, e, ""); !reflect.DeepEqual(got, []string{"kept"}) {
					s, _ := l.Snapshot(context.Background())
					t.Fatalf("after undo: %d top-level (%d records)", len(got), len(s.Records))
				}
			}
			if len(e.Incomplete()) != 0 {
				t.Fatal("still incomplete")
			}
		})
	}
}

// A repository that refuses large bodies (HTTP 413) gets the batch in
// halves, never a node apart from its note.
func TestTooLargeBatchIsSplit(t *testing.T) {
	ctx := context.Background()
	l := openLocal(t, t.TempDir())
	var sizes []int
	f := &sizeLimitedRepo{Local: l, limit: 70, sizes: &sizes}
	e := outline.New(f)
	if _, err := insertTop(ctx, e, nodesWithNotes(100)); err != nil {
		t.Fatal(err)
	}
	checkWhole(t, l, 100)
	for _, n := range sizes {
		if n > 70 {
			t.Fatalf("a batch of %d writes was committed past the limit", n)
		}
	}
}

type sizeLimitedRepo struct {
	*store.Local
	limit int
	sizes *[]int
}

func (r *sizeLimitedRepo) Apply(ctx context.Context, swap string, ws []store.Write) (*store.Result, error) {
	if len(ws) > r.limit {
		return nil, fmt.Errorf("%w: 413 request entity too large", store.ErrBatchTooLarge)
	}
	res, err := r.Local.Apply(ctx, swap, ws)
	if err == nil {
		*r.sizes = append(*r.sizes, len(ws))
	}
	return res, err
}

// Reads are served while a write is in flight: the engine holds no lock
// across the repository's I/O.
func TestReadWhileWriteInFlight(t *testing.T) {
	ctx := context.Background()
	l := openLocal(t, t.TempDir())
	enginetest.Insert(t, outline.New(l), outline.Position{}, "there")
	release := make(chan struct{})
	entered := make(chan struct{})
	f := &faultRepo{Local: l}
	f.before = func(n int) error {
		close(entered)
		<-release // the PDS hangs
		return nil
	}
	e := outline.New(f)
	done := make(chan error, 1)
	go func() {
		_, err := insertTop(ctx, e, nodesWithNotes(1))
		done <- err
	}()
	<-entered
	tr, err := e.Tree(ctx) // would block behind the write if a lock were held
	if err != nil || tr.Roots.Len() != 1 || tr.Roots.At(0).Str("text") != "there" {
		t.Fatalf("read during a write: %v", err)
	}
	if _, err := e.DoFunc(ctx, true, func(p *outline.Planner) error {
		return (intent.Insert{Pos: outline.Position{}, Nodes: nodesWithNotes(1)}).Plan(p)
	}); err != nil {
		t.Fatalf("dry run during a write: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// An operation's record is written whole once; each landed batch appends a
// short line instead of rewriting it, so a long operation's record costs
// about one plan, not one plan per batch. A line torn by a crash reads as
// the state before it, and a record of the earlier one-object format reads.
func TestOperationRecordAppends(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := outline.New(openLocal(t, dir+"/repo"))
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	out, err := insertTop(ctx, e, nodesWithNotes(500)) // 2,000 writes, 10 batches
	if err != nil {
		t.Fatal(err)
	}
	path := dir + "/ops/" + out.Op.ID + ".json"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	plan := len(lines[0])
	// the plan, then a line per landed batch (the last one's says done)
	if len(out.Commits) < 10 || len(lines) != 1+len(out.Commits) {
		t.Fatalf("%d commits, %d lines in the record", len(out.Commits), len(lines))
	}
	if len(raw) > plan+plan/10 {
		t.Fatalf("record %d bytes for a plan of %d: rewritten, not appended", len(raw), plan)
	}
	// a fresh engine (another process) reads the state of the last line
	e2 := outline.New(openLocal(t, dir+"/repo"))
	if err := e2.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	ops, err := e2.Operations()
	if err != nil || len(ops) != 1 || ops[0].State != outline.OpDone || ops[0].Landed != len(out.Commits) {
		t.Fatalf("operations: %+v %v", ops, err)
	}
	// torn last line: the state before it (read by a process started
	// after the tear: a journal keeps its listing until a journal writes,
	// and these edits bypass it)
	fresh := func() *outline.Engine {
		e := outline.New(openLocal(t, dir+"/repo"))
		if err := e.KeepOperations(dir); err != nil {
			t.Fatal(err)
		}
		return e
	}
	torn := strings.Join(lines[:len(lines)-1], "\n") + "\n" + lines[len(lines)-1][:10]
	if err := os.WriteFile(path, []byte(torn), 0o600); err != nil {
		t.Fatal(err)
	}
	ops, err = fresh().Operations()
	if err != nil || len(ops) != 1 || ops[0].Landed != len(out.Commits)-1 || ops[0].State == outline.OpDone {
		t.Fatalf("after a torn line: %+v %v", ops, err)
	}
	// the earlier format: one object
	if err := os.WriteFile(path, []byte(lines[0]), 0o600); err != nil {
		t.Fatal(err)
	}
	ops, err = fresh().Operations()
	if err != nil || len(ops) != 1 || ops[0].Landed != 0 {
		t.Fatalf("one-object record: %+v %v", ops, err)
	}
}
