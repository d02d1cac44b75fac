package hosted

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// TestChargedBeforeSent: a batch is counted in the shared ledger before its
// request leaves. The PDS commits the batch and its answer never comes
// (the instance is as good as killed while waiting): the ledger already
// counts the landed points, with and without an operation's reservation;
// and a batch the PDS refuses for a stale swapCommit stays counted (the
// PDS's rate limiter counts a request before its handler refuses it:
// TestBudgetAgainstRateLimits in internal/pds shows it does). Read
// from the repository and the ledger's tables, not from what Apply said.
func TestChargedBeforeSent(t *testing.T) {
	p := testPDS(t)
	ctx := context.Background()
	db, err := OpenDB(ctx, pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	u := newAccount(t, p, fmt.Sprintf("charge%d", time.Now().UnixNano()%1e6))
	proxy := pdstest.NewFaultProxy(t, p.URL)
	dir := t.TempDir()
	c, _, err := pds.Login{PDS: proxy.URL, Identifier: u.Handle, Password: u.AppPassword, Dir: dir,
		HTTP: pds.NewHTTPClient(pds.HTTPConfig{ResponseHeaderTimeout: time.Minute})}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := &Ledger{DB: db, Limit: 5000, DayLimit: 35000}
	r := &userRepo{inner: pds.New(c, u.DID), ledger: l}
	did := u.DID.String()
	spent := func() int {
		t.Helper()
		n, err := l.Spent(ctx, did, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	landed := func() int { return len(nodesOf(t, p, u)) }
	batch := func(tag string, n int) []store.Write {
		var ws []store.Write
		for i := range n {
			ws = append(ws, store.Write{Op: store.Create, Collection: lexicon.Node, RKey: fmt.Sprintf("3k%s%08d", tag, i), Value: map[string]any{
				"$type": lexicon.Node, "text": fmt.Sprintf("%s %d", tag, i), "sortKey": fmt.Sprintf("a%s%04d", tag, i), "createdAt": "2026-12-04T10:00:00.000Z"}})
		}
		return ws
	}
	// hangs: the PDS commits the batch, and the answer never comes back
	hang := func(name string, send func(context.Context) error, wantNodes, wantSpent int) {
		t.Helper()
		proxy.Arm(pdstest.Fault{Method: pdstest.ApplyWrites, Kind: pdstest.HangAfterForward})
		cctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- send(cctx) }()
		deadline := time.Now().Add(30 * time.Second)
		for landed() < wantNodes {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the batch did not land", name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// the batch is in the repository and its answer is not back: a
		// kill now leaves only what the ledger already says
		if got := spent(); got != wantSpent {
			t.Errorf("%s: the repository holds %d bullets while the ledger counts %d points, want %d", name, landed(), got, wantSpent)
		}
		cancel()
		<-done
		proxy.Disarm()
	}
	head := func() string {
		h, _, err := r.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}

	// a batch on its own (no operation)
	hang("a batch", func(ctx context.Context) error {
		_, err := r.Apply(ctx, head(), batch("aa", 10))
		return err
	}, 10, 30)

	// a batch of an operation whose plan is reserved
	pctx, release, err := r.ReservePlan(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	hang("an operation's batch", func(ctx context.Context) error {
		_, err := r.Apply(context.WithValue(ctx, planKey{}, pctx.Value(planKey{})), head(), batch("bb", 10))
		return err
	}, 20, 60)

	// refused by the PDS (a stale swapCommit): known not to have landed,
	// but counted by the PDS, so counted here
	stale := "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
	if _, err := r.Apply(pctx, stale, batch("cc", 10)); !errors.Is(err, store.ErrStale) {
		t.Fatalf("a batch on a stale commit: %v, want ErrStale", err)
	}
	if got := spent(); got != 90 || landed() != 20 {
		t.Errorf("after a refused batch: %d points spent for %d bullets, want 90 (60 landed, 30 refused) for 20", got, landed())
	}
	var held int
	if err := db.QueryRow(ctx, "SELECT coalesce(sum(points), 0) FROM budget_reserved WHERE did = $1", did).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Errorf("the plan holds %d points after one batch of 30 landed and one of 30 was refused, want 0", held)
	}
	release()
}
