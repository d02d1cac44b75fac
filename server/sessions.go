package server

import (
	"bytes"
	"container/list"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	id := NewSessionID()
	m.start(id)
	return id
}

// start records session id as live now.
func (m *sessions) start(id string) {
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

// SessionStore keeps the MCP sessions of the streamable HTTP transport
// (protocol versions before 2026-07-28). The default keeps them in this
// process's memory (newSessions); a store shared by several instances
// (the hosted service's, in Postgres) lets any instance serve any request
// of a session, so that a balancer needs no affinity: a session started
// on one instance is adopted by another from the initialize request it
// was started with (replayed there: the client's information and
// capabilities, as the transport keeps them).
type SessionStore interface {
	// Start records a new session id, started by the initialize request
	// init (nil: not kept; such a session is served only where it started).
	Start(ctx context.Context, id string, init []byte) error
	// Check marks id used now: why is why it is not a live session ("":
	// live), init the initialize request it started with (when wantInit:
	// the session is not known here yet). err: the store could not be read
	// (the request is answered 503).
	Check(ctx context.Context, id string, wantInit bool) (init []byte, why string, err error)
	// End ends id (its client deleted it).
	End(ctx context.Context, id, why string) error
	// Stream counts an open GET stream of id on this instance (d = +1 or -1).
	Stream(id string, d int)
}

// SeenStore, if a SessionStore also is one, keeps the revision of the
// outline each session was last told of (notice.go) with the session,
// for every instance.
type SeenStore interface {
	Seen(ctx context.Context, id string) (did, rev string, err error)
	SetSeen(ctx context.Context, id, did, rev string) error
}

// ErrSessionStore wraps a failure of the session store: the request is
// answered 503 with Retry-After, the reason not shown to the client.
var ErrSessionStore = errors.New("the session store failed")

// Start records id (the memory store: pushing out the session unused the
// longest beyond max).
func (m *sessions) Start(_ context.Context, id string, _ []byte) error {
	m.start(id)
	return nil
}

// Check touches id (SessionStore).
func (m *sessions) Check(_ context.Context, id string, _ bool) ([]byte, string, error) {
	return nil, m.touch(id), nil
}

// End ends id (SessionStore).
func (m *sessions) End(_ context.Context, id, why string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[id]; ok {
		m.end(id, why)
	}
	return nil
}

// Stream counts a GET stream (SessionStore).
func (m *sessions) Stream(id string, d int) { m.stream(id, d) }

// NewSessionID is a new, unguessable MCP session id.
func NewSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return sessionPrefix + hex.EncodeToString(b[:])
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
	return StreamableHTTPWith(s, m, opts...)
}

// StreamableHTTPWith is StreamableHTTP with the sessions kept in store.
func StreamableHTTPWith(s *mcpserver.MCPServer, store SessionStore, opts ...mcpserver.StreamableHTTPOption) http.Handler {
	if seen, ok := seenOf.Load(weak.Make(s)); ok {
		if ss, ok := store.(SeenStore); ok {
			seen.(*seenRevs).setStore(ss)
		}
	}
	t := &transport{srv: s, store: store, local: map[string]*list.Element{}, order: list.New(), max: maxLocal}
	if ss, ok := store.(SubscriptionStore); ok {
		if rs, ok := resourcesOf.Load(weak.Make(s)); ok {
			t.subs = rs.(*resources)
			t.subs.setStore(ss) // (substore.go)
		}
	}
	// the body bound is this server's (MaxRequestBody, checked before the
	// transport reads), not the transport's smaller default
	base := []mcpserver.StreamableHTTPOption{mcpserver.WithMaxRequestBodyBytes(MaxRequestBody + 1)}
	t.h = mcpserver.NewStreamableHTTPServer(s, append(append(base, opts...), mcpserver.WithSessionIdManagerResolver(t))...)
	if f, ok := store.(Forwarder); ok {
		f.Receive(t.deliver) // (forward.go)
	}
	return t
}

// transport is the streamable HTTP transport with its sessions in a store.
type transport struct {
	srv   *mcpserver.MCPServer
	store SessionStore
	h     http.Handler
	mu    sync.Mutex
	// local are the sessions the transport of this process knows (started
	// or adopted here; *localSession in order, the last used first): any
	// other live one is adopted first. Beyond max, the one unused for the
	// longest time and not serving a request is forgotten here (its
	// transport state dropped: forget), adopted again when it is used.
	local map[string]*list.Element
	order *list.List
	max   int
	// subs are the server's resources whose subscriptions the store
	// keeps (nil: not kept there), told of the GET streams opened here
	subs *resources
}

// localSession is a session known here and the requests of it being
// served here (a GET stream among them: never forgotten while they last).
type localSession struct {
	id   string
	busy int
}

// Forgetter, if a SessionStore also is one, is told of each session this
// process forgot to stay within its bound of sessions known here (the
// hosted service counts them).
type Forgetter interface {
	Forgot(id string)
}

// maxInit bounds the initialize request kept with a session.
const maxInit = 64 << 10

// maxLocal bounds the sessions known here (started or adopted: each holds
// the transport's state of a session, kept until its client deletes it
// here); one forgotten is adopted again when it is used.
const maxLocal = MaxSessions

type newIDKey struct{}

// forgetKey marks the DELETE that drops a forgotten session's transport
// state here (not the client's: the session goes on).
type forgetKey struct{}

func (t *transport) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ok, done := t.check(w, r)
	if !ok {
		return
	}
	if done != nil {
		defer done()
	}
	id := r.Header.Get(mcpserver.HeaderKeySessionID)
	if nid, ok := r.Context().Value(newIDKey{}).(string); ok {
		id = nid
	}
	if t.busy(id, +1) {
		defer t.busy(id, -1)
	}
	t.h.ServeHTTP(w, r)
}

// busy counts a request of id being served here (false: id is not known
// here).
func (t *transport) busy(id string, d int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.local[id]
	if ok {
		e.Value.(*localSession).busy += d
	}
	return ok
}

// known reports whether id is known here, and marks it used now.
func (t *transport) known(id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.local[id]
	if ok {
		t.order.MoveToFront(e)
	}
	return ok
}

// remember makes id known here; beyond max, the sessions unused for the
// longest time that serve no request are forgotten (r: the request that
// made id known, whose Host the forgetting's DELETE reuses).
func (t *transport) remember(r *http.Request, id string) {
	t.mu.Lock()
	if e, ok := t.local[id]; ok {
		t.order.MoveToFront(e)
	} else {
		t.local[id] = t.order.PushFront(&localSession{id: id})
	}
	var gone []string
	for e := t.order.Back(); e != nil && len(t.local) > t.max; {
		prev := e.Prev()
		if ls := e.Value.(*localSession); ls.busy == 0 && ls.id != id {
			t.order.Remove(e)
			delete(t.local, ls.id)
			gone = append(gone, ls.id)
		}
		e = prev
	}
	t.mu.Unlock()
	for _, old := range gone {
		t.forget(r, old)
	}
}

// forget drops the transport's state of session id here (as its client's
// DELETE would, without ending it in the store) and tells the store.
func (t *transport) forget(r *http.Request, id string) {
	ctx := context.WithValue(context.Background(), forgetKey{}, true)
	u, host := "/mcp", ""
	if r != nil {
		u, host = r.URL.String(), r.Host
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, u, nil)
	if err == nil {
		req.Host = host
		req.Header.Set(mcpserver.HeaderKeySessionID, id)
		t.h.ServeHTTP(&discard{h: http.Header{}}, req)
	}
	if f, ok := t.store.(Forgetter); ok {
		f.Forgot(id)
	}
}

// ResolveSessionIdManager is the session id manager of one request
// (mcpserver.SessionIdManagerResolver): the id check() started for an
// initialize request; sessions are checked before the transport.
func (t *transport) ResolveSessionIdManager(r *http.Request) mcpserver.SessionIdManager {
	m := &idManager{t: t}
	if r != nil {
		m.id, _ = r.Context().Value(newIDKey{}).(string)
		m.forgetting, _ = r.Context().Value(forgetKey{}).(bool)
	}
	return m
}

type idManager struct {
	t  *transport
	id string // the id check() started for this initialize request
	// forgetting: the DELETE is forget's (the session goes on)
	forgetting bool
}

func (m *idManager) Generate() string {
	if m.id != "" {
		return m.id
	}
	// (not reached: check() starts every initialize's session)
	id := NewSessionID()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = m.t.store.Start(ctx, id, nil) // if it fails, the session's next request is told it is unknown
	m.t.remember(nil, id)
	return id
}

// Validate passes: check() answered every request of a session not live.
func (m *idManager) Validate(string) (bool, error) { return false, nil }

func (m *idManager) Terminate(id string) (bool, error) {
	if m.forgetting {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	t := m.t
	t.mu.Lock()
	if e, ok := t.local[id]; ok {
		t.order.Remove(e)
		delete(t.local, id)
	}
	t.mu.Unlock()
	if err := t.store.End(ctx, id, "deleted by its client"); err != nil {
		return false, fmt.Errorf("%w: %w", ErrSessionStore, err)
	}
	return false, nil
}

// adopt makes the transport of this process know session id, started on
// another instance, by replaying its initialize request here (the answer
// is not sent anywhere): the client's information and capabilities are
// then the transport's, as where it started.
func (t *transport) adopt(r *http.Request, id string, init []byte) {
	ctx := context.WithValue(r.Context(), newIDKey{}, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL.String(), bytes.NewReader(init))
	if err != nil {
		return
	}
	req.Host = r.Host
	req.RemoteAddr = r.RemoteAddr
	for k, v := range r.Header {
		req.Header[k] = v
	}
	req.Header.Del(mcpserver.HeaderKeySessionID)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.ContentLength = int64(len(init))
	t.h.ServeHTTP(&discard{h: http.Header{}}, req)
	t.remember(r, id)
}

// discard is a response nobody reads (an adopted session's initialize).
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}

// check answers, before the transport, a request that belongs to no live
// session: 400 without an Mcp-Session-Id (other than initialize), 404 with
// one that is unknown or ended, 503 when the store fails. An initialize
// starts its session in the store here; a live session this process does
// not know yet is adopted. Requests of protocol version 2026-07-28 and
// later carry no session and pass. It returns whether the request may go
// on, and for a GET the function to call when its stream ends.
func (t *transport) check(w http.ResponseWriter, r *http.Request) (ok bool, streamDone func()) {
	if mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) {
		return true, nil
	}
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		return true, nil
	}
	ctx := r.Context()
	id := r.Header.Get(mcpserver.HeaderKeySessionID)
	var body []byte
	var msg struct {
		Method string          `json:"method"`
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	parsed := false
	if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err != nil {
			return true, nil // the transport reports the failed read
		}
		parsed = json.Unmarshal(body, &msg) == nil
		if !parsed && id == "" {
			return true, nil // the transport answers a parse error
		}
	}
	if parsed && mcp.IsModernProtocol(msg.Params.Meta.ProtocolVersion()) {
		return true, nil // a sessionless 2026-07-28 message
	}
	if parsed && msg.Method == string(mcp.MethodInitialize) {
		// a new session, whatever id the request names
		nid := NewSessionID()
		init := body
		if len(init) > maxInit {
			init = nil
		}
		if err := t.store.Start(ctx, nid, init); err != nil {
			storeError(w, err)
			return false, nil
		}
		t.remember(r, nid)
		*r = *r.WithContext(context.WithValue(ctx, newIDKey{}, nid))
		return true, nil
	}
	why := "missing Mcp-Session-Id header: send initialize first, then the session id it returned with every request"
	status := http.StatusBadRequest
	if id != "" {
		init, w2, err := t.store.Check(ctx, id, !t.known(id))
		if err != nil {
			storeError(w, err)
			return false, nil
		}
		if why = w2; why == "" {
			if f, ok := t.store.(Forwarder); ok && parsed && msg.Method == "" && len(msg.ID) > 0 && (len(msg.Result) > 0 || len(msg.Error) > 0) && !awaits(t.srv, id) {
				// a response to a request of another instance (forward.go)
				if err := f.Forward(ctx, id, body); err != nil {
					var fr *ForwardRefusal
					if errors.As(err, &fr) {
						sessionError(w, fr.Status, fr.Reason)
						return false, nil
					}
					storeError(w, err)
					return false, nil
				}
				w.WriteHeader(http.StatusAccepted)
				return false, nil
			}
			if init != nil && !t.known(id) {
				t.adopt(r, id, init)
			}
			if r.Method == http.MethodGet {
				t.store.Stream(id, +1)
				closed := func() {}
				if t.subs != nil {
					// this instance sends the session's updates while the
					// stream lasts (substore.go)
					closed = t.subs.streamOpened(r.Context(), id)
				}
				return true, func() { closed(); t.store.Stream(id, -1) }
			}
			return true, nil
		}
		why += "; start a new session with initialize"
		status = http.StatusNotFound
	}
	sessionError(w, status, why)
	return false, nil
}

// storeError answers a request whose session could not be read: 503 with
// Retry-After and a generic reason (the operator's log has the cause, from
// the store).
func storeError(w http.ResponseWriter, _ error) {
	w.Header().Set("Retry-After", "5")
	sessionError(w, http.StatusServiceUnavailable, "the session store is unavailable right now; retry in a moment")
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
