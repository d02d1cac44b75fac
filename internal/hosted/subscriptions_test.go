package hosted

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// sessionRequest sends one JSON-RPC message of session sid (protocol
// 2025-11-25) to in, by method (POST or DELETE), and returns the answer's
// status and body.
func sessionRequest(t *testing.T, in *instance, token, sid, method, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, in.URL+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20251125)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := testClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// subscription sends resources/subscribe or resources/unsubscribe of uri
// to in, and fails the test unless it is acknowledged.
func subscription(t *testing.T, in *instance, token, sid, method, uri string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": time.Now().UnixNano(), "method": method, "params": map[string]any{"uri": uri}})
	st, got := sessionRequest(t, in, token, sid, http.MethodPost, string(body))
	if st != http.StatusOK || !strings.Contains(got, `"result"`) {
		t.Fatalf("%s %s: %d %s", method, uri, st, got)
	}
}

// getStream opens the standalone GET stream of session sid on in, read
// raw (the SSE events), and collects its notifications/resources/updated.
func getStream(t *testing.T, in *instance, token, sid string) *updatesOf {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, in.URL+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", mcp.ProtocolVersion20251125)
	req.Header.Set("Mcp-Session-Id", sid)
	// (no client timeout: the stream lasts the test)
	resp, err := (&http.Client{Transport: testClient().Transport}).Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET stream: %d %s", resp.StatusCode, b)
	}
	ups := &updatesOf{more: make(chan struct{}, 100)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var m struct {
				Method string `json:"method"`
				Params struct {
					URI string `json:"uri"`
				} `json:"params"`
			}
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) != nil || m.Method != mcp.MethodNotificationResourceUpdated {
				continue
			}
			ups.mu.Lock()
			ups.got = append(ups.got, m.Params.URI)
			ups.mu.Unlock()
			select {
			case ups.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { cancel(); resp.Body.Close(); <-done })
	return ups
}

// waitSubs waits until in holds n subscriptions (loaded from the shared
// store by the instance that holds the session's GET stream).
func waitSubs(t *testing.T, in *instance, n int, what string) {
	t.Helper()
	bound := time.Now().Add(30 * time.Second)
	for in.subs.Count() != n {
		if time.Now().After(bound) {
			t.Fatalf("%s: the instance holding the GET stream holds %d subscriptions, want %d", what, in.subs.Count(), n)
		}
		time.Sleep(20 * time.Millisecond) // (no signal to wait on: the load follows a NOTIFY)
	}
}

// appCreateUnder makes a bullet under parent (a record key) straight at
// the PDS, as the person's app does.
func appCreateUnder(t *testing.T, p *pdstest.Server, a *pdstest.Account, text, parent string) {
	t.Helper()
	ctx := context.Background()
	app, err := p.Client(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rec := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "z", "createdAt": "2026-12-06T10:00:00.000Z",
		"parent": "at://" + a.DID.String() + "/app.bulleted.node/" + parent}
	if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": a.DID.String(), "collection": "app.bulleted.node", "record": rec}, nil); err != nil {
		t.Fatal(err)
	}
}

// TestHostedSubscriptionsAnyInstance: a 2025-11-25 session started on
// instance A whose resources/subscribe goes through A while its standalone
// GET stream is held by instance B hears, on that stream, of another
// client's commit to the subscribed outline (notifications/resources/
// updated), with no request after the commit: the subscriptions are kept
// with the session in Postgres, and the instance holding the stream loads
// them (told by a NOTIFY) and holds the user, followed. An unsubscribe
// through A, then through B, stops them; a deleted session's end. Before,
// the subscription lived in A's memory only: B never heard of it.
func TestHostedSubscriptionsAnyInstance(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	a := e.start(t, nil)
	b := e.start(t, func(c *Config) { c.PublicURL = a.public })
	followed(t, a)
	followed(t, b)
	acct := newAccount(t, p, fmt.Sprintf("subs%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, a, registerClient(t, a), acct, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ua, err := a.user(ctx, acct.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := insertTop(ctx, ua.env.Engine, []intent.NewNode{{Text: "Parent K"}})
	if err != nil {
		t.Fatal(err)
	}
	k := out.Plan.Created[0].RKey
	kURI := server.NodeResourceURI(k)

	c := legacyClient(t, a.URL, tok, mcp.ProtocolVersion20251125, mcp.ClientCapabilities{})
	sid := c.GetSessionId()
	if sid == "" {
		t.Fatal("no session id")
	}
	ups := getStream(t, b, tok, sid)
	subscription(t, a, tok, sid, string(mcp.MethodResourcesSubscribe), server.OutlineURI)
	subscription(t, a, tok, sid, string(mcp.MethodResourcesSubscribe), kURI)
	waitSubs(t, b, 2, "subscribed through A")
	if n := a.subs.Count(); n != 0 {
		t.Fatalf("A, which holds no stream of the session, holds %d subscriptions (their updates would go nowhere)", n)
	}
	ub, err := b.user(ctx, acct.DID.String())
	if err != nil {
		t.Fatal(err)
	}
	waitLive(t, ub)

	// another client's commit: told on B's stream, without a call
	calls := a.Hits("/mcp") + b.Hits("/mcp")
	appCreate(t, p, acct, "Written in the app")
	ups.waitN(t, server.OutlineURI, 1)
	if n := a.Hits("/mcp") + b.Hits("/mcp") - calls; n != 0 {
		t.Fatalf("%d requests to /mcp between the commit and its notification, want none", n)
	}

	// unsubscribed through A (B is told): a commit under K tells K only
	subscription(t, a, tok, sid, string(mcp.MethodResourcesUnsubscribe), server.OutlineURI)
	waitSubs(t, b, 1, "unsubscribed through A")
	appCreateUnder(t, p, acct, "Under K", k)
	ups.waitN(t, kURI, 1)
	// (updates go out sorted by URI: the outline's would have come first)
	if n := ups.count(server.OutlineURI); n != 1 {
		t.Fatalf("after the unsubscribe through A the outline was notified %d times, want 1", n)
	}

	// unsubscribed through B, the stream's instance
	subscription(t, b, tok, sid, string(mcp.MethodResourcesUnsubscribe), kURI)
	waitSubs(t, b, 0, "unsubscribed through B")

	// a deleted session's subscriptions end (with their rows)
	subscription(t, a, tok, sid, string(mcp.MethodResourcesSubscribe), server.OutlineURI)
	waitSubs(t, b, 1, "subscribed again through A")
	if st, body := sessionRequest(t, a, tok, sid, http.MethodDelete, ""); st != http.StatusOK && st != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", st, body)
	}
	waitSubs(t, b, 0, "the session deleted")
	var rows int
	if err := a.db.QueryRow(ctx, "SELECT count(*) FROM mcp_subscriptions WHERE session = $1", sid).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("the deleted session's subscriptions: %d rows (%v)", rows, err)
	}
}

// TestHostedSubscriptionCatchUp: a commit made after a subscribe through
// instance A and before the session's GET stream opens on instance B (no
// instance held the subscription meanwhile) is told on that stream once it
// opens, without a call: the subscription keeps the revision it was made
// at. Before, B started it from the outline as it found it, the commit
// already in: nothing was told.
func TestHostedSubscriptionCatchUp(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	a := e.start(t, nil)
	b := e.start(t, func(c *Config) { c.PublicURL = a.public })
	followed(t, a)
	followed(t, b)
	acct := newAccount(t, p, fmt.Sprintf("catch%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, a, registerClient(t, a), acct, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := legacyClient(t, a.URL, tok, mcp.ProtocolVersion20251125, mcp.ClientCapabilities{})
	if res, err := call(ctx, c, "insert_after", map[string]any{"text": "Written by the agent"}); err != nil || res.IsError {
		t.Fatalf("insert: %v %s", err, resultText(res))
	}
	sid := c.GetSessionId()
	subscription(t, a, tok, sid, string(mcp.MethodResourcesSubscribe), server.OutlineURI)
	appCreate(t, p, acct, "Written in the app")
	calls := a.Hits("/mcp") + b.Hits("/mcp")
	ups := getStream(t, b, tok, sid)
	ups.waitN(t, server.OutlineURI, 1)
	if n := a.Hits("/mcp") + b.Hits("/mcp") - calls; n != 1 {
		t.Fatalf("%d requests to /mcp besides the GET stream, want none", n-1)
	}
}

// TestSubscriptionStore: the store of subscriptions bounds a session's
// (max; one made again is not counted twice), tells every instance of each
// change (NOTIFY, the session id), moves their told revision only forward,
// and ends them with the session (rows deleted, none read).
func TestSubscriptionStore(t *testing.T) {
	e := newEnv(t)
	a := e.start(t, nil)
	st := a.sessions
	changes := make(chan string, 16)
	st.OnSubscriptions(func(s string) { changes <- s })
	// (the instance's listener connects as it starts)
	for bound := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st.mu.Lock()
		up := st.listened
		st.mu.Unlock()
		if up {
			break
		}
		if time.Now().After(bound) {
			t.Fatal("the session store does not listen")
		}
	}
	ctx := context.Background()
	sid := server.NewSessionID()
	if _, err := a.db.Exec(ctx, "INSERT INTO mcp_sessions (id, did) VALUES ($1, 'did:plc:subscriptionstore')", sid); err != nil {
		t.Fatal(err)
	}
	told := func(what string) {
		t.Helper()
		bound := time.After(30 * time.Second)
		for {
			select {
			case s := <-changes:
				if s == sid {
					return
				}
			case <-bound:
				t.Fatalf("%s: no notice of the session", what)
			}
		}
	}
	subscribed := func() []server.StoredSubscription {
		t.Helper()
		subs, err := st.Subscribed(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		return subs
	}
	for i, c := range []struct {
		uri  string
		full bool
	}{{"bulleted://outline", false}, {"bulleted://outline", false}, {"bulleted://outline/k", false}, {"bulleted://outline/j", true}} {
		full, err := st.Subscribe(ctx, sid, c.uri, "r1", 2)
		if err != nil || full != c.full {
			t.Fatalf("subscribe %d (%s): full %v, %v; want full %v", i, c.uri, full, err, c.full)
		}
	}
	told("subscribed")
	if got := subscribed(); len(got) != 2 || got[0] != (server.StoredSubscription{URI: "bulleted://outline", Rev: "r1"}) {
		t.Fatalf("subscribed: %v", got)
	}
	for _, rev := range []string{"r5", "r3"} {
		if err := st.Told(ctx, sid, rev); err != nil {
			t.Fatal(err)
		}
	}
	if got := subscribed(); got[0].Rev != "r5" || got[1].Rev != "r5" {
		t.Fatalf("told r5 then r3: %v", got)
	}
	if err := st.Unsubscribe(ctx, sid, "bulleted://outline"); err != nil {
		t.Fatal(err)
	}
	told("unsubscribed")
	if got := subscribed(); len(got) != 1 || got[0].URI != "bulleted://outline/k" {
		t.Fatalf("after the unsubscribe: %v", got)
	}
	if err := st.End(ctx, sid, "deleted by its client"); err != nil {
		t.Fatal(err)
	}
	told("ended")
	var rows int
	if err := a.db.QueryRow(ctx, "SELECT count(*) FROM mcp_subscriptions WHERE session = $1", sid).Scan(&rows); err != nil || rows != 0 || len(subscribed()) != 0 {
		t.Fatalf("the ended session's subscriptions: %d rows (%v)", rows, err)
	}
	if _, err := st.Subscribe(ctx, sid, "bulleted://outline", "r6", 2); err == nil {
		t.Fatal("an ended session subscribed")
	}
}
