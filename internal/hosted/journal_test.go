package hosted

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// twoEngines signs one new account in on two instances on one database and
// returns both instances and the account's user (engine, journal) on each.
func twoEngines(t *testing.T, name string) (a, b *instance, ua, ub *user) {
	t.Helper()
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	a = e.start(t, nil)
	b = e.start(t, func(c *Config) { c.PublicURL = a.public })
	u := newAccount(t, p, fmt.Sprintf("%s%d", name, time.Now().UnixNano()%1e6))
	signIn(t, a, registerClient(t, a), u, "")
	ctx := context.Background()
	ua, err := a.user(ctx, u.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	ub, err = b.user(ctx, u.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	return a, b, ua, ub
}

func bullets(prefix string, n int) []intent.NewNode {
	ns := make([]intent.NewNode, n)
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("%s %d", prefix, i)}
	}
	return ns
}

func insertTop(ctx context.Context, e *outline.Engine, ns []intent.NewNode) (*outline.Outcome, error) {
	return e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Pos: outline.Position{}, Nodes: ns}.Plan(p) })
}

// nodeCount is how many app.bulleted.node records the repository holds,
// read from the PDS.
func nodeCount(t *testing.T, e *outline.Engine) int {
	t.Helper()
	s, err := e.Repo.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range s.Records {
		if r.Collection == lexicon.Node {
			n++
		}
	}
	return n
}

func opState(t *testing.T, e *outline.Engine, id string) outline.OpReport {
	t.Helper()
	ops, err := e.Operations()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.ID == id {
			return op
		}
	}
	t.Fatalf("operation %s not listed: %+v", id, ops)
	return outline.OpReport{}
}

// noOperationFiles fails if an instance's data directory holds anything of
// the journal (an ops directory or an operation file).
func noOperationFiles(t *testing.T, in *instance) {
	t.Helper()
	filepath.WalkDir(in.cfg.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && (d.Name() == "ops" || strings.HasSuffix(d.Name(), ".json") || strings.HasSuffix(d.Name(), ".lock")) {
			t.Errorf("journal file on the instance: %s", path)
		}
		return nil
	})
}

// TestJournalAcrossInstances: the operations journal is the database. An
// operation stopped part-way on one instance is listed as incomplete by
// the other, which resumes it; the first lists it done and undoes it; the
// second lists it undone. No instance keeps an operation file. Read back
// from the PDS and the operations table.
func TestJournalAcrossInstances(t *testing.T) {
	a, b, ua, ub := twoEngines(t, "journal")
	ea, eb, did := ua.env.Engine, ub.env.Engine, ua.did
	ctx := context.Background()
	// 401 bullets, three batches; the call is cancelled before the second,
	// which is sent all the same: it stops after two
	const n = 401
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cctx = outline.WithProgress(cctx, func(done, total, _, _ int) {
		if done == 1 {
			cancel()
		}
	})
	_, err := insertTop(cctx, ea, bullets("across", n))
	var oe *outline.Error
	if !errors.As(err, &oe) || oe.Kind != outline.ErrIncomplete {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	id := oe.Data.(outline.OpReport).ID
	if got := nodeCount(t, eb); got != 400 {
		t.Fatalf("%d bullets landed, want 400", got)
	}
	if rep := opState(t, eb, id); rep.State != outline.OpIncomplete || rep.Landed != 2 || rep.Batches != 3 {
		t.Fatalf("the other instance lists %+v", rep)
	}
	if inc := eb.Incomplete(); len(inc) != 1 || inc[0].ID != id {
		t.Fatalf("the other instance's incomplete operations: %+v", inc)
	}
	if _, err := eb.Resume(ctx, id, false); err != nil {
		t.Fatalf("resume on the other instance: %v", err)
	}
	if got := nodeCount(t, ea); got != n {
		t.Fatalf("after the resume: %d bullets, want %d", got, n)
	}
	if rep := opState(t, ea, id); rep.State != outline.OpDone || rep.Landed != 3 {
		t.Fatalf("the first instance lists %+v after the resume", rep)
	}
	if _, err := ea.Undo(ctx, 0, id, false); err != nil {
		t.Fatalf("undo on the first instance: %v", err)
	}
	if got := nodeCount(t, eb); got != 0 {
		t.Fatalf("after the undo: %d bullets", got)
	}
	if rep := opState(t, eb, id); rep.State != outline.OpUndone {
		t.Fatalf("the other instance lists %+v after the undo", rep)
	}
	var rows int
	if err := a.db.QueryRow(ctx, "SELECT count(*) FROM operations WHERE did = $1", did).Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d operation rows (%v), want the insert and its undo", rows, err)
	}
	noOperationFiles(t, a)
	noOperationFiles(t, b)
}

// TestJournalClaimAcrossInstances: while one instance commits an operation
// (held between two batches), the other lists it as running, refuses to
// resume or undo it, and lets it finish. When the committing instance dies
// (its claim no longer renewed, and run out), the other lists it as
// incomplete and resumes it; the dead instance's batches, if it comes
// back, land nothing twice.
func TestJournalClaimAcrossInstances(t *testing.T) {
	_, b, ua, ub := twoEngines(t, "claim")
	ea, eb := ua.env.Engine, ub.env.Engine
	ctx := context.Background()
	const n = 201 // two batches
	// run starts an insert on the first instance and returns once it is
	// held before its second batch, with the operation's id; release lets
	// it go on
	run := func(prefix string) (id string, release func() (*outline.Outcome, error)) {
		t.Helper()
		held, goOn := make(chan struct{}), make(chan struct{})
		pctx := outline.WithProgress(ctx, func(done, _, _, _ int) {
			if done == 1 {
				close(held)
				<-goOn
			}
		})
		type result struct {
			out *outline.Outcome
			err error
		}
		res := make(chan result, 1)
		go func() {
			out, err := insertTop(pctx, ea, bullets(prefix, n))
			res <- result{out, err}
		}()
		select {
		case <-held:
		case r := <-res:
			t.Fatalf("the insert ended before its second batch: %v", r.err)
		}
		ops, err := eb.Operations()
		if err != nil || len(ops) == 0 {
			t.Fatalf("the other instance lists %+v, %v", ops, err)
		}
		return ops[0].ID, func() (*outline.Outcome, error) {
			close(goOn)
			r := <-res
			return r.out, r.err
		}
	}

	id, release := run("held")
	if rep := opState(t, eb, id); rep.State != outline.OpRunning || rep.Landed != 1 {
		t.Fatalf("while it is being committed, the other instance lists %+v", rep)
	}
	if inc := eb.Incomplete(); len(inc) != 0 {
		t.Fatalf("a running operation listed as incomplete: %+v", inc)
	}
	_, err := eb.Resume(ctx, id, false)
	var oe *outline.Error
	if !errors.As(err, &oe) || oe.Kind != outline.ErrConflict || !strings.Contains(oe.Msg, "being committed right now") {
		t.Fatalf("resume of an operation another instance commits: %v", err)
	}
	if _, err := eb.Undo(ctx, 0, id, false); err == nil {
		t.Fatal("undo of an operation another instance commits was accepted")
	}
	if got := nodeCount(t, eb); got != 200 {
		t.Fatalf("%d bullets while the operation is held after its first batch, want 200", got)
	}
	if out, err := release(); err != nil || out.Op.State != outline.OpDone {
		t.Fatalf("the held operation: %v", err)
	}
	if got := nodeCount(t, eb); got != n {
		t.Fatalf("%d bullets after it finished, want %d", got, n)
	}
	if rep := opState(t, eb, id); rep.State != outline.OpDone {
		t.Fatalf("after it finished, the other instance lists %+v", rep)
	}

	// the committing instance dies: its claim is no longer renewed and
	// runs out (time passes in the database: the lease is moved, not
	// waited for)
	id, release = run("dies")
	ja := ua.journal
	ja.mu.Lock()
	l := ja.held[id]
	delete(ja.held, id)
	ja.mu.Unlock()
	close(l.stop)
	<-l.done
	if _, err := b.db.Exec(ctx, "UPDATE operation_claims SET expires_at = now() - interval '1 second' WHERE id = $1", id); err != nil {
		t.Fatal(err)
	}
	if rep := opState(t, eb, id); rep.State != outline.OpIncomplete || !strings.Contains(rep.Reason, "stopped (killed or crashed)") {
		t.Fatalf("after its instance died, the other instance lists %+v", rep)
	}
	if _, err := eb.Resume(ctx, id, false); err != nil {
		t.Fatalf("resume after the instance died: %v", err)
	}
	if got := nodeCount(t, eb); got != 2*n {
		t.Fatalf("%d bullets after the resume, want %d", got, 2*n)
	}
	// the dead instance comes back and sends its second batch: it finds
	// it landed, and nothing lands twice
	release()
	if got := nodeCount(t, eb); got != 2*n {
		t.Fatalf("%d bullets after the first instance came back, want %d", got, 2*n)
	}
}
