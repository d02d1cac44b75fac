package hosted

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// allNodes reads every app.bulleted.node text of a straight from the PDS
// (listRecords, page by page).
func allNodes(t testing.TB, p *pdstest.Server, a *pdstest.Account) []string {
	t.Helper()
	ctx := context.Background()
	c, err := p.Client(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	cursor := ""
	for {
		var out struct {
			Cursor  string `json:"cursor"`
			Records []struct {
				Value map[string]any `json:"value"`
			} `json:"records"`
		}
		q := map[string]any{"repo": a.DID.String(), "collection": "app.bulleted.node", "limit": 100}
		if cursor != "" {
			q["cursor"] = cursor
		}
		if err := c.Get(ctx, "com.atproto.repo.listRecords", q, &out); err != nil {
			t.Fatal(err)
		}
		for _, r := range out.Records {
			s, _ := r.Value["text"].(string)
			texts = append(texts, s)
		}
		if out.Cursor == "" || len(out.Records) == 0 {
			return texts
		}
		cursor = out.Cursor
	}
}

// TestPlanReservation: one identity, two instances, three concurrent
// operations of several batches each (250 bullets) under an hourly limit
// that holds two of them and a batch of the third. Each operation reserves its whole cost before its
// first batch: the two that get their reservation land completely (none is
// stopped midway by the other instance's spending), the third is refused
// before anything of it is written, and the points in the rolling hour,
// read back from the table, never pass the limit (they are what landed and
// the batches refused for their swapCommit, which the PDS counts too).
func TestPlanReservation(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	const n = 250
	nodes := func(op int) []any {
		var ns []any
		for i := range n {
			ns = append(ns, map[string]any{"text": fmt.Sprintf("op%d-%d", op, i)})
		}
		return ns
	}
	// the cost of one operation, from a dry run on an unlimited instance
	probe := e.start(t, nil)
	cid := registerClient(t, probe)
	u := newAccount(t, p, fmt.Sprintf("plan%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, probe, cid, u, "")
	ctx := context.Background()
	res, err := call(ctx, mcpClient(t, probe, tok), "insert_after", map[string]any{"nodes": nodes(9), "dry_run": true})
	if err != nil || res.IsError {
		t.Fatalf("dry run: %v %s", err, resultText(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	m := regexp.MustCompile(`"cost":(\d+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no cost in the dry run: %.300s", raw)
	}
	cost, _ := strconv.Atoi(string(m[1]))
	if cost < 3*n {
		t.Fatalf("cost %d of %d creates", cost, n)
	}
	// two operations fit, and what is left after them holds the first
	// batch of a third (at most 200 creates, 600 points) but not all of
	// it: reserving batch by batch would stop the third midway
	limit := 3*cost - cost/10
	if limit-2*cost < 600 {
		t.Fatalf("cost %d: the limit %d leaves no room for a third operation's first batch", cost, limit)
	}
	a := e.start(t, func(c *Config) { c.HourLimit = limit; c.PublicURL = probe.public })
	b := e.start(t, func(c *Config) { c.HourLimit = limit; c.PublicURL = probe.public })
	cs := []*client.Client{mcpClient(t, a, tok), mcpClient(t, b, tok), mcpClient(t, a, tok)}

	// the rolling hour, read back from the table while the operations run
	stop := make(chan struct{})
	var peak int
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			var spent int
			if err := probe.db.QueryRow(ctx, "SELECT coalesce(sum(points), 0) FROM budget_spent WHERE did = $1 AND at > now() - interval '1 hour'", u.DID.String()).Scan(&spent); err == nil {
				peak = max(peak, spent)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	start := time.Now()
	type outcome struct {
		ok   bool
		kind string
		text string
	}
	outs := make([]outcome, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := call(ctx, c, "insert_after", map[string]any{"nodes": nodes(i)})
			if err != nil {
				outs[i] = outcome{kind: "transport", text: err.Error()}
				return
			}
			outs[i] = outcome{ok: !res.IsError, kind: errorKind(res), text: resultText(res)}
		}()
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	t.Logf("3 operations of %d bullets (%d points each) under a limit of %d in %v", n, cost, limit, time.Since(start))

	count := map[string]int{}
	for _, s := range allNodes(t, p, u) {
		count[strings.SplitN(s, "-", 2)[0]]++
	}
	landed, refused := 0, 0
	for i, o := range outs {
		got := count[fmt.Sprintf("op%d", i)]
		t.Logf("operation %d: ok %v, kind %q, %d bullets in the PDS", i, o.ok, o.kind, got)
		switch {
		case o.ok:
			landed++
			if got != n {
				t.Errorf("operation %d succeeded with %d of %d bullets in the PDS", i, got, n)
			}
		case o.kind == "budget":
			refused++
			if got != 0 {
				t.Errorf("operation %d was refused for its budget after writing %d bullets", i, got)
			}
			// the refusal quotes the configured limit, not the default
			if want := fmt.Sprintf(" of %d are left", limit); !strings.Contains(o.text, want) {
				t.Errorf("operation %d's refusal does not quote the limit (%q): %.400s", i, want, o.text)
			}
		default:
			t.Errorf("operation %d stopped (%s): %.400s; %d bullets in the PDS", i, o.kind, o.text, got)
		}
	}
	var spent, held int
	db := probe.db
	db.QueryRow(ctx, "SELECT coalesce(sum(points), 0) FROM budget_spent WHERE did = $1 AND at > now() - interval '1 hour'", u.DID.String()).Scan(&spent)
	db.QueryRow(ctx, "SELECT coalesce(sum(points), 0) FROM budget_reserved WHERE did = $1", u.DID.String()).Scan(&held)
	t.Logf("%d landed, %d refused; %d points spent in the hour (peak seen %d), %d still reserved", landed, refused, spent, peak, held)
	// two fit; a batch refused for its swapCommit while they raced is
	// counted as the PDS counts it, so it may leave room for one only (the
	// default case above already failed any operation stopped part-way)
	if landed < 1 || landed+refused != len(outs) || landed == len(outs) {
		t.Errorf("want 1 or 2 operations landed whole and the rest refused for the budget")
	}
	if spent > limit || peak > limit {
		t.Errorf("spent %d (peak %d) of %d points", spent, peak, limit)
	}
	// what landed, and each batch the PDS refused for its swapCommit
	// while the operations raced (the PDS's rate limiter counted it; a
	// batch of 200 creates is 600 points, the last of 50 is 150)
	if extra := spent - landed*cost; extra < 0 || !sumOf(extra, 600, 150) {
		t.Errorf("spent %d points for %d operations of %d: %d more is not a sum of refused batches (600, 150)", spent, landed, cost, extra)
	} else if extra > 0 {
		t.Logf("%d of the points are batches refused for their swapCommit", extra)
	}
	if held != 0 {
		t.Errorf("%d points still reserved after the operations", held)
	}
}

// TestPlanLease: a plan reservation whose instance died (never settled nor
// released) stops counting when its lease runs out; each settled batch
// renews the lease and moves its points from reserved to spent.
func TestPlanLease(t *testing.T) {
	ctx := context.Background()
	db, err := OpenDB(ctx, pg.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// time passes in the database (the lease is compared with Postgres's
	// now()): the test moves expires_at instead of sleeping, so that a slow
	// machine cannot make it pass or fail
	const ttl = 10 * time.Minute
	l := &Ledger{DB: db, Limit: 10, DayLimit: 100, TTL: ttl}
	did := "did:plc:lease"
	id, err := l.Reserve(ctx, did, 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reserve(ctx, did, 3); err == nil {
		t.Fatal("a second reservation passed the limit while the first is held")
	}
	age := func(expires string) {
		t.Helper()
		if _, err := db.Exec(ctx, "UPDATE budget_reserved SET expires_at = now() + $2::interval WHERE id = $1", id, expires); err != nil {
			t.Fatal(err)
		}
	}
	age("1 minute") // nine minutes later, the lease is nearly out
	if err := l.SettlePart(ctx, did, id, 5); err != nil {
		t.Fatal(err)
	}
	var renewed bool
	if err := db.QueryRow(ctx, "SELECT expires_at > now() + interval '9 minutes' FROM budget_reserved WHERE id = $1", id).Scan(&renewed); err != nil {
		t.Fatal(err)
	}
	if !renewed {
		t.Fatal("settling a batch did not renew the lease")
	}
	if _, err := l.Reserve(ctx, did, 3); err == nil {
		t.Fatal("the renewed reservation's 3 points were not counted")
	}
	age("-1 second") // the instance is gone: its lease runs out
	if _, err := l.Reserve(ctx, did, 5); err != nil {
		t.Fatalf("after the lease ran out: %v", err)
	}
	if spent, _ := l.Spent(ctx, did, time.Hour); spent != 5 {
		t.Fatalf("spent %d, want 5", spent)
	}
}

// sumOf reports whether n is a sum of the parts (each any number of times).
func sumOf(n int, parts ...int) bool {
	ok := make([]bool, n+1)
	ok[0] = true
	for i := 1; i <= n; i++ {
		for _, p := range parts {
			if p <= i && ok[i-p] {
				ok[i] = true
			}
		}
	}
	return ok[n]
}
