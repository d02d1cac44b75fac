package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// resourceServer is an in-process client of a server over an embedded
// store, and the store (to write as another client would, and to read
// back).
func resourceServer(t *testing.T) (*client.Client, *store.Local, *outline.Engine) {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e := outline.New(l)
	c, err := client.NewInProcessClient(server.New(e, false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, l, e
}

// seed writes bullets straight to the store (another client's writes):
// texts[i] at the top level, or under parents[i] when set. It returns
// their record keys.
func seed(t *testing.T, l *store.Local, texts []string, parents []string) []string {
	t.Helper()
	clock := syntax.NewTIDClock(1)
	var ws []store.Write
	var keys []string
	for i, text := range texts {
		k := clock.Next().String()
		keys = append(keys, k)
		v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": fmt.Sprintf("a%05d", i), "createdAt": "2026-07-30T09:30:00.000Z"}
		if parents != nil && parents[i] != "" {
			v["parent"] = "at://" + l.DID().String() + "/app.bulleted.node/" + parents[i]
		}
		ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: k, Value: v})
	}
	for len(ws) > 0 {
		n := min(len(ws), 200) // the store's bound on one commit
		if _, err := l.Apply(context.Background(), "", ws[:n]); err != nil {
			t.Fatal(err)
		}
		ws = ws[n:]
	}
	return keys
}

// initializeLegacy starts a session at the newest protocol version that
// has resources/subscribe (2026-07-28 removed it).
func initializeLegacy(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
}

func readResource(t *testing.T, c *client.Client, uri string) mcp.TextResourceContents {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	res, err := c.ReadResource(context.Background(), req)
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("read %s: %d contents", uri, len(res.Contents))
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		t.Fatalf("read %s: %T", uri, res.Contents[0])
	}
	if tc.URI != uri {
		t.Fatalf("read %s: contents name %s", uri, tc.URI)
	}
	return tc
}

// resources/list names the outline and each top-level bullet by its
// text (at most 100, the outline's entry saying how many are left out);
// the templates are listed.
func TestResourcesList(t *testing.T) {
	c, l, e := resourceServer(t)
	var texts []string
	for i := range 105 {
		texts = append(texts, fmt.Sprintf("Top %03d", i))
	}
	keys := seed(t, l, texts, nil)
	seed(t, l, []string{"a child"}, []string{keys[0]})
	initializeLegacy(t, c)
	res, err := c.ListResources(context.Background(), mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := e.Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tree.Roots.Len() != 105 {
		t.Fatalf("the store has %d top-level bullets", tree.Roots.Len())
	}
	byURI := map[string]mcp.Resource{}
	for _, r := range res.Resources {
		byURI[r.URI] = r
	}
	// and the two views (apps.go): ui://bulleted/outline.html, diff.html
	res.Resources = slices.DeleteFunc(res.Resources, func(r mcp.Resource) bool { return strings.HasPrefix(r.URI, "ui://") })
	if len(res.Resources) != 101 {
		t.Fatalf("want the outline and 100 bullets, got %d", len(res.Resources))
	}
	o, ok := byURI[server.OutlineURI]
	if !ok || !strings.Contains(o.Description, "105 top-level bullets") || !strings.Contains(o.Description, "other 5") {
		t.Fatalf("the outline entry does not say how many are not listed: %+v", o)
	}
	for i, it := range tree.Roots.Slice(0, 100) {
		r, ok := byURI[server.NodeResourceURI(it.Key())]
		if !ok || r.Name != it.Str("text") || r.MIMEType != "text/markdown" {
			t.Fatalf("top-level bullet %d (%s %q) listed as %+v", i, it.Key(), it.Str("text"), r)
		}
	}
	tl, err := c.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var raws []string
	for _, tp := range tl.ResourceTemplates {
		raws = append(raws, tp.URITemplate.Raw())
	}
	slices.Sort(raws)
	if !slices.Equal(raws, []string{server.NodeTemplate, server.OutlineTemplate}) {
		t.Fatalf("templates %v", raws)
	}
}

// The whole outline and a subtree read as resources: Markdown is
// read_outline's format=markdown, JSON its rows (checked against the
// repository read back); an unknown key or cursor is -32602 naming the
// URI.
func TestResourceRead(t *testing.T) {
	c, l, e := resourceServer(t)
	top := seed(t, l, []string{"Groceries", "Work"}, nil)
	kids := seed(t, l, []string{"- [ ] milk", "bread", "not food"}, []string{top[0], top[0], top[1]})
	seed(t, l, []string{"wholemeal"}, []string{kids[1]})
	initializeLegacy(t, c)

	md := readResource(t, c, server.OutlineURI)
	if md.MIMEType != "text/markdown" {
		t.Fatalf("mime %q", md.MIMEType)
	}
	want, _ := callTool(t, c, "read_outline", map[string]any{"format": "markdown", "depth": 50})
	if md.Text != want {
		t.Fatalf("markdown resource differs from read_outline format=markdown:\n%s\n---\n%s", md.Text, want)
	}
	for _, s := range []string{"- Groceries\n", "  - bread\n", "    - wholemeal\n", "- Work\n"} {
		if !strings.Contains(md.Text, s) {
			t.Fatalf("markdown lacks %q:\n%s", s, md.Text)
		}
	}

	sub := readResource(t, c, server.NodeResourceURI(top[0]))
	want, _ = callTool(t, c, "read_outline", map[string]any{"format": "markdown", "depth": 50, "node": top[0]})
	if sub.Text != want || strings.Contains(sub.Text, "Work") || strings.Contains(sub.Text, "not food") {
		t.Fatalf("subtree resource:\n%s\n---\n%s", sub.Text, want)
	}
	// the at:// URI form names the same subtree
	at := readResource(t, c, server.OutlineURI+"/at://"+l.DID().String()+"/app.bulleted.node/"+top[0])
	if at.Text != sub.Text {
		t.Fatalf("at:// form differs:\n%s", at.Text)
	}

	js := readResource(t, c, server.NodeResourceURI(top[0])+"?format=json")
	if js.MIMEType != "application/json" {
		t.Fatalf("mime %q", js.MIMEType)
	}
	var page struct {
		Root  struct{ RKey, Text string }
		Nodes []struct {
			RKey, Text string
			Children   []struct{ RKey, Text string }
		}
		Truncated bool
	}
	if err := json.Unmarshal([]byte(js.Text), &page); err != nil {
		t.Fatalf("json page: %v\n%s", err, js.Text)
	}
	tree, err := e.Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := tree.Nodes.Get(top[0])
	if page.Root.RKey != top[0] || page.Root.Text != g.Str("text") || len(page.Nodes) != g.Children.Len() || page.Truncated {
		t.Fatalf("json page %+v for %s", page, js.Text)
	}
	for i, ch := range g.Children.All() {
		if page.Nodes[i].RKey != ch.Key() || page.Nodes[i].Text != ch.Str("text") || len(page.Nodes[i].Children) != ch.Children.Len() {
			t.Fatalf("row %d: %+v, the repository has %s %q", i, page.Nodes[i], ch.Key(), ch.Str("text"))
		}
	}

	for _, bad := range []string{
		server.NodeResourceURI("3zzzzzzzzzzzz"),
		server.NodeResourceURI(top[0]) + "?cursor=nonsense",
		server.OutlineURI + "?format=xml",
		server.NodeResourceURI(top[0]) + "?limit=3",
	} {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = bad
		_, err := c.ReadResource(context.Background(), req)
		if !errors.Is(err, mcp.ErrInvalidParams) || !strings.Contains(err.Error(), bad) {
			t.Fatalf("read %s: want -32602 naming the URI, got %v", bad, err)
		}
	}
}

// The JSON-RPC error of an unknown key, or of a URI that is not of this
// server, is -32602 and carries the URI and the kind in its data
// (SEP-2164), at both protocol eras.
func TestResourceUnknownKeyError(t *testing.T) {
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := server.New(outline.New(l), false)
	for uri, kind := range map[string]string{
		server.NodeResourceURI("3kunknownkey2"):               "node_missing",
		"test://nonexistent-resource-for-conformance-testing": "invalid",
	} {
		raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": map[string]any{"uri": uri}})
		out, _ := json.Marshal(s.HandleMessage(context.Background(), raw))
		var resp struct {
			Error struct {
				Code    int
				Message string
				Data    map[string]any
			}
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Error.Code != mcp.INVALID_PARAMS || !strings.Contains(resp.Error.Message, uri) || resp.Error.Data["uri"] != uri || resp.Error.Data["kind"] != kind {
			t.Fatalf("got %s", out)
		}
	}
}

var nextPage = regexp.MustCompile(`<!-- next page: (\S+) -->`)

// A large outline reads page by page, each at most 60 KB, each page
// naming the next; together the pages hold every bullet of the
// repository once, in both formats.
func TestResourcePaging(t *testing.T) {
	c, l, e := resourceServer(t)
	long := strings.Repeat("lorem ipsum ", 80) // ~1 KB a bullet
	var texts []string
	for i := range 400 {
		texts = append(texts, fmt.Sprintf("%04d %s", i, long))
	}
	top := seed(t, l, []string{"Big"}, nil)
	parents := make([]string, len(texts))
	for i := range parents {
		parents[i] = top[0]
	}
	seed(t, l, texts, parents)
	initializeLegacy(t, c)
	tree, err := e.Tree(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for it := range tree.Nodes.Get(top[0]).Children.Items() {
		want = append(want, it.Str("text")[:4])
	}
	for _, format := range []string{"markdown", "json"} {
		uri := server.NodeResourceURI(top[0])
		if format == "json" {
			uri += "?format=json"
		}
		var got []string
		pages := 0
		for uri != "" {
			pages++
			if pages > 50 {
				t.Fatal("more than 50 pages")
			}
			p := readResource(t, c, uri)
			if len(p.Text) > server.MaxResourcePage {
				t.Fatalf("%s: page of %d bytes", uri, len(p.Text))
			}
			next, _ := p.Meta["next"].(string)
			if format == "json" {
				var page struct {
					Nodes []struct{ Text string }
					Next  string
				}
				if err := json.Unmarshal([]byte(p.Text), &page); err != nil {
					t.Fatal(err)
				}
				for _, n := range page.Nodes {
					got = append(got, n.Text[:4])
				}
				if page.Next != next {
					t.Fatalf("json next %q, _meta next %q", page.Next, next)
				}
			} else {
				for _, line := range strings.Split(p.Text, "\n") {
					if strings.HasPrefix(line, "  - ") {
						got = append(got, line[4:8])
					}
				}
				m := nextPage.FindStringSubmatch(p.Text)
				if (m == nil) != (next == "") || m != nil && m[1] != next {
					t.Fatalf("markdown says next %v, _meta next %q", m, next)
				}
			}
			uri = next
		}
		if pages < 2 {
			t.Fatalf("%s: %d page(s) for ~400 KB", format, pages)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: the pages hold %d bullets, the repository %d", format, len(got), len(want))
		}
	}
}

// completion/complete offers the record keys of bullets whose text starts
// with what was typed, any case, at most 100, hasMore when cut.
func TestResourceCompletion(t *testing.T) {
	c, l, _ := resourceServer(t)
	texts := []string{"Groceries", "grout the tiles", "Work", "GROW tomatoes"}
	for i := range 120 {
		texts = append(texts, fmt.Sprintf("zz %d", i))
	}
	keys := seed(t, l, texts, nil)
	initializeLegacy(t, c)
	complete := func(uri, name, value string) *mcp.CompleteResult {
		t.Helper()
		req := mcp.CompleteRequest{}
		req.Params.Ref = mcp.ResourceReference{Type: "ref/resource", URI: uri}
		req.Params.Argument.Name = name
		req.Params.Argument.Value = value
		res, err := c.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := complete(server.NodeTemplate, "node", "gro")
	if !slices.Equal(res.Completion.Values, []string{keys[0], keys[1], keys[3]}) || res.Completion.HasMore {
		t.Fatalf("gro: %+v (keys %v)", res.Completion, keys[:4])
	}
	// a word of the text: the key (a URI needs one)
	res = complete(server.NodeTemplate, "node", "Tiles")
	if !slices.Equal(res.Completion.Values, []string{keys[1]}) {
		t.Fatalf("tiles: %+v (keys %v)", res.Completion, keys[:4])
	}
	res = complete(server.NodeTemplate, "node", "ZZ")
	if len(res.Completion.Values) != 100 || !res.Completion.HasMore || res.Completion.Total != 120 {
		t.Fatalf("zz: %d values, hasMore %v, total %d", len(res.Completion.Values), res.Completion.HasMore, res.Completion.Total)
	}
	res = complete(server.OutlineTemplate, "format", "j")
	if !slices.Equal(res.Completion.Values, []string{"json"}) {
		t.Fatalf("format: %+v", res.Completion)
	}
}

// updates collects notifications/resources/updated by URI.
type updates struct {
	mu   sync.Mutex
	got  []string
	more chan struct{}
}

func watch(c *client.Client) *updates {
	u := &updates{more: make(chan struct{}, 100)}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != mcp.MethodNotificationResourceUpdated {
			return
		}
		uri, _ := n.Params.AdditionalFields["uri"].(string)
		u.mu.Lock()
		u.got = append(u.got, uri)
		u.mu.Unlock()
		u.more <- struct{}{}
	})
	return u
}

// waitFor waits until uri has been notified; a guard, not a timing
// assertion.
func (u *updates) waitFor(t *testing.T, uri string) { t.Helper(); u.waitForN(t, uri, 1) }

// waitForN waits until uri has been notified n times.
func (u *updates) waitForN(t *testing.T, uri string, n int) {
	t.Helper()
	for {
		ok := u.count(uri) >= n
		if ok {
			return
		}
		select {
		case <-u.more:
		case <-time.After(time.Minute):
			t.Fatalf("no update for %s", uri)
		}
	}
}

func (u *updates) reset() {
	u.mu.Lock()
	u.got = nil
	u.mu.Unlock()
}

func (u *updates) count(uri string) int {
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

func subscribe(t *testing.T, c *client.Client, uri string) error {
	t.Helper()
	req := mcp.SubscribeRequest{}
	req.Params.URI = uri
	//lint:ignore SA1019 the legacy resources/subscribe and unsubscribe are what this tests
	return c.Subscribe(context.Background(), req)
}

// A session subscribed to a subtree hears of an insert_after under it
// (one update) and not of it for an unrelated subtree; the whole outline's
// subscription hears of both; another client's write is heard when the
// engine next reads the repository; unknown keys are refused.
func TestResourceSubscriptions(t *testing.T) {
	c, l, _ := resourceServer(t)
	top := seed(t, l, []string{"Groceries", "Work"}, nil)
	kids := seed(t, l, []string{"milk", "report"}, []string{top[0], top[1]})
	initializeLegacy(t, c)
	u := watch(c)
	groceries, work, whole := server.NodeResourceURI(top[0]), server.NodeResourceURI(top[1]), server.OutlineURI
	milk := server.NodeResourceURI(kids[0]) + "?format=json"
	for _, uri := range []string{groceries, work, whole, milk} {
		if err := subscribe(t, c, uri); err != nil {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	if err := subscribe(t, c, server.NodeResourceURI("3zzzzzzzzzzzz")); err == nil || !strings.Contains(err.Error(), "3zzzzzzzzzzzz") {
		t.Fatalf("subscribing to an unknown key: %v", err)
	}

	// a write through this server under Groceries' child milk
	callTool(t, c, "insert_after", map[string]any{"parent": kids[0], "text": "oat milk"})
	u.waitFor(t, groceries)
	u.waitFor(t, milk)
	u.waitFor(t, whole)
	// the sentinel: an update of Work arrives after anything the insert
	// caused
	callTool(t, c, "update_node", map[string]any{"node": kids[1], "text": "the report"})
	u.waitFor(t, work)
	u.waitForN(t, whole, 2)
	if n := u.count(work); n != 1 {
		t.Fatalf("Work: %d updates, want 1 (its own edit only): %v", n, u.got)
	}
	if u.count(groceries) != 1 || u.count(milk) != 1 || u.count(whole) != 2 {
		t.Fatalf("updates %v", u.got)
	}

	// another client writes under Work; the next read sees it
	u.reset()
	seed(t, l, []string{"slides"}, []string{top[1]})
	callTool(t, c, "read_outline", map[string]any{})
	u.waitFor(t, work)
	callTool(t, c, "update_node", map[string]any{"node": kids[0], "text": "whole milk"}) // sentinel
	u.waitFor(t, milk)
	u.waitFor(t, groceries)
	u.waitForN(t, whole, 2)
	if u.count(work) != 1 || u.count(groceries) != 1 || u.count(whole) != 2 {
		t.Fatalf("updates %v", u.got)
	}

	// unsubscribed: no more updates for it
	req := mcp.UnsubscribeRequest{}
	req.Params.URI = groceries
	//lint:ignore SA1019 the legacy resources/subscribe and unsubscribe are what this tests
	if err := c.Unsubscribe(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	u.reset()
	callTool(t, c, "update_node", map[string]any{"node": kids[0], "text": "skimmed milk"})
	callTool(t, c, "update_node", map[string]any{"node": kids[1], "text": "the last report"}) // sentinel
	u.waitFor(t, work)
	if u.count(groceries) != 0 || u.count(milk) != 1 {
		t.Fatalf("updates after unsubscribing Groceries: %v", u.got)
	}
}

// At 2026-07-28 a subscriptions/listen stream's resource subscriptions
// are kept while it is open: the acknowledgement names the ones kept
// (not an unknown key), and a write under one sends an update on the
// stream, tagged with its subscription ID, and none for the other.
func TestResourceListenSubscriptions(t *testing.T) {
	c, l, _ := resourceServer(t)
	top := seed(t, l, []string{"Groceries", "Work"}, nil)
	kids := seed(t, l, []string{"milk", "report"}, []string{top[0], top[1]})
	var mu sync.Mutex
	var acked []any
	var tags []any
	ackd := make(chan struct{}, 1)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		mu.Lock()
		defer mu.Unlock()
		switch n.Method {
		case mcp.MethodNotificationSubscriptionsAcknowledged:
			raw, _ := json.Marshal(n.Params.AdditionalFields["notifications"])
			var f struct{ ResourceSubscriptions []any }
			json.Unmarshal(raw, &f)
			acked = f.ResourceSubscriptions
			ackd <- struct{}{}
		case mcp.MethodNotificationResourceUpdated:
			tags = append(tags, n.Params.Meta[mcp.MetaKeySubscriptionID])
		}
	})
	u := watch(c)
	initialize(t, c) // 2026-07-28
	groceries, work := server.NodeResourceURI(top[0]), server.NodeResourceURI(top[1])
	unknown := server.NodeResourceURI("3zzzzzzzzzzzz")
	stop, err := c.ListenAsync(context.Background(), mcp.SubscriptionFilter{ResourceSubscriptions: []string{groceries, work, unknown}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	select {
	case <-ackd:
	case <-time.After(time.Minute): // a guard
		t.Fatal("no acknowledgement")
	}
	mu.Lock()
	if len(acked) != 2 || acked[0] != groceries || acked[1] != work {
		t.Fatalf("acknowledged %v", acked)
	}
	mu.Unlock()
	callTool(t, c, "insert_after", map[string]any{"parent": kids[0], "text": "oat milk"})
	callTool(t, c, "update_node", map[string]any{"node": kids[1], "text": "the report"}) // sentinel
	u.waitFor(t, work)
	if u.count(groceries) != 1 || u.count(work) != 1 || u.count(unknown) != 0 {
		t.Fatalf("updates %v", u.got)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, tag := range tags {
		if tag == nil {
			t.Fatalf("an update without the stream's subscription ID: %v", tags)
		}
	}
}

// A subtree that mirrors a bullet shows it live: an edit under the
// original (elsewhere) updates the subscription of the subtree holding
// the mirror, and not of an unrelated one.
func TestResourceSubscriptionMirror(t *testing.T) {
	c, l, _ := resourceServer(t)
	top := seed(t, l, []string{"Home", "Projects", "Elsewhere"}, nil)
	kids := seed(t, l, []string{"garden"}, []string{top[1]})
	initializeLegacy(t, c)
	callTool(t, c, "add_mirror", map[string]any{"original": top[1], "parent": top[0]})
	u := watch(c)
	home, elsewhere, projects := server.NodeResourceURI(top[0]), server.NodeResourceURI(top[2]), server.NodeResourceURI(top[1])
	for _, uri := range []string{home, elsewhere, projects} {
		if err := subscribe(t, c, uri); err != nil {
			t.Fatal(err)
		}
	}
	callTool(t, c, "update_node", map[string]any{"node": kids[0], "text": "vegetable garden"})
	callTool(t, c, "insert_after", map[string]any{"parent": top[2], "text": "sentinel"})
	u.waitFor(t, elsewhere)
	if u.count(home) != 1 || u.count(projects) != 1 || u.count(elsewhere) != 1 {
		t.Fatalf("updates %v", u.got)
	}
}

// A session holds at most MaxSubscriptions; its subscriptions end with
// it.
func TestResourceSubscriptionBound(t *testing.T) {
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var texts []string
	for i := range server.MaxSubscriptions + 1 {
		texts = append(texts, fmt.Sprintf("b%d", i))
	}
	keys := seed(t, l, texts, nil)
	subs := server.NewSubscriptions()
	s, err := server.NewWithOptions(&tools.Env{Engine: outline.New(l)}, server.Options{Subscriptions: subs})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	initializeLegacy(t, c)
	for i, k := range keys {
		err := subscribe(t, c, server.NodeResourceURI(k))
		if i < server.MaxSubscriptions && err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
		if i == server.MaxSubscriptions && (err == nil || !strings.Contains(err.Error(), "unsubscribe from one first")) {
			t.Fatalf("subscription %d over the bound: %v", i, err)
		}
	}
	if n := subs.Count(); n != server.MaxSubscriptions {
		t.Fatalf("%d subscriptions kept", n)
	}
	c.Close()
	if n := subs.Count(); n != 0 {
		t.Fatalf("%d subscriptions kept after the session ended", n)
	}
}

type userKey struct{}

// With an environment per request (the hosted server), each user's
// resources, completions and subscriptions are of their own repository:
// another user's bullets are neither listed nor read, and another
// user's write notifies nobody else.
func TestResourcesPerUser(t *testing.T) {
	envs := map[string]*tools.Env{}
	stores := map[string]*store.Local{}
	for _, u := range []string{"ann", "bob"} {
		l, err := store.OpenLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		stores[u], envs[u] = l, &tools.Env{Engine: outline.New(l)}
	}
	annTop := seed(t, stores["ann"], []string{"Ann's secret"}, nil)
	bobTop := seed(t, stores["bob"], []string{"Bob's list"}, nil)
	s, err := server.NewWithOptions(nil, server.Options{EnvFor: func(ctx context.Context) (*tools.Env, func(), error) {
		u, _ := ctx.Value(userKey{}).(string)
		if envs[u] == nil {
			return nil, nil, errors.New("no user")
		}
		return envs[u], nil, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*client.Client{}
	ctxs := map[string]context.Context{}
	for _, u := range []string{"ann", "bob"} {
		c, err := client.NewInProcessClient(s)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		clients[u], ctxs[u] = c, context.WithValue(context.Background(), userKey{}, u)
		initializeLegacy(t, c)
	}
	res, err := clients["bob"].ListResources(ctxs["bob"], mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res.Resources {
		if strings.Contains(r.Name, "Ann") {
			t.Fatalf("Bob's list names Ann's bullet: %+v", res.Resources)
		}
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = server.NodeResourceURI(annTop[0])
	if _, err := clients["bob"].ReadResource(ctxs["bob"], req); !errors.Is(err, mcp.ErrInvalidParams) {
		t.Fatalf("Bob reads Ann's bullet: %v", err)
	}
	u := watch(clients["ann"])
	sub := mcp.SubscribeRequest{}
	sub.Params.URI = server.OutlineURI
	//lint:ignore SA1019 the legacy resources/subscribe is what this tests
	if err := clients["ann"].Subscribe(ctxs["ann"], sub); err != nil {
		t.Fatal(err)
	}
	call := func(user, name string, args map[string]any) {
		t.Helper()
		req := mcp.CallToolRequest{}
		req.Params.Name, req.Params.Arguments = name, args
		if res, err := clients[user].CallTool(ctxs[user], req); err != nil || res.IsError {
			t.Fatalf("%s %s: %v %+v", user, name, err, res)
		}
	}
	call("bob", "insert_after", map[string]any{"parent": bobTop[0], "text": "eggs"})
	call("ann", "insert_after", map[string]any{"parent": annTop[0], "text": "sentinel"})
	u.waitFor(t, server.OutlineURI)
	if n := u.count(server.OutlineURI); n != 1 {
		t.Fatalf("Ann's subscription: %d updates, want 1 (her own write only)", n)
	}
}
