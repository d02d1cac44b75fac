package hosted

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A deleted MCP session answers 404 on /mcp of the hosted server too, an
// unknown one as well, and a request without a session id (other than
// initialize) 400 (MCP streamable HTTP, session management); before, the
// hosted transport accepted any well-formed id, also a deleted one.
func TestHostedSessionEnds(t *testing.T) {
	e := newEnv(t)
	in := e.start(t, nil)
	cid := registerClient(t, in)
	code := seedGrant(t, in, cid, "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa", verifier, ScopeRead)
	st, out := exchange(t, in, cid, code, verifier, testRedirect)
	if st != 200 {
		t.Fatalf("token: %d %v", st, out)
	}
	tok := out["access_token"].(string)
	do := func(method, session, body string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, in.URL+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if method == "GET" && resp.StatusCode == 200 {
			return 200, "", "(an event stream)" // its body lasts as long as the session
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	st, id, body := do("POST", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if st != 200 || id == "" {
		t.Fatalf("initialize: %d %q %.300s", st, id, body)
	}
	const list = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if st, _, body := do("POST", id, list); st != 200 {
		t.Fatalf("tools/list: %d %.300s", st, body)
	}
	if st, _, body := do("DELETE", id, ""); st != 200 {
		t.Fatalf("DELETE: %d %.300s", st, body)
	}
	for _, c := range []struct {
		what, method, session, body string
		status                      int
	}{
		{"tools/list after DELETE", "POST", id, list, 404},
		{"GET after DELETE", "GET", id, "", 404},
		{"unknown id", "POST", "mcp-session-00000000-0000-4000-8000-000000000000", list, 404},
		{"no id", "POST", "", list, 400},
	} {
		if st, _, body := do(c.method, c.session, c.body); st != c.status {
			t.Errorf("%s: %d, want %d: %.300s", c.what, st, c.status, body)
		}
	}
}
