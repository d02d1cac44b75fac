package hosted

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestResumeTakesOverReservation: instance A dies after the first of three
// batches of an operation that reserved its whole cost; B resumes it. The
// reservation A left is taken over, not counted beside B's: under an
// hourly limit that holds the operation once (and half its remainder),
// the resume is not refused for the budget, the points in the hour are the
// operation's cost exactly, and no reservation is left. Before, A's
// reservation kept counting for 15 minutes after its last batch and the
// resume was refused ("needs N point(s)").
func TestResumeTakesOverReservation(t *testing.T) {
	a, b, ua, ub := twoEngines(t, "takeover")
	ea, eb, did := ua.env.Engine, ub.env.Engine, ua.did
	ctx := context.Background()
	const n = 401 // three batches
	dry, err := ea.DoFunc(ctx, true, func(p *outline.Planner) error { return intent.Insert{Nodes: bullets("dies", n)}.Plan(p) })
	if err != nil {
		t.Fatal(err)
	}
	cost := dry.Plan.Cost
	rest := cost - store.Cost(dry.Plan.Writes[:dry.Plan.Batches[0]])
	a.ledger.Limit, b.ledger.Limit = cost+rest/2, cost+rest/2

	// A commits the first batch, then dies: its claim is no longer renewed
	// and runs out; its reservation stays (nothing of A gives it back)
	held, goOn := make(chan struct{}), make(chan struct{})
	pctx := outline.WithProgress(ctx, func(done, _, _, _ int) {
		if done == 1 {
			close(held)
			<-goOn
		}
	})
	finished := make(chan error, 1)
	go func() {
		_, err := insertTop(pctx, ea, bullets("dies", n))
		finished <- err
	}()
	select {
	case <-held:
	case err := <-finished:
		t.Fatalf("the insert ended before its second batch: %v", err)
	}
	defer func() {
		close(goOn)
		<-finished
	}()
	ops, err := eb.Operations()
	if err != nil || len(ops) != 1 {
		t.Fatalf("operations: %+v %v", ops, err)
	}
	id := ops[0].ID
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
	reserved := func() int {
		t.Helper()
		var r int
		if err := b.db.QueryRow(ctx, "SELECT coalesce(sum(points), 0) FROM budget_reserved WHERE did = $1", did).Scan(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := reserved(); r != rest {
		t.Fatalf("A left %d point(s) reserved, want %d", r, rest)
	}
	if _, err := eb.Resume(ctx, id, false); err != nil {
		t.Fatalf("resume on B (limit %d, cost %d, %d of it left): %v", cost+rest/2, cost, rest, err)
	}
	if got := nodeCount(t, eb); got != n {
		t.Fatalf("%d bullets after the resume, want %d", got, n)
	}
	spent, err := b.ledger.Spent(ctx, did, time.Hour)
	if err != nil || spent != cost {
		t.Fatalf("%d point(s) spent in the hour (%v), want the operation's %d", spent, err, cost)
	}
	if r := reserved(); r != 0 {
		t.Fatalf("%d point(s) still reserved after the resume", r)
	}
}

// TestWritesQueueOnTheUser: two instances write for one user at once (two
// clients, eight inserts each, all concurrent). Each write waits for the
// user's turn: no batch is refused for its swapCommit (counted), every
// bullet lands once (read back from the PDS), and the points in the hour
// are the inserts' cost, nothing for refused batches. Before, the
// instances raced, and the PDS refused the batches planned on a head
// another instance had just moved.
func TestWritesQueueOnTheUser(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	a := e.start(t, nil)
	b := e.start(t, func(c *Config) { c.PublicURL = a.public })
	u := newAccount(t, p, fmt.Sprintf("race%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, a, registerClient(t, a), u, "")
	ctx := context.Background()
	ua, err := a.user(ctx, u.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	dry, err := ua.env.Engine.DoFunc(ctx, true, func(p *outline.Planner) error { return intent.Insert{Nodes: bullets("x", 1)}.Plan(p) })
	if err != nil {
		t.Fatal(err)
	}
	const per = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*per)
	for k, in := range []*instance{a, b} {
		c := mcpClient(t, in, tok)
		for i := range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				text := fmt.Sprintf("from %d #%d", k, i)
				res, err := call(ctx, c, "insert_after", map[string]any{"text": text})
				if err == nil && res.IsError {
					err = errors.New(resultText(res))
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", text, err)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if r := a.refused.Load() + b.refused.Load(); r != 0 {
		t.Errorf("%d batch(es) refused for their swapCommit (instances racing)", r)
	}
	got := nodesOf(t, p, u)
	for k := range 2 {
		for i := range per {
			if n := count(got, fmt.Sprintf("from %d #%d", k, i)); n != 1 {
				t.Errorf("from %d #%d landed %d times", k, i, n)
			}
		}
	}
	if len(got) != 2*per {
		t.Errorf("the PDS holds %d bullets, want %d", len(got), 2*per)
	}
	spent, err := a.ledger.Spent(ctx, u.DID.String(), time.Hour)
	if err != nil || spent != 2*per*dry.Plan.Cost {
		t.Errorf("%d point(s) spent (%v), want %d", spent, err, 2*per*dry.Plan.Cost)
	}
}
