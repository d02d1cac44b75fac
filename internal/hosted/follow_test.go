package hosted

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"golang.org/x/time/rate"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// updatesOf collects c's notifications/resources/updated.
type updatesOf struct {
	mu   sync.Mutex
	got  []string
	more chan struct{}
}

func watchUpdates(c *client.Client) *updatesOf {
	u := &updatesOf{more: make(chan struct{}, 100)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != mcp.MethodNotificationResourceUpdated {
			return
		}
		uri, _ := n.Params.AdditionalFields["uri"].(string)
		u.mu.Lock()
		u.got = append(u.got, uri)
		u.mu.Unlock()
		select {
		case u.more <- struct{}{}:
		default:
		}
	})
	return u
}

func (u *updatesOf) count(uri string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, g := range u.got {
		if g == uri {
			n++
		}
	}
	return n
}

// waitN waits until uri was notified n times (bound: a stuck stream, not
// a speed check; the server missed it for 10 s and more).
func (u *updatesOf) waitN(t *testing.T, uri string, n int) {
	t.Helper()
	bound := time.After(30 * time.Second)
	for u.count(uri) < n {
		select {
		case <-u.more:
		case <-bound:
			t.Fatalf("no notifications/resources/updated for %s (have %d, want %d)", uri, u.count(uri), n)
		}
	}
}

// appCreate makes a bullet straight at the PDS, as the person's app does,
// and returns its commit's rev.
func appCreate(t *testing.T, p *pdstest.Server, a *pdstest.Account, text string) string {
	t.Helper()
	ctx := context.Background()
	app, err := p.Client(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Commit struct {
			Rev string `json:"rev"`
		} `json:"commit"`
	}
	if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": a.DID.String(), "collection": "app.bulleted.node",
		"record": map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "z", "createdAt": "2026-12-06T10:00:00.000Z"}}, &out); err != nil {
		t.Fatal(err)
	}
	return out.Commit.Rev
}

// followed starts in's following for the test (heard, if set, hears the
// other instances' commits of the users in holds).
func followed(t *testing.T, in *instance, heard ...func(did, rev string)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var h func(did, rev string)
	if len(heard) > 0 {
		h = heard[0]
	}
	go func() { defer close(done); in.runFollowing(ctx, h) }()
	t.Cleanup(func() { cancel(); <-done })
}

// listening opens a 2026-07-28 subscriptions/listen stream of c for uris
// and waits for its acknowledgement.
func listening(t *testing.T, c *client.Client, uris ...string) *updatesOf {
	t.Helper()
	ups := watchUpdates(c)
	acked := make(chan struct{}, 1)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationSubscriptionsAcknowledged {
			select {
			case acked <- struct{}{}:
			default:
			}
		}
	})
	stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: uris}, func(err error) { t.Logf("listen: %v", err) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	select {
	case <-acked:
	case <-time.After(30 * time.Second):
		t.Fatal("subscriptions/listen not acknowledged")
	}
	return ups
}

// TestHostedFollowNotifies: a hosted user's subscription (a 2026-07-28
// subscriptions/listen stream on their outline) hears of the person's edit
// made in their app, straight to the PDS, as notifications/resources/
// updated, with no request made to the instance after the edit: the
// instance follows the PDS's commit stream for every user it holds. A
// session's next call (2025-11-25, which has sessions) then says another
// writer changed the outline. Before, nothing came until a call read the
// repository (the issue: nothing within 10 s).
func TestHostedFollowNotifies(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	in := e.start(t, nil)
	followed(t, in)
	a := newAccount(t, p, fmt.Sprintf("follow%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, in, registerClient(t, in), a, "")
	ctx := context.Background()
	sc := legacyClient(t, in.URL, tok, mcp.ProtocolVersion20251125, mcp.ClientCapabilities{}) // (sessions: the change notice)
	// a first call: the change notice tells what changed since a call
	if res, err := call(ctx, sc, "insert_after", map[string]any{"text": "Written by the agent"}); err != nil || res.IsError {
		t.Fatalf("insert: %v %s", err, resultText(res))
	}
	// the person's edit, once the instance follows the user live (the
	// stream brings every commit from then on; a catch-up read covers
	// what came before), and the subscription is acknowledged (opened
	// last: the test client's streams end after 30 s)
	u, err := in.user(ctx, a.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	waitLive(t, u)
	ups := listening(t, mcpClient(t, in, tok), server.OutlineURI)
	calls := in.Hits("/mcp")
	appCreate(t, p, a, "Written in the app")
	ups.waitN(t, server.OutlineURI, 1)
	if n := in.Hits("/mcp") - calls; n != 0 {
		t.Fatalf("%d requests to /mcp between the edit and its notification, want none", n)
	}
	res, err := call(ctx, sc, "read_outline", nil)
	if err != nil || res.IsError {
		t.Fatalf("read: %v %s", err, resultText(res))
	}
	text := resultText(res)
	if !strings.Contains(text, "Written in the app") || !strings.Contains(text, "by another writer") {
		t.Fatalf("the next call does not show the app's bullet and say another writer changed it:\n%s", text)
	}
	// dropped (idle, or for the budget), the user is no longer followed
	hub := in.hubOf(u)
	if hub == nil || hub.Members() != 1 {
		t.Fatal("the user is not a member of their PDS's hub")
	}
	in.mu.Lock()
	in.drop(u)
	in.mu.Unlock()
	if n := hub.Members(); n != 0 {
		t.Fatalf("the dropped user's hub has %d members", n)
	}
}

// waitLive waits until u's reads answer from the followed stream.
func waitLive(t *testing.T, u *user) {
	t.Helper()
	bound := time.Now().Add(30 * time.Second)
	for !u.repo.Live() {
		if time.Now().After(bound) {
			t.Fatal("the user's repository is not followed live")
		}
		time.Sleep(50 * time.Millisecond) // (Live has no signal to wait on: it turns after settleFor)
	}
}

// TestHostedFollowedWritesAskNothing: while the user's stream is live, an
// agent's inserts are planned on the followed head: no getLatestCommit
// (nor any other read) before each write, where an instance that does not
// follow asks for the head before every one. Logs both p50s
// (BULLETED_HOSTED_INSERTS=N inserts each; default 20).
func TestHostedFollowedWritesAskNothing(t *testing.T) {
	p := testPDS(t)
	n := 20
	if v, err := strconv.Atoi(os.Getenv("BULLETED_HOSTED_INSERTS")); err == nil && v > 0 {
		n = v // more for figures
	}
	type setup struct {
		c   *client.Client
		u   *user
		lat []time.Duration
		h0  int64
		d0  int64
	}
	open := func(follow bool) *setup {
		e := newEnv(t)
		e.plc = p.PLCURL
		in := e.start(t, nil)
		if follow {
			followed(t, in)
		}
		a := newAccount(t, p, fmt.Sprintf("writes%d", time.Now().UnixNano()%1e6))
		tok, _ := signIn(t, in, registerClient(t, in), a, "")
		c := mcpClient(t, in, tok)
		ctx := context.Background()
		if res, err := call(ctx, c, "insert_after", map[string]any{"text": "first"}); err != nil || res.IsError {
			t.Fatalf("insert: %v %s", err, resultText(res))
		}
		u, err := in.user(ctx, a.DID.String())
		if err != nil {
			t.Fatal(err)
		}
		if follow {
			waitLive(t, u)
		}
		return &setup{c: c, u: u, h0: u.repo.Stats.Heads.Load(), d0: u.repo.Stats.Diffs.Load()}
	}
	// the two setups' inserts alternate, so that both see the same load
	ask, fol := open(false), open(true)
	for i := range 2 * n {
		st := ask
		if i%2 == 1 {
			st = fol
		}
		t0 := time.Now()
		res, err := call(context.Background(), st.c, "insert_after", map[string]any{"text": fmt.Sprintf("bullet %d", i)})
		st.lat = append(st.lat, time.Since(t0))
		if err != nil || res.IsError {
			t.Fatalf("insert %d: %v %s", i, err, resultText(res))
		}
	}
	p50 := func(st *setup) (time.Duration, int64, int64) {
		slices.Sort(st.lat)
		return st.lat[n/2], st.u.repo.Stats.Heads.Load() - st.h0, st.u.repo.Stats.Diffs.Load() - st.d0
	}
	asking, askHeads, askDiffs := p50(ask)
	live, heads, diffs := p50(fol)
	t.Logf("%d inserts: not following p50 %v (%d getLatestCommit, %d getRepo?since); followed p50 %v (%d, %d)", n, asking, askHeads, askDiffs, live, heads, diffs)
	if askHeads < int64(n) {
		t.Fatalf("not following, %d getLatestCommit for %d inserts: the comparison is void", askHeads, n)
	}
	if heads != 0 || diffs != 0 {
		t.Fatalf("followed live, the inserts asked the PDS %d getLatestCommit and %d getRepo?since, want none", heads, diffs)
	}
}

// TestHostedInstancesTellCommits: two instances on one database both hold
// a user, followed live. A write through one is told to the other at once
// (NOTIFY: the user and the commit's rev), ahead of the PDS's stream, and
// the other's very next call knows of it before it reads (its own notice,
// sent as the call starts, comes back after A's): its read shows the
// bullet (it waits for the stream, or asks, instead of answering from its
// followed head, now behind), and its next write is planned after that
// commit: not sent blind and refused.
func TestHostedInstancesTellCommits(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	a := e.start(t, nil)
	b := e.start(t, func(c *Config) { c.PublicURL = a.public; c.MetricsToken = "metrics" })
	type note struct{ did, rev string }
	heard := make(chan note, 16)
	followed(t, a)
	// B hears the other instances' commits late (a busy listener): its
	// call must wait for them all the same
	defer func(w time.Duration) { syncWait = w }(syncWait)
	syncWait = 30 * time.Second // (a bound for a stuck listener)
	followed(t, b, func(did, rev string) {
		time.Sleep(200 * time.Millisecond) // the late delivery (not a wait for anything)
		heard <- note{did, rev}
	})
	ctx := context.Background()
	acct, ca, cb, ub := onBoth(t, p, a, b, "tell")
	writes := ub.repo.Stats.Writes.Load()
	res, err := call(ctx, ca, "insert_after", map[string]any{"text": "Written through instance A"})
	if err != nil || res.IsError {
		t.Fatalf("insert on A: %v %s", err, resultText(res))
	}
	// B's read right after: B makes sure it heard every commit notice
	// sent before the call (its own notice comes back after them)
	res, err = call(ctx, cb, "read_outline", nil)
	if err != nil || res.IsError || !strings.Contains(resultText(res), "Written through instance A") {
		t.Fatalf("B's read right after A's write does not show it: %v %s", err, resultText(res))
	}
	select {
	case n := <-heard:
		if n.did != acct.DID.String() || n.rev == "" {
			t.Fatalf("B heard %+v", n)
		}
	default:
		t.Fatal("instance B was not told of A's commit before its call went on")
	}
	if n := b.syncMissed.Load(); n != 0 {
		t.Fatalf("%d of B's calls could not make sure they heard the other instances' commits", n)
	}
	// B's metrics say so
	if st, fams := scrape(t, b, "metrics"); st != 200 || value(fams, "bulleted_hosted_followed_users") != 1 ||
		value(fams, "bulleted_hosted_streams_up") != 1 || value(fams, "bulleted_hosted_commit_notices_total") != 1 || value(fams, "bulleted_hosted_sync_missed_total") != 0 {
		t.Fatalf("B's metrics (%d): followed %v, streams up %v, notices %v, syncs missed %v", st, value(fams, "bulleted_hosted_followed_users"),
			value(fams, "bulleted_hosted_streams_up"), value(fams, "bulleted_hosted_commit_notices_total"), value(fams, "bulleted_hosted_sync_missed_total"))
	}
	res, err = call(ctx, cb, "insert_after", map[string]any{"text": "Written through instance B"})
	if err != nil || res.IsError {
		t.Fatalf("insert on B: %v %s", err, resultText(res))
	}
	if n := b.refused.Load(); n != 0 {
		t.Fatalf("B's write was refused %d times for its swapCommit", n)
	}
	if n := ub.repo.Stats.Writes.Load() - writes; n != 1 {
		t.Fatalf("B sent %d writes, want 1", n)
	}
	if got := nodesOf(t, p, acct); len(got) != 2 {
		t.Fatalf("the repository holds %q", got)
	}
}

// TestHostedSyncMissedAsksThePDS: a call on instance B that cannot make
// sure it heard the other instances' commits (its listener stuck behind a
// notice) does not answer from its followed head: it asks the PDS (failed
// before: B answered from the followed state, asking nothing), and shows
// the write instance A made just before.
func TestHostedSyncMissedAsksThePDS(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	a := e.start(t, nil)
	b := e.start(t, func(c *Config) { c.PublicURL = a.public })
	followed(t, a)
	defer func(w time.Duration) { syncWait = w }(syncWait)
	syncWait = 100 * time.Millisecond
	release, stuck := make(chan struct{}), make(chan struct{}, 16)
	var once sync.Once
	followed(t, b, func(did, rev string) {
		stuck <- struct{}{}
		<-release // B's listener stuck on A's notice until the test ends
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // (runs before followed's cleanup)
	ctx := context.Background()
	_, ca, cb, ub := onBoth(t, p, a, b, "miss")
	res, err := call(ctx, ca, "insert_after", map[string]any{"text": "Written through instance A"})
	if err != nil || res.IsError {
		t.Fatalf("insert on A: %v %s", err, resultText(res))
	}
	<-stuck // B's listener holds A's notice: B's syncs cannot come back
	asked := ub.repo.Stats.Heads.Load() + ub.repo.Stats.Diffs.Load() + ub.repo.Stats.CARs.Load()
	missed := b.syncMissed.Load()
	res, err = call(ctx, cb, "read_outline", nil)
	if err != nil || res.IsError || !strings.Contains(resultText(res), "Written through instance A") {
		t.Fatalf("B's read right after A's write does not show it: %v %s", err, resultText(res))
	}
	if n := b.syncMissed.Load() - missed; n != 1 {
		t.Fatalf("%d of B's calls could not make sure of the other instances' commits, want 1", n)
	}
	if n := ub.repo.Stats.Heads.Load() + ub.repo.Stats.Diffs.Load() + ub.repo.Stats.CARs.Load() - asked; n == 0 {
		t.Fatal("B's call could not sync, yet answered from its followed head without asking the PDS")
	}
}

// TestHostedFollowedAlternating: users followed live on two instances
// whose calls alternate between them at once (no session affinity), half
// of them writes: every call succeeds, every write lands, and a read right
// after a write on the other instance shows it.
func TestHostedFollowedAlternating(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	off := Limits{Authorize: RateLimit{Rate: rate.Inf}, Token: RateLimit{Rate: rate.Inf}}
	a := e.start(t, func(c *Config) { c.Limits = off })
	b := e.start(t, func(c *Config) { c.PublicURL = a.public; c.Limits = off })
	followed(t, a)
	followed(t, b)
	cid := registerClient(t, a)
	const users, rounds = 4, 6
	var wg sync.WaitGroup
	errs := make(chan error, users*rounds*2)
	for i := range users {
		acct := newAccount(t, p, fmt.Sprintf("alt%d-%d", time.Now().UnixNano()%1e6, i))
		tok, _ := signIn(t, a, cid, acct, "")
		ca, cb := mcpClient(t, a, tok), mcpClient(t, b, tok)
		// held and followed live on both instances first
		for _, in := range []*instance{a, b} {
			u, err := in.user(context.Background(), acct.DID.String())
			if err != nil {
				t.Fatal(err)
			}
			waitLive(t, u)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for j := range rounds {
				w, r := ca, cb
				if j%2 == 1 {
					w, r = cb, ca
				}
				text := fmt.Sprintf("round %d", j)
				if res, err := call(ctx, w, "insert_after", map[string]any{"text": text}); err != nil || res.IsError {
					errs <- fmt.Errorf("%s insert %d: %v %v", acct.Handle, j, err, res)
					return
				}
				res, err := call(ctx, r, "read_outline", nil)
				if err != nil || res.IsError || !strings.Contains(resultText(res), text) {
					errs <- fmt.Errorf("%s read %d on the other instance right after the write does not show it: %v %s", acct.Handle, j, err, resultText(res))
					return
				}
			}
			if got := len(nodesOf(t, p, acct)); got != rounds {
				errs <- fmt.Errorf("%s holds %d bullets, want %d", acct.Handle, got, rounds)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("refused for their swapCommit: %d on A, %d on B; syncs missed: %d, %d", a.refused.Load(), b.refused.Load(), a.syncMissed.Load(), b.syncMissed.Load())
}

// onBoth signs a new account of p in on instances a and b (each with its
// own MCP client, each having read the outline), and waits until both
// follow it live; it returns the account, the clients and b's user.
func onBoth(t *testing.T, p *pdstest.Server, a, b *instance, name string) (acct *pdstest.Account, ca, cb *client.Client, ub *user) {
	t.Helper()
	ctx := context.Background()
	acct = newAccount(t, p, fmt.Sprintf("%s%d", name, time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, a, registerClient(t, a), acct, "")
	ca, cb = mcpClient(t, a, tok), mcpClient(t, b, tok)
	for _, c := range []*client.Client{ca, cb} {
		if res, err := call(ctx, c, "read_outline", nil); err != nil || res.IsError {
			t.Fatalf("read: %v %s", err, resultText(res))
		}
	}
	ua, err := a.user(ctx, acct.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	if ub, err = b.user(ctx, acct.DID.String()); err != nil {
		t.Fatal(err)
	}
	waitLive(t, ua)
	waitLive(t, ub)
	return acct, ca, cb, ub
}
