package hosted

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// cutProxy forwards TCP connections to addr until cut: then it closes the
// ones open and refuses new ones until mend.
type cutProxy struct {
	ln    net.Listener
	addr  string
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func newCutProxy(t *testing.T, addr string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, addr: addr}
	t.Cleanup(func() { ln.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", addr)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// A claim released while the database is down is deleted once it answers
// again, not left for its lease to run out (a minute, during which every
// instance reads the operation as being committed and refuses to resume
// it); meanwhile the instance that released it may claim it again.
func TestClaimReleasedWhileDatabaseDown(t *testing.T) {
	defer func(a, b time.Duration) { releaseRetry, releaseRetryMax = a, b }(releaseRetry, releaseRetryMax)
	releaseRetry, releaseRetryMax = 20*time.Millisecond, 100*time.Millisecond
	ctx := context.Background()
	dbURL := pg.NewDatabase(t)
	direct, err := OpenDB(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	if err := Migrate(ctx, direct); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dbURL)
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	viaProxy, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viaProxy.Close)

	const did, id = "did:plc:releasedwhiledown", "3opreleased22"
	here, other := newJournal(viaProxy, did), newJournal(direct, did)
	live := func() bool {
		t.Helper()
		l, err := other.Live(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	for round := range 2 {
		if ok, err := here.Claim(ctx, id); err != nil || !ok {
			t.Fatalf("round %d: claim: %v %v", round, ok, err)
		}
		proxy.setCut(true)
		here.Release(ctx, id) // its delete fails
		if !live() {
			t.Fatalf("round %d: the claim's row went while the database was cut off", round)
		}
		proxy.setCut(false)
		if round == 0 {
			// taken again here before the background delete: ours, taken over
			if ok, err := here.Claim(ctx, id); err != nil || !ok {
				t.Fatalf("the instance that released the claim could not take it again: %v %v", ok, err)
			}
			here.Release(ctx, id)
			if live() {
				t.Fatal("the claim taken over and released is still live")
			}
			continue
		}
		deadline := time.Now().Add(20 * time.Second) // well under the lease's minute
		for live() {
			if time.Now().After(deadline) {
				t.Fatal("a claim released while the database was down stays live until its lease runs out")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// The journal's errors reach tool results (the engine quotes them: "the
// operations journal could not record it (…)"): with its database down
// they say so and no more, never pgx's text naming the database's user,
// name, host and port, which goes to the operator's log.
func TestJournalErrorsNameNoDatabase(t *testing.T) {
	ctx := context.Background()
	dead := deadPool(t)
	var logged []string
	j := newJournal(dead, "did:plc:journalerrors")
	j.logf = func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }
	op := &outline.Operation{ID: "3opjournalerr2"}
	_, errGet := j.Get(ctx, op.ID)
	_, errList := j.List(ctx)
	_, errClaim := j.Claim(ctx, op.ID)
	_, errLive := j.Live(ctx, op.ID)
	for name, err := range map[string]error{"Save": j.Save(ctx, op, true), "Get": errGet, "List": errList, "Remove": j.Remove(ctx, op.ID), "Claim": errClaim, "Live": errLive} {
		if !errors.Is(err, errDatabaseDown) || strings.Contains(err.Error(), "leaky") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s: %v (want only that the database did not answer)", name, err)
		}
	}
	if len(logged) != 6 || !strings.Contains(strings.Join(logged, "\n"), "leakyuser") {
		t.Errorf("the operator's log should have the 6 errors whole: %q", logged)
	}
}

// TestBudgetErrorsNameNoDatabase: the write budget's errors, which tool
// results quote, say with its database down that it did not answer, as the
// journal's do, never pgx's text naming the database's user, name, host
// and port, which goes to the operator's log; nothing is sent.
func TestBudgetErrorsNameNoDatabase(t *testing.T) {
	ctx := context.Background()
	dead := deadPool(t)
	var logged []string
	r := &userRepo{inner: pds.New(nil, syntax.DID("did:plc:budgeterrors")), ledger: &Ledger{DB: dead},
		logf: func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }}
	ws := []store.Write{{Op: store.Create, Collection: lexicon.Node, RKey: "3kbudgeterr22", Value: map[string]any{"$type": lexicon.Node, "text": "x", "sortKey": "a", "createdAt": "2026-12-06T00:00:00.000Z"}}}
	_, errCheck := r.CheckBudget(ctx, 3)
	_, _, errPlan := r.ReservePlan(ctx, 3)
	_, errApply := r.Apply(ctx, "", ws)
	for name, err := range map[string]error{"CheckBudget": errCheck, "ReservePlan": errPlan, "Apply": errApply} {
		var oe *outline.Error
		if !errors.As(err, &oe) || oe.Kind != outline.ErrUnavailable || !strings.Contains(err.Error(), "did not answer") ||
			strings.Contains(err.Error(), "leaky") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s: %v (want unavailable, saying only that the database did not answer)", name, err)
		}
	}
	if len(logged) != 3 || !strings.Contains(strings.Join(logged, "\n"), "leakyuser") {
		t.Errorf("the operator's log should have the 3 errors whole: %q", logged)
	}
}

// deadPool is a pool of a database that never answers, whose connection
// string names a user, database, host and port an error must not quote.
func deadPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	dead, err := pgxpool.New(context.Background(), "postgres://leakyuser:pw@127.0.0.1:1/leakydb?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	return dead
}
