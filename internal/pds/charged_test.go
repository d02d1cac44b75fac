package pds_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// A refused write is charged exactly when the reference PDS's rate limiter
// counted it (@atproto/xrpc-server checks auth, size and the input's
// lexicon before the route's limiter; the limiter adds a request's points
// before it refuses it with a 429; the handler's refusals come after):
// one its input check refuses (a record key the lexicon does not allow) is
// not charged; one its limiter refuses (429) is; one its handler refuses
// for a stale swapCommit is (TestBudgetAgainstRateLimits).
func TestRefusalsChargedAsCounted(t *testing.T) {
	ctx := context.Background()
	rl := pdstest.Start(t, pdstest.Options{RateLimits: true})
	a := pdstest.NewAccount(t, rl)
	r := pdstest.Login(t, rl, a, t.TempDir(), nil)
	ledger, err := budget.New(filepath.Join(t.TempDir(), "budget.json"))
	if err != nil {
		t.Fatal(err)
	}
	r.Budget = ledger
	node := func(rkey string) store.Write {
		return store.Write{Op: store.Create, Collection: lexicon.Node, RKey: rkey,
			Value: map[string]any{"$type": lexicon.Node, "text": "x", "sortKey": "a", "createdAt": "2026-12-06T00:00:00.000Z"}}
	}
	// refused by the input check, before the limiter
	if _, err := r.Apply(ctx, "", []store.Write{node("bad key!")}); !errors.Is(err, store.ErrRefused) {
		t.Fatalf("a record key the lexicon refuses: %v", err)
	}
	if spent := ledger.Spent(budget.Window); spent != 0 {
		t.Fatalf("a write refused before the rate limiter is charged %d points", spent)
	}
	// another client, whose ledger is not this one, spends 4,998 of the
	// hour's 5,000 points; then this one's 3-point write meets a 429
	other := pds.New(r.Client(), a.DID)
	for i, left := 0, 1666; left > 0; i++ {
		var ws []store.Write
		for j := range min(left, store.MaxBatch) {
			ws = append(ws, node(fmt.Sprintf("3kother%03d%03d", i, j)))
		}
		if _, err := other.Apply(ctx, "", ws); err != nil {
			t.Fatal(err)
		}
		left -= len(ws)
	}
	_, err = r.Apply(ctx, "", []store.Write{node("3klimited0001")})
	var ex *budget.Exceeded
	if !errors.As(err, &ex) || !ex.Paused || r.Stats.RateLimited.Load() != 1 {
		t.Fatalf("a write past the PDS's limit: %v (429s %d)", err, r.Stats.RateLimited.Load())
	}
	if spent := ledger.Spent(budget.Window); spent != 3 {
		t.Fatalf("a write the rate limiter refused (and counted) is charged %d points, want 3", spent)
	}
}
