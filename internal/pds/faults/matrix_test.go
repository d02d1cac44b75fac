package faults_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
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

// ---- the fault matrix ----

// faultTimeout is the client's response-header timeout in the matrix: a
// request the proxy holds is given up after this long.
const faultTimeout = 4 * time.Second

// faultCase is one fault (or combination) armed during an operation; w is
// the occurrence of the applyWrites to spoil (1 for a one-batch
// operation, 2 for a multi-batch one: one batch landed before it).
type faultCase struct {
	name string
	// faults: reads is how many getRepo requests the operation makes
	// before its first write (1; 0 when it is planned on the client's own
	// last commit without asking)
	faults func(w, reads int) []pdstest.Fault
	// ownRead: the fault is on the operation's own read, which an
	// operation planned without asking does not make (not run with those)
	ownRead bool
	// budgetError: the only acceptable failure is a clear budget error
	// (nothing written) or an incomplete operation.
	budgetError bool
}

func onWrite(kind pdstest.FaultKind, f func(*pdstest.Fault)) func(w, reads int) []pdstest.Fault {
	return func(w, _ int) []pdstest.Fault {
		x := pdstest.Fault{Method: pdstest.ApplyWrites, Kind: kind, Nth: w}
		if f != nil {
			f(&x)
		}
		return []pdstest.Fault{x}
	}
}

// withReadBack adds a fault on every getRepo after the operation's own
// reads: those read back after the spoiled write.
func withReadBack(write func(w, reads int) []pdstest.Fault, kind pdstest.FaultKind, every bool) func(w, reads int) []pdstest.Fault {
	return func(w, reads int) []pdstest.Fault {
		return append(write(w, reads), pdstest.Fault{Method: pdstest.GetRepo, Kind: kind, Nth: reads + 1, Every: every})
	}
}

var faultCases = []faultCase{
	{name: "drop after forward", faults: onWrite(pdstest.DropAfterForward, nil)},
	{name: "drop after forward, every write", faults: onWrite(pdstest.DropAfterForward, func(f *pdstest.Fault) { f.Every = true })},
	{name: "500 after commit", faults: onWrite(pdstest.Status5xxAfterCommit, nil)},
	{name: "502 after commit", faults: onWrite(pdstest.Status5xxAfterCommit, func(f *pdstest.Fault) { f.Status = 502 })},
	{name: "504, lands 20ms late", faults: onWrite(pdstest.Late, func(f *pdstest.Fault) { f.Delay = 20 * time.Millisecond })},
	{name: "504, lands 100ms late", faults: onWrite(pdstest.Late, func(f *pdstest.Fault) { f.Delay = 100 * time.Millisecond })},
	{name: "504, lands 250ms late", faults: onWrite(pdstest.Late, func(f *pdstest.Fault) { f.Delay = 250 * time.Millisecond })},
	{name: "429 Retry-After 1s", faults: onWrite(pdstest.RateLimit, func(f *pdstest.Fault) { f.RetryAfter = "1" })},
	{name: "429 Retry-After ten years", faults: onWrite(pdstest.RateLimit, func(f *pdstest.Fault) { f.RetryAfter = "315360000" }), budgetError: true},
	{name: "413 once", faults: onWrite(pdstest.TooLarge, nil)},
	{name: "413 every write", faults: onWrite(pdstest.TooLarge, func(f *pdstest.Fault) { f.Every = true })},
	{name: "hang, not forwarded", faults: onWrite(pdstest.Hang, nil)},
	{name: "hang after forward", faults: onWrite(pdstest.HangAfterForward, nil)},
	{name: "endless getRepo body", ownRead: true, faults: func(int, int) []pdstest.Fault {
		return []pdstest.Fault{{Method: pdstest.GetRepo, Kind: pdstest.EndlessBody, Every: true}}
	}},
	{name: "corrupted CAR", ownRead: true, faults: func(int, int) []pdstest.Fault {
		return []pdstest.Fault{{Method: pdstest.GetRepo, Kind: pdstest.CorruptCAR, Every: true}}
	}},
	{name: "drop, endless read-back", faults: withReadBack(onWrite(pdstest.DropAfterForward, nil), pdstest.EndlessBody, true)},
	{name: "drop, corrupted read-back", faults: withReadBack(onWrite(pdstest.DropAfterForward, nil), pdstest.CorruptCAR, true)},
	{name: "502, read-back hangs once", faults: withReadBack(onWrite(pdstest.Status5xxAfterCommit, func(f *pdstest.Fault) { f.Status = 502 }), pdstest.Hang, false)},
}

// bullets returns n bullets with a note each, texts prefix+index, nested
// as given by fanout (e.g. 12, 4, 5: twelve bullets, four children each,
// five grandchildren each), and the outline they make.
func bullets(prefix string, fanout ...int) ([]intent.NewNode, []pdstest.Shape) {
	if len(fanout) == 0 {
		return nil, nil
	}
	var ns []intent.NewNode
	var ss []pdstest.Shape
	for i := range fanout[0] {
		text := fmt.Sprintf("%s%02d", prefix, i)
		kids, kidShapes := bullets(text+".", fanout[1:]...)
		ns = append(ns, intent.NewNode{Text: text, Note: "note of " + text, Children: kids})
		ss = append(ss, pdstest.Shape{Text: text, Note: "note of " + text, Children: kidShapes})
	}
	return ns, ss
}

// opKind is an operation of the matrix: the outline it starts from, the
// operation, the outline it must make, and how an incomplete one is
// recovered.
type opKind struct {
	name string
	// nth is the applyWrites to spoil (see faultCase).
	nth int
	// sign is +1 when the operation creates records, -1 when it deletes.
	sign int
	// recovery of an incomplete operation: "resume" (then the outline
	// must be the intended one) or "undo" (the prior one).
	recovery string
	// setup builds the prior outline with eng (directly on the PDS) and
	// returns it, the intended outline, and the operation.
	setup func(t *testing.T, ctx context.Context, eng *outline.Engine, did string) (prior, intended []pdstest.Shape, run func(ctx context.Context, eng *outline.Engine) (*pdstest.OpReport, error))
	// trusted: the client under test makes a commit of its own first
	// (Target's layout, which the shapes do not show), so that the
	// operation is planned on it without asking the PDS (store.Known)
	trusted bool
}

// priorOutline is where every insert starts: A (with a note), Target with
// one child, Z.
func priorOutline() ([]intent.NewNode, []pdstest.Shape) {
	return []intent.NewNode{{Text: "A", Note: "note of A"}, {Text: "Target", Children: []intent.NewNode{{Text: "T1", Note: "note of T1"}}}, {Text: "Z"}},
		[]pdstest.Shape{{Text: "A", Note: "note of A"}, {Text: "Target", Children: []pdstest.Shape{{Text: "T1", Note: "note of T1"}}}, {Text: "Z"}}
}

// keyOf finds the record key of the top-level bullet text, reading the
// repository back through the oracle.
func keyOf(t *testing.T, ctx context.Context, did, text string) string {
	t.Helper()
	tr := pdstest.ReadBack(t, ctx, srv, did)
	for _, n := range tr.Roots {
		if n.Text() == text {
			return n.Rec.RKey
		}
	}
	t.Fatalf("no top-level bullet %q", text)
	return ""
}

func insertUnderTarget(fanout ...int) func(t *testing.T, ctx context.Context, eng *outline.Engine, did string) ([]pdstest.Shape, []pdstest.Shape, func(context.Context, *outline.Engine) (*pdstest.OpReport, error)) {
	return func(t *testing.T, ctx context.Context, eng *outline.Engine, did string) ([]pdstest.Shape, []pdstest.Shape, func(context.Context, *outline.Engine) (*pdstest.OpReport, error)) {
		pn, prior := priorOutline()
		if _, err := pdstest.InsertOp(ctx, eng, "", pn); err != nil {
			t.Fatal(err)
		}
		target := keyOf(t, ctx, did, "Target")
		ns, ss := bullets("b", fanout...)
		_, intended := priorOutline()
		intended[1].Children = append(intended[1].Children, ss...)
		return prior, intended, func(ctx context.Context, eng *outline.Engine) (*pdstest.OpReport, error) {
			return pdstest.InsertOp(ctx, eng, target, ns)
		}
	}
}

var opKinds = []opKind{
	{name: "insert 1+1 note on our own last commit", nth: 1, sign: 1, recovery: "undo", setup: insertUnderTarget(1), trusted: true},
	{name: "insert 50+50 notes", nth: 1, sign: 1, recovery: "undo", setup: insertUnderTarget(50)},
	{name: "insert 300+300 notes, 3 levels", nth: 2, sign: 1, recovery: "resume", setup: insertUnderTarget(12, 4, 5)},
	{name: "delete subtree of 301+301", nth: 2, sign: -1, recovery: "undo", setup: func(t *testing.T, ctx context.Context, eng *outline.Engine, did string) ([]pdstest.Shape, []pdstest.Shape, func(context.Context, *outline.Engine) (*pdstest.OpReport, error)) {
		kids, kidShapes := bullets("d", 12, 4, 5)
		pn, intended := priorOutline()
		pn = append(pn, intent.NewNode{Text: "Doomed", Note: "note of Doomed", Children: kids})
		if _, err := pdstest.InsertOp(ctx, eng, "", pn); err != nil {
			t.Fatal(err)
		}
		_, prior := priorOutline()
		prior = append(prior, pdstest.Shape{Text: "Doomed", Note: "note of Doomed", Children: kidShapes})
		doomed := keyOf(t, ctx, did, "Doomed")
		return prior, intended, func(ctx context.Context, eng *outline.Engine) (*pdstest.OpReport, error) {
			return pdstest.DeleteSubtreeOp(ctx, eng, doomed)
		}
	}},
}

// matrixLines collects one line per run, printed in order at the end.
var (
	matrixMu    sync.Mutex
	matrixLines = map[string]string{}
)

// TestFaultMatrix runs every operation of opKinds under every fault of
// faultCases, each on a fresh account whose client goes through a fault
// proxy, and checks with the oracle (listRecords, straight from the
// reference PDS) that the repository is exactly the intended outline, or
// exactly the prior one: after the operation, after recovering it (resume
// or undo) when it did not finish, and after undoing it. Nothing may be
// duplicated, lost, detached, or a note apart from its node.
func TestFaultMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault matrix writes about 40,000 records")
	}
	var order []string
	for _, fc := range faultCases {
		for _, ok := range opKinds {
			if !(fc.ownRead && ok.trusted) {
				order = append(order, fc.name+" × "+ok.name)
			}
		}
	}
	t.Cleanup(func() {
		matrixMu.Lock()
		defer matrixMu.Unlock()
		t.Logf("fault matrix (%d of %d runs; requests counted over the whole run, recovery included):", len(matrixLines), len(order))
		for _, k := range order {
			if l, ok := matrixLines[k]; ok {
				t.Logf("  %-62s %s", k, l)
			}
		}
	})
	for _, fc := range faultCases {
		for _, ok := range opKinds {
			if fc.ownRead && ok.trusted {
				continue // it makes no read of its own to spoil
			}
			t.Run(fc.name+"/"+ok.name, func(t *testing.T) {
				t.Parallel()
				runFaultCase(t, fc, ok)
			})
		}
	}
}

// run is one run's account, clients and engines.
type faultRun struct {
	t      *testing.T
	did    string
	proxy  *pdstest.FaultProxy
	repo   *pds.Repo
	eng    *outline.Engine
	prior  []pdstest.Shape
	intent []pdstest.Shape
	// notes for the matrix line
	outcome []string
	flags   []string
}

func (r *faultRun) note(format string, args ...any) {
	r.outcome = append(r.outcome, fmt.Sprintf(format, args...))
}

// check reads the repository back and compares it with want; it returns
// whether it matched, recording every problem as a test error.
func (r *faultRun) check(ctx context.Context, stage string, want []pdstest.Shape) bool {
	r.t.Helper()
	tr := pdstest.ReadBack(r.t, ctx, srv, r.did)
	ok := r.consistent(stage, tr)
	if d := pdstest.DiffShapes(tr.Shape(), want); d != "" {
		r.t.Errorf("%s: the repository is not the expected outline: %s", stage, d)
		r.flags = append(r.flags, stage+": not the expected outline")
		return false
	}
	return ok
}

// consistent checks tr for detached nodes, stray notes and duplicates.
func (r *faultRun) consistent(stage string, tr *pdstest.Tree) bool {
	r.t.Helper()
	problems := tr.CheckConsistent(true)
	if len(problems) == 0 {
		return true
	}
	dups, detached := len(tr.Duplicates()), len(tr.Detached)
	r.flags = append(r.flags, fmt.Sprintf("%s: %d duplicate(s), %d detached, %d stray note(s)", stage, dups, detached, len(tr.StrayNotes)))
	if len(problems) > 5 {
		problems = append(problems[:5], fmt.Sprintf("… %d more", len(problems)-5))
	}
	r.t.Errorf("%s: %s", stage, strings.Join(problems, "; "))
	return false
}

var rfc3339 = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)

func runFaultCase(t *testing.T, fc faultCase, ok opKind) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := pdstest.NewAccount(t, srv)
	did := a.DID.String()

	// the prior outline, written directly
	direct := pdstest.Login(t, srv, a, t.TempDir(), nil)
	setupEng, err := pdstest.NewEngine(direct, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prior, intended, run := ok.setup(t, ctx, setupEng, did)
	r := &faultRun{t: t, did: did, prior: prior, intent: intended}
	if !r.check(ctx, "prior", prior) {
		t.FailNow()
	}
	priorRecords := pdstest.RecordCount(pdstest.ReadBack(t, ctx, srv, did))

	// the client under test: through the proxy, bounded as the server's
	// (a shorter header timeout, a smaller CAR bound), with a budget
	r.proxy = pdstest.NewFaultProxy(t, srv.URL)
	dir := t.TempDir()
	hc := pds.NewHTTPClient(pds.HTTPConfig{ResponseHeaderTimeout: faultTimeout})
	c, _, err := pds.Login{PDS: r.proxy.URL, Identifier: a.Handle, Password: a.AppPassword, Dir: dir, HTTP: hc}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.repo = pds.New(c, a.DID)
	r.repo.Limits = pds.Limits{MaxCAR: 8 << 20}
	ledger, err := budget.New(filepath.Join(dir, "budget.json"))
	if err != nil {
		t.Fatal(err)
	}
	r.repo.Budget = ledger
	if r.eng, err = pdstest.NewEngine(r.repo, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.Tree(ctx); err != nil { // warm: the operation's read is a getRepo?since
		t.Fatal(err)
	}
	if ok.trusted {
		target := keyOf(t, ctx, did, "Target")
		layout := "h2"
		if _, err := r.eng.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Edit{Node: target, Layout: &layout}).Plan(p) }); err != nil {
			t.Fatal(err)
		}
	}
	trusted := r.repo.Stats.Trusted.Load()

	var armed []*pdstest.Armed
	reads := 1
	if ok.trusted {
		reads = 0
	}
	for _, f := range fc.faults(ok.nth, reads) {
		armed = append(armed, r.proxy.Arm(f))
	}
	rep, opErr := run(ctx, r.eng)
	if err := r.proxy.WaitLate(ctx); err != nil {
		t.Fatal(err)
	}
	fired := 0
	for _, x := range armed {
		fired += x.Fired()
	}
	if fired == 0 {
		t.Errorf("no fault fired: the case tests nothing")
	}
	r.proxy.Disarm()
	events := r.proxy.Events()
	if ok.trusted && r.repo.Stats.Trusted.Load() == trusted {
		t.Errorf("the operation was not planned on the client's own last commit: the case tests the asking path")
	}

	// the repository right after the call
	after := pdstest.ReadBack(t, ctx, srv, did)
	delta := pdstest.RecordCount(after) - priorRecords
	r.consistent("after the call", after)
	switch {
	case opErr == nil:
		r.note("landed whole")
		r.check(ctx, "after the call", intended)
	case rep != nil:
		r.note("%s (%d/%d batches, %d/%d writes reported landed)", pdstest.ErrorKind(opErr), rep.Landed, rep.Batches, rep.LandedWrites, rep.Writes)
		// a batch whose outcome could not be read back may have landed too:
		// the report must say so, and then either count is exact
		if delta != ok.sign*rep.LandedWrites && !(rep.UnknownWrites > 0 && delta == ok.sign*(rep.LandedWrites+rep.UnknownWrites)) {
			t.Errorf("the operation reports %d writes landed, the repository changed by %+d records: %v", rep.LandedWrites, delta, opErr)
			r.flags = append(r.flags, fmt.Sprintf("report says %d landed, repository changed by %+d", rep.LandedWrites, delta))
		}
	default:
		r.note("error (%s)", pdstest.ErrorKind(opErr))
		if delta != 0 {
			t.Errorf("the call failed with no operation to resume or undo (%v), yet the repository changed by %+d records", opErr, delta)
			r.flags = append(r.flags, fmt.Sprintf("error with no operation, yet %+d records landed", delta))
		} else {
			r.note("nothing written")
		}
	}
	if opErr != nil {
		t.Logf("the call: %v", opErr)
	}
	if fc.budgetError && opErr != nil && !errors.Is(opErr, outline.ErrBudget) && !errors.Is(opErr, outline.ErrIncomplete) {
		t.Errorf("want a budget error or an incomplete operation, got %s: %v", pdstest.ErrorKind(opErr), opErr)
	}
	if fc.budgetError && opErr != nil {
		// clear: it names when writes are free again — the server's pause
		// capped to what a write limit can mean (a day at most), never
		// years away — and does not advise waiting a minute
		msg := opErr.Error()
		at := rfc3339.FindString(msg)
		when, perr := time.Parse(time.RFC3339, at)
		if perr != nil || when.After(time.Now().Add(24*time.Hour+time.Minute)) || strings.Contains(msg, "wait a minute") {
			t.Errorf("the error should give the capped resume time and not advise waiting a minute: %v", opErr)
			r.flags = append(r.flags, "unclear budget error")
		}
	}

	// recovery, with the fault over (a server pause lifted)
	if !ledger.PausedUntil().IsZero() {
		fresh, err := budget.New("")
		if err != nil {
			t.Fatal(err)
		}
		r.repo.Budget = fresh
	}
	inc := pdstest.IncompleteOps(r.eng)
	if opErr == nil && len(inc) > 0 {
		t.Errorf("the call succeeded but left incomplete operations: %+v", inc)
	}
	if rep != nil && opErr != nil && (len(inc) != 1 || inc[0].ID != rep.ID) {
		t.Errorf("the failed operation %s is not the one incomplete operation: %+v", rep.ID, inc)
	}
	done := opErr == nil
	for _, op := range inc {
		switch ok.recovery {
		case "resume":
			if _, err := pdstest.ResumeOp(ctx, r.eng, op.ID); err != nil {
				t.Errorf("resume %s: %v", op.ID, err)
				r.note("resume failed (%s)", pdstest.ErrorKind(err))
				continue
			}
			r.note("resumed")
			done = r.check(ctx, "after resume", intended)
		default:
			if _, err := pdstest.UndoOp(ctx, r.eng, op.ID); err != nil {
				t.Errorf("undo %s: %v", op.ID, err)
				r.note("undo failed (%s)", pdstest.ErrorKind(err))
				continue
			}
			r.note("undone")
			r.check(ctx, "after undo of the incomplete operation", prior)
		}
	}
	if opErr != nil && len(inc) == 0 && delta == 0 {
		// nothing written, nothing recorded: the same call again lands
		if _, err := run(ctx, r.eng); err != nil {
			t.Errorf("the call again, without the fault: %v", err)
			r.note("retry failed (%s)", pdstest.ErrorKind(err))
		} else {
			r.note("retried: landed")
			done = r.check(ctx, "after the retry", intended)
		}
	}
	// and the whole operation undone restores the prior outline
	if done {
		if _, err := pdstest.UndoOp(ctx, r.eng, ""); err != nil {
			t.Errorf("undo after the operation landed: %v", err)
			r.note("undo failed (%s)", pdstest.ErrorKind(err))
		} else if r.check(ctx, "after undo", prior) {
			r.note("undo restored the prior outline")
		}
	}
	var evs []string
	for _, e := range events {
		evs = append(evs, e.String())
	}
	line := strings.Join(r.outcome, " → ")
	if len(r.flags) == 0 {
		line += " | no duplicate, nothing detached"
	} else {
		line += " | PROBLEMS: " + strings.Join(r.flags, "; ")
	}
	line += " | faults: " + strings.Join(evs, ", ")
	line += fmt.Sprintf(" | requests: %d applyWrites, %d getRepo, %d getLatestCommit, %d listRecords",
		r.proxy.Requests(pdstest.ApplyWrites), r.proxy.Requests(pdstest.GetRepo), r.proxy.Requests(pdstest.GetLatestCommit), r.proxy.Requests(pdstest.ListRecords))
	matrixMu.Lock()
	matrixLines[fc.name+" × "+ok.name] = line
	matrixMu.Unlock()
	t.Logf("%s × %s: %s", fc.name, ok.name, line)
}
