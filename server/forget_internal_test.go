package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// sharedStore is a SessionStore shared by two transports (two instances
// of one service): every session is live, its initialize kept.
type sharedStore struct {
	mu     sync.Mutex
	init   map[string][]byte
	ended  map[string]bool
	forgot []string
}

func (s *sharedStore) Start(_ context.Context, id string, init []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.init[id] = init
	return nil
}

func (s *sharedStore) Check(_ context.Context, id string, wantInit bool) ([]byte, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	init, ok := s.init[id]
	if !ok || s.ended[id] {
		return nil, "unknown", nil
	}
	if !wantInit {
		init = nil
	}
	return init, "", nil
}

func (s *sharedStore) End(_ context.Context, id, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended[id] = true
	return nil
}

func (s *sharedStore) Stream(string, int) {}

func (s *sharedStore) Forgot(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forgot = append(s.forgot, id)
}

// registered is an MCP server counting its registered sessions.
func registered() (*mcpserver.MCPServer, *atomic.Int64) {
	var n atomic.Int64
	h := &mcpserver.Hooks{}
	h.AddOnRegisterSession(func(context.Context, mcpserver.ClientSession) { n.Add(1) })
	h.AddOnUnregisterSession(func(context.Context, mcpserver.ClientSession) { n.Add(-1) })
	return mcpserver.NewMCPServer("t", "1", mcpserver.WithHooks(h), mcpserver.WithToolCapabilities(false)), &n
}

func post(t *testing.T, url, session, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header.Get("Mcp-Session-Id")
}

// Sessions known to an instance (adopted from another, or started there)
// are bounded: beyond the bound, the one unused the longest is forgotten
// there (its transport state dropped, the store told), unless a request
// of it is being served (an open GET stream); a forgotten session goes
// on, adopted again at its next request. Before, each adopted session was
// kept registered on the adopting instance for good.
func TestAdoptedSessionsBounded(t *testing.T) {
	store := &sharedStore{init: map[string][]byte{}, ended: map[string]bool{}}
	srvA, _ := registered()
	srvB, onB := registered()
	a := httptest.NewServer(StreamableHTTPWith(srvA, store))
	defer a.Close()
	tb := StreamableHTTPWith(srvB, store).(*transport)
	tb.max = 3
	b := httptest.NewServer(tb)
	defer b.Close()
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	const ping = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	var ids []string
	for range 6 {
		st, id := post(t, a.URL, "", initialize)
		if st != 200 || id == "" {
			t.Fatalf("initialize: %d %q", st, id)
		}
		ids = append(ids, id)
	}
	// the first session keeps a GET stream open on b: never forgotten
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", ids[0])
	req.Header.Set("MCP-Protocol-Version", "2025-06-18")
	stream, err := http.DefaultClient.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	defer stream.Body.Close()
	for _, id := range ids[1:] {
		if st, _ := post(t, b.URL, id, ping); st != 200 {
			t.Fatalf("ping on b: %d", st)
		}
	}
	if n := onB.Load(); n > 3 {
		t.Errorf("%d sessions registered on b, want at most 3", n)
	}
	store.mu.Lock()
	forgot := strings.Join(store.forgot, " ")
	store.mu.Unlock()
	if want := strings.Join(ids[1:4], " "); forgot != want {
		t.Errorf("forgotten on b: %q, want the oldest not streaming %q", forgot, want)
	}
	if !tb.known(ids[0]) || !tb.known(ids[5]) || tb.known(ids[1]) {
		t.Errorf("known on b: the streaming %v, the newest %v, the oldest %v", tb.known(ids[0]), tb.known(ids[5]), tb.known(ids[1]))
	}
	// a forgotten session goes on (adopted again), and was not ended
	if st, _ := post(t, b.URL, ids[1], ping); st != 200 {
		t.Errorf("a forgotten session's next request: %d", st)
	}
	if st, _ := post(t, a.URL, ids[1], ping); st != 200 {
		t.Errorf("a forgotten session on the instance that started it: %d", st)
	}
	if n := onB.Load(); n > 3 {
		t.Errorf("%d sessions registered on b, want at most 3", n)
	}
}
