package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
	"weak"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// SessionIdle is how long an MCP session (streamable HTTP, protocol
// versions before 2026-07-28) lives without a request; a session with an
// open GET stream does not expire.
const SessionIdle = 24 * time.Hour

// MaxSessions bounds the live sessions; a new one beyond it ends the
// session unused for the longest time.
const MaxSessions = 10_000

// sessions is the session id manager of the streamable HTTP transport: it
// knows the sessions it started and that have not ended (deleted by the
// client, idle for over idle, or pushed out by newer ones beyond max), so
// that any other id is answered 404 (MCP streamable HTTP: "the server MUST
// respond to requests containing that session ID with HTTP 404"). The
// transport's default manager accepts any well-formed id, also one deleted.
// Sessions live in memory: after a restart every old id is unknown, and
// clients start new sessions (the spec's answer to a 404).
type sessions struct {
	mu    sync.Mutex
	live  map[string]*session
	ended map[string]string // id -> why it ended (for the 404), bounded by max
	idle  time.Duration
	max   int
	now   func() time.Time
	// onEnd, if set, is told of every session that ends (m.mu held)
	onEnd func(id string)
}

type session struct {
	last    time.Time
	streams int // open GET streams
}

func newSessions(idle time.Duration, max int) *sessions {
	if idle <= 0 {
		idle = SessionIdle
	}
	if max <= 0 {
		max = MaxSessions
	}
	return &sessions{live: map[string]*session{}, ended: map[string]string{}, idle: idle, max: max, now: time.Now}
}

const sessionPrefix = "mcp-session-"

// Generate starts a session (mcp-go calls it for an initialize request).
func (m *sessions) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	id := sessionPrefix + hex.EncodeToString(b[:])
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if len(m.live) >= m.max {
		m.expire(now)
	}
	if len(m.live) >= m.max {
		// push out the session unused for the longest time (its client
		// gets a 404 saying so and starts a new session)
		var oldest string
		for id, s := range m.live {
			if s.streams == 0 && (oldest == "" || s.last.Before(m.live[oldest].last)) {
				oldest = id
			}
		}
		if oldest != "" {
			m.end(oldest, fmt.Sprintf("ended to make room: this server keeps at most %d sessions and this one was unused the longest", m.max))
		}
	}
	m.live[id] = &session{last: now}
	return id
}

// Validate reports an error for an id that is not a live session; mcp-go
// answers it with 404.
func (m *sessions) Validate(id string) (isTerminated bool, err error) {
	if why := m.touch(id); why != "" {
		return false, fmt.Errorf("%s", why)
	}
	return false, nil
}

// Terminate ends a session (a DELETE from its client).
func (m *sessions) Terminate(id string) (isNotAllowed bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[id]; ok {
		m.end(id, "deleted by its client")
	}
	return false, nil
}

// touch marks id used now; it returns why id is not a live session, or "".
func (m *sessions) touch(id string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	s, ok := m.live[id]
	if ok && s.streams == 0 && now.Sub(s.last) > m.idle {
		m.end(id, fmt.Sprintf("expired after %s without a request", m.idle))
		ok = false
	}
	if !ok {
		if why, ok := m.ended[id]; ok {
			return "session " + id + " " + why
		}
		return "unknown session " + id + " (not started by this server, or the server has restarted since)"
	}
	s.last = now
	return ""
}

// stream counts an open GET stream of id (d = +1 or -1).
func (m *sessions) stream(id string, d int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.live[id]; ok {
		s.streams += d
		s.last = m.now()
	}
}

// expire ends the sessions idle for too long; m.mu is held.
func (m *sessions) expire(now time.Time) {
	for id, s := range m.live {
		if s.streams == 0 && now.Sub(s.last) > m.idle {
			m.end(id, fmt.Sprintf("expired after %s without a request", m.idle))
		}
	}
}

// end moves id from live to ended; m.mu is held.
func (m *sessions) end(id, why string) {
	delete(m.live, id)
	if m.onEnd != nil {
		m.onEnd(id)
	}
	if len(m.ended) >= m.max {
		for old := range m.ended { // forget an arbitrary one: its id then reads as unknown
			delete(m.ended, old)
			break
		}
	}
	m.ended[id] = why
}

// StreamableHTTP is the streamable HTTP transport of s with session
// checks: a session ends when its client deletes it, after idle without a
// request (0: SessionIdle) or when max newer ones (0: MaxSessions) push it
// out, and a request naming an ended or unknown session gets 404; one
// without a session id (other than initialize) gets 400. opts are further
// transport options.
func StreamableHTTP(s *mcpserver.MCPServer, idle time.Duration, max int, opts ...mcpserver.StreamableHTTPOption) http.Handler {
	m := newSessions(idle, max)
	if seen, ok := seenOf.Load(weak.Make(s)); ok {
		m.onEnd = seen.(*seenRevs).forget // what the session was told of the outline
	}
	// the body bound is this server's (MaxRequestBody, checked before the
	// transport reads), not the transport's smaller default
	base := []mcpserver.StreamableHTTPOption{mcpserver.WithMaxRequestBodyBytes(MaxRequestBody + 1)}
	h := mcpserver.NewStreamableHTTPServer(s, append(append(base, opts...), mcpserver.WithSessionIdManager(m))...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, done := checkSession(m, w, r)
		if !ok {
			return
		}
		if done != nil {
			defer done()
		}
		h.ServeHTTP(w, r)
	})
}

// checkSession answers, before the transport, a request that belongs to no
// live session: 400 without an Mcp-Session-Id (other than initialize), 404
// with one that is unknown or ended. Requests of protocol version 2026-07-28
// and later carry no session and pass. It returns whether the request may
// go on, and for a GET the function to call when its stream ends.
func checkSession(m *sessions, w http.ResponseWriter, r *http.Request) (ok bool, streamDone func()) {
	if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return true, nil
	}
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		return true, nil
	}
	id := r.Header.Get(mcpserver.HeaderKeySessionID)
	why := "missing Mcp-Session-Id header: send initialize first, then the session id it returned with every request"
	status := http.StatusBadRequest
	if id != "" {
		if why = m.touch(id); why == "" {
			if r.Method == http.MethodGet {
				m.stream(id, +1)
				return true, func() { m.stream(id, -1) }
			}
			return true, nil
		}
		why += "; start a new session with initialize"
		status = http.StatusNotFound
	}
	// no live session: only an initialize (or a sessionless 2026-07-28
	// message) may go on; the body is read here only then
	if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
		body, err := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return true, nil // the transport reports the failed read
		}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Meta *mcp.Meta `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) != nil {
			return true, nil // the transport answers a parse error
		}
		if msg.Method == string(mcp.MethodInitialize) || mcp.IsModernProtocol(msg.Params.Meta.ProtocolVersion()) {
			return true, nil
		}
	}
	sessionError(w, status, why)
	return false, nil
}

// sessionError writes a JSON-RPC error without an id, as the transport
// does for requests it refuses.
func sessionError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"jsonrpc": "2.0",
		"id":      nil,
		"error":   map[string]any{"code": mcp.INVALID_REQUEST, "message": msg},
	})
}
