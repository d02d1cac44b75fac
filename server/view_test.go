package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// viewServer serves /view (with token, if set) on a fresh embedded store
// holding one operation: two bullets inserted.
func viewServer(t *testing.T, token string, streams int) (*httptest.Server, *store.Local, string) {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e, err := outline.Open(l, outline.Options{Operations: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.Do(context.Background(), intent.Insert{Nodes: []intent.NewNode{{Text: "Water the plants"}, {Text: "Call Ana"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	env := &tools.Env{Engine: e}
	done := make(chan struct{})
	h := server.ViewHandler(server.NewWith(env, false), env, server.ViewOptions{Token: token, Poll: 10 * time.Millisecond, MaxStreams: streams, Done: done})
	srv := httptest.NewServer(h)
	t.Cleanup(func() { close(done); srv.Close() })
	return srv, l, out.Op.ID
}

func noRedirect() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, url string, hdr map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// TestViewToken: with a token, /view and its events answer 401 without it
// or with a wrong one; /view?token=TOKEN sets an HttpOnly, SameSite=Strict
// cookie and redirects to /view without the token; the cookie (or a bearer
// header) then opens the page, served with a CSP of its own script and
// style only. Without a token (loopback) the page opens as is; a Host that
// is not loopback is refused.
func TestViewToken(t *testing.T) {
	srv, _, _ := viewServer(t, "s3cret", 0)
	c := noRedirect()
	for _, u := range []string{"/view", "/view?token=wrong", "/view/events"} {
		if res := get(t, c, srv.URL+u, nil); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%s without the token: %d", u, res.StatusCode)
		}
	}
	res := get(t, c, srv.URL+"/view?token=s3cret", nil)
	cookie := res.Header.Get("Set-Cookie")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/view" ||
		!strings.Contains(cookie, "bulleted_view=s3cret") || !strings.Contains(cookie, "HttpOnly") || !strings.Contains(cookie, "SameSite=Strict") || !strings.Contains(cookie, "Path=/view") {
		t.Fatalf("token exchange: %d %v", res.StatusCode, res.Header)
	}
	for _, hdr := range []map[string]string{{"Cookie": "bulleted_view=s3cret"}, {"Authorization": "Bearer s3cret"}} {
		res = get(t, c, srv.URL+"/view", hdr)
		csp := res.Header.Get("Content-Security-Policy")
		if res.StatusCode != http.StatusOK || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'sha256-") || strings.Contains(csp, "unsafe") {
			t.Fatalf("with %v: %d, CSP %q", hdr, res.StatusCode, csp)
		}
	}
	if res = get(t, c, srv.URL+"/view", map[string]string{"Cookie": "bulleted_view=nope"}); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong cookie: %d", res.StatusCode)
	}

	open, _, _ := viewServer(t, "", 0)
	res = get(t, c, open.URL+"/view", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(res.Header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("without a token: %d %v", res.StatusCode, res.Header)
	}
	req, _ := http.NewRequest(http.MethodGet, open.URL+"/view", nil)
	req.Host = "evil.example"
	if res, err := c.Do(req); err != nil || res.StatusCode != http.StatusForbidden {
		t.Fatalf("a foreign Host: %v %v", err, res.StatusCode)
	}
}

// TestViewUndo: POST /view/undo undoes an operation when it comes from the
// page's own origin (read back: the bullets are gone); without an Origin,
// from another origin, or not as JSON, it is refused and nothing changes.
func TestViewUndo(t *testing.T) {
	srv, l, op := viewServer(t, "", 0)
	post := func(origin, ctype string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/view/undo", strings.NewReader(`{"operation":"`+op+`"}`))
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", ctype)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode == http.StatusOK {
			var body struct {
				IsError           bool           `json:"isError"`
				StructuredContent map[string]any `json:"structuredContent"`
			}
			json.NewDecoder(res.Body).Decode(&body)
			if body.IsError {
				t.Fatalf("undo: %v", body.StructuredContent)
			}
		}
		return res.StatusCode
	}
	for _, c := range []struct{ origin, ctype string }{{"", "application/json"}, {"http://evil.example", "application/json"}, {"http://localhost:1", "application/json"}, {srv.URL, "text/plain"}} {
		if code := post(c.origin, c.ctype); code == http.StatusOK {
			t.Fatalf("undo from %q as %s accepted", c.origin, c.ctype)
		}
		if n := nodeCount(t, l); n != 2 {
			t.Fatalf("a refused undo left %d bullets", n)
		}
	}
	if code := post(srv.URL, "application/json"); code != http.StatusOK {
		t.Fatalf("undo from the page: %d", code)
	}
	if n := nodeCount(t, l); n != 0 {
		t.Fatalf("after undo the repository holds %d bullets", n)
	}
}

// TestViewEvents: /view/events sends the outline and the operations at
// once and again when the repository changes (a bullet written meanwhile
// shows up). (Bounded streams: TestViewStreamsMakeRoom.)
func TestViewEvents(t *testing.T) {
	srv, l, op := viewServer(t, "", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/view/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %d %v", res.StatusCode, res.Header)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	next := func() map[string]any {
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			if d, ok := strings.CutPrefix(line, "data: "); ok && event == "state" {
				var m map[string]any
				if err := json.Unmarshal([]byte(d), &m); err != nil {
					t.Fatal(err)
				}
				return m
			}
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return nil
	}
	texts := func(m map[string]any) string {
		var out []string
		for _, n := range m["outline"].(map[string]any)["nodes"].([]any) {
			out = append(out, n.(map[string]any)["text"].(string))
		}
		return strings.Join(out, "|")
	}
	first := next()
	ops, _ := json.Marshal(first["operations"])
	if texts(first) != "Water the plants|Call Ana" || !strings.Contains(string(ops), op) {
		t.Fatalf("first state: %s / %s", texts(first), ops)
	}
	// another writer, straight to the store
	if _, err := l.Apply(context.Background(), "", []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: "3zzzzzzzzzzz2", Value: map[string]any{"$type": "app.bulleted.node", "text": "Buy soil", "sortKey": "z", "createdAt": "2026-01-01T00:00:00.000Z"}}}); err != nil {
		t.Fatal(err)
	}
	for {
		m := next()
		if strings.Contains(texts(m), "Buy soil") {
			break
		}
	}
}

// TestViewStreamsMakeRoom: eight idle live streams (opened and never read)
// do not lock a ninth viewer out: it gets the outline, and the oldest
// stream is told it was closed to make room, asked to come back later,
// and ends.
func TestViewStreamsMakeRoom(t *testing.T) {
	srv, _, _ := viewServer(t, "", server.ViewStreams)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() *http.Response {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/view/events", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		if res.StatusCode != http.StatusOK {
			t.Fatalf("a live stream: %d", res.StatusCode)
		}
		return res
	}
	var idle []*http.Response
	for range server.ViewStreams {
		idle = append(idle, open())
	}
	ninth := open()
	sc := bufio.NewScanner(ninth.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	got := false
	for !got && sc.Scan() {
		got = sc.Text() == "event: state"
	}
	if !got {
		t.Fatalf("the ninth viewer got no state: %v", sc.Err())
	}
	// the oldest was ended, and told why (its body ends)
	all, err := io.ReadAll(idle[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(all), "retry: 60000") || !strings.Contains(string(all), "closed to make room for a newer one") {
		t.Fatalf("the oldest stream ended without saying why:\n%.2000s", all)
	}
}
