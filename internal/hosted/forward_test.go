package hosted

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// A client's response larger than a NOTIFY payload (8000 bytes) reaches
// the instance that waits for it all the same (kept in a row, the NOTIFY
// naming it), and /mcp takes it (202) where it answered a bare 503
// before; a small one still goes in the NOTIFY itself; the pruner deletes
// the kept row after a minute. A kept response is bounded in size (413)
// and in number per session (429), the client told why.
func TestForwardLarge(t *testing.T) {
	e := newEnv(t)
	a, b := e.start(t, nil), e.start(t, nil)
	type got struct{ session, msg string }
	delivered := make(chan got, 64)
	b.sessions.Receive(func(s string, m []byte) { delivered <- got{s, string(m)} })
	ctx := context.Background()
	wait := func(session string) string {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case g := <-delivered:
				if g.session == session {
					return g.msg
				}
			case <-timeout:
				t.Fatalf("%s was not delivered", session)
			}
		}
	}
	// b listens once a small response comes through (sent again until then)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(30 * time.Second)
	for up := false; !up; {
		if err := a.sessions.Forward(ctx, "probe", []byte(`{"jsonrpc":"2.0","id":0,"result":{}}`)); err != nil {
			t.Fatal(err)
		}
		select {
		case g := <-delivered:
			up = g.session == "probe"
		case <-tick.C:
		case <-timeout:
			t.Fatal("b never listened")
		}
	}
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"result":{"action":"accept","content":{"text":%q}}}`, strings.Repeat("x", 20000))
	if err := a.sessions.Forward(ctx, "sess-big", []byte(big)); err != nil {
		t.Fatalf("forwarding %d bytes: %v", len(big), err)
	}
	if msg := wait("sess-big"); msg != big {
		t.Fatalf("delivered %d bytes, want the %d sent", len(msg), len(big))
	}
	var rows int
	a.db.QueryRow(ctx, "SELECT count(*) FROM mcp_forwarded").Scan(&rows)
	if rows != 1 {
		t.Errorf("%d rows kept, want 1 (the large response only)", rows)
	}

	// through /mcp: a large response of a live session's client to a
	// request no call here waits for is forwarded (202)
	cid := registerClient(t, a)
	st, out := exchange(t, a, cid, seedGrant(t, a, cid, "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", verifier, ScopeRead), verifier, testRedirect)
	if st != 200 {
		t.Fatalf("token: %d %v", st, out)
	}
	do := func(session, body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", a.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+out["access_token"].(string))
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	st, id, body := do("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`)
	if st != 200 || id == "" {
		t.Fatalf("initialize: %d %q %.300s", st, id, body)
	}
	if st, _, body := do(id, big); st != http.StatusAccepted {
		t.Errorf("a large response: %d %.300s, want 202", st, body)
	}
	if msg := wait(id); msg != big {
		t.Errorf("delivered %d bytes through /mcp, want %d", len(msg), len(big))
	}
	// bounded: a response over maxKept is refused (413), and so is one past
	// maxKeptPerSession within keptFor (429), each saying why
	huge := fmt.Sprintf(`{"jsonrpc":"2.0","id":8,"result":{"action":"accept","content":{"text":%q}}}`, strings.Repeat("x", maxKept))
	if st, _, body := do(id, huge); st != http.StatusRequestEntityTooLarge || !strings.Contains(body, "too large to pass") {
		t.Errorf("a response over %d bytes: %d %.300s, want 413 saying why", maxKept, st, body)
	}
	for i := 1; i < maxKeptPerSession; i++ {
		if st, _, body := do(id, big); st != http.StatusAccepted {
			t.Fatalf("large response %d: %d %.300s", i+1, st, body)
		}
	}
	if st, _, body := do(id, big); st != http.StatusTooManyRequests || !strings.Contains(body, "large responses") {
		t.Errorf("large response %d within %s: %d %.300s, want 429 saying why", maxKeptPerSession+1, keptFor, st, body)
	}

	// the per-session bound holds for responses sent at once, on two
	// instances (failed before: the count and the insert were not under
	// one lock, and 20 at once kept more than maxKeptPerSession)
	var wg sync.WaitGroup
	var refused atomic.Int64
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := a
			if i%2 == 1 {
				in = b
			}
			var fr *server.ForwardRefusal
			if err := in.sessions.Forward(ctx, "sess-race", []byte(big)); errors.As(err, &fr) && fr.Status == http.StatusTooManyRequests {
				refused.Add(1)
			} else if err != nil {
				t.Errorf("forwarding at once: %v", err)
			}
		}()
	}
	wg.Wait()
	var raced int
	a.db.QueryRow(ctx, "SELECT count(*) FROM mcp_forwarded WHERE session = 'sess-race'").Scan(&raced)
	if raced != maxKeptPerSession || refused.Load() != 20-maxKeptPerSession {
		t.Errorf("20 large responses at once: %d kept, %d refused; want %d kept", raced, refused.Load(), maxKeptPerSession)
	}

	if _, err := a.db.Exec(ctx, "UPDATE mcp_forwarded SET created_at = now() - interval '2 minutes'"); err != nil {
		t.Fatal(err)
	}
	if st, err := a.Prune(ctx); err != nil || st.Forwarded != 1+2*maxKeptPerSession {
		t.Errorf("pruned %+v %v, want the %d kept responses", st, err, 1+2*maxKeptPerSession)
	}
}
