package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// rawClient speaks streamable HTTP with plain requests, so that the test
// sees the status codes a client library would hide.
type rawClient struct {
	t   *testing.T
	url string
}

type rawResp struct {
	status  int
	session string
	body    string
}

func (c rawClient) do(method, session, body string, hdr map[string]string) rawResp {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.url+"/mcp", rd)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return rawResp{resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)}
}

func (c rawClient) initialize() string {
	c.t.Helper()
	r := c.do(http.MethodPost, "", ping, nil)
	if r.status != http.StatusOK || r.session == "" {
		c.t.Fatalf("initialize: %d, session %q: %s", r.status, r.session, r.body)
	}
	v := map[string]string{"MCP-Protocol-Version": "2025-06-18"}
	if r := c.do(http.MethodPost, r.session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, v); r.status != http.StatusAccepted {
		c.t.Fatalf("initialized: %d %s", r.status, r.body)
	}
	return r.session
}

const toolsList = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

// expect checks a status and, for an error, that the body says why.
func expect(t *testing.T, what string, r rawResp, status int, says string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d: %.300s", what, r.status, status, r.body)
	}
	if says != "" && !strings.Contains(r.body, says) {
		t.Fatalf("%s: body %q does not say %q", what, r.body, says)
	}
}

// A deleted session answers 404 afterwards, as do ids the server never
// gave out; a request without a session id (other than initialize) is a
// 400 (MCP streamable HTTP, session management). The conformance suite's
// server-session-lifecycle got 200 after the DELETE.
func TestHTTPSessionEnds(t *testing.T) {
	srv := httptest.NewServer(server.HTTPHandler(server.New(engine(t), true), server.HTTPOptions{}))
	defer srv.Close()
	c := rawClient{t, srv.URL}
	v := map[string]string{"MCP-Protocol-Version": "2025-06-18"}

	a, b := c.initialize(), c.initialize()
	expect(t, "tools/list in session a", c.do(http.MethodPost, a, toolsList, v), http.StatusOK, "read_outline")
	expect(t, "DELETE a", c.do(http.MethodDelete, a, "", v), http.StatusOK, "")
	expect(t, "tools/list after DELETE", c.do(http.MethodPost, a, toolsList, v), http.StatusNotFound, "deleted by its client")
	expect(t, "notification after DELETE", c.do(http.MethodPost, a, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, v), http.StatusNotFound, "")
	expect(t, "GET after DELETE", c.do(http.MethodGet, a, "", v), http.StatusNotFound, "")
	expect(t, "DELETE again", c.do(http.MethodDelete, a, "", v), http.StatusNotFound, "")
	// an initialize carrying the old id starts a new session
	if r := c.do(http.MethodPost, a, ping, nil); r.status != http.StatusOK || r.session == "" || r.session == a {
		t.Fatalf("initialize with the deleted id: %d, session %q: %.300s", r.status, r.session, r.body)
	}
	// the other session lives on
	expect(t, "tools/list in session b", c.do(http.MethodPost, b, toolsList, v), http.StatusOK, "read_outline")

	unknown := "mcp-session-00000000-0000-4000-8000-000000000000"
	expect(t, "POST, unknown id", c.do(http.MethodPost, unknown, toolsList, v), http.StatusNotFound, "unknown session")
	expect(t, "GET, unknown id", c.do(http.MethodGet, unknown, "", v), http.StatusNotFound, "unknown session")
	expect(t, "DELETE, unknown id", c.do(http.MethodDelete, unknown, "", v), http.StatusNotFound, "unknown session")

	expect(t, "POST without id", c.do(http.MethodPost, "", toolsList, v), http.StatusBadRequest, "Mcp-Session-Id")
	expect(t, "GET without id", c.do(http.MethodGet, "", "", v), http.StatusBadRequest, "Mcp-Session-Id")
	expect(t, "DELETE without id", c.do(http.MethodDelete, "", "", v), http.StatusBadRequest, "Mcp-Session-Id")

	// protocol 2026-07-28 has no sessions: a request carries none and is served
	modern := `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	r := c.do(http.MethodPost, "", modern, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
	expect(t, "2026-07-28 tools/list without a session", r, http.StatusOK, "read_outline")
	if r.session != "" {
		t.Fatalf("a 2026-07-28 request was given session %q", r.session)
	}
}

// A GET stream of a live session opens (200, an event stream) and counts
// as use; the session can be deleted while it is open.
func TestHTTPSessionStream(t *testing.T) {
	srv := httptest.NewServer(server.HTTPHandler(server.New(engine(t), true), server.HTTPOptions{}))
	defer srv.Close()
	c := rawClient{t, srv.URL}
	id := c.initialize()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	expect(t, "DELETE with a stream open", c.do(http.MethodDelete, id, "", nil), http.StatusOK, "")
	expect(t, "tools/list after DELETE", c.do(http.MethodPost, id, toolsList, nil), http.StatusNotFound, "deleted")
}

// The 404 and 400 bodies are JSON-RPC errors a client can parse.
func TestHTTPSessionErrorBody(t *testing.T) {
	srv := httptest.NewServer(server.HTTPHandler(server.New(engine(t), true), server.HTTPOptions{}))
	defer srv.Close()
	r := rawClient{t, srv.URL}.do(http.MethodPost, "mcp-session-nope", toolsList, nil)
	var msg struct {
		JSONRPC string `json:"jsonrpc"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if r.status != http.StatusNotFound || json.Unmarshal([]byte(r.body), &msg) != nil || msg.JSONRPC != "2.0" || msg.Error.Message == "" {
		t.Fatalf("%d %q", r.status, r.body)
	}
}
