package server

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Forwarder, if a SessionStore also is one, carries a client's response
// to a request a server sent it mid-call (the confirmation's elicitation,
// protocols before 2026-07-28) to the instance whose call waits for it:
// behind a balancer without affinity the response may reach any instance.
type Forwarder interface {
	// Forward hands msg (a JSON-RPC response of session's client) to the
	// instance that waits for it.
	Forward(ctx context.Context, session string, msg []byte) error
	// Receive makes deliver get the responses forwarded to this instance
	// (every instance gets every one; deliver passes on those it awaits).
	Receive(deliver func(session string, msg []byte))
}

// ForwardRefusal is a Forward error the client is told of, with its HTTP
// status (a response too large to forward, say: 413); any other Forward
// error is the store's (503).
type ForwardRefusal struct {
	Status int
	Reason string
}

func (e *ForwardRefusal) Error() string { return e.Reason }

// awaiting counts, per server and session, the requests waiting for their
// client's response (a process may run several instances' servers).
var awaiting sync.Map // awaitKey → *atomic.Int32

type awaitKey struct {
	srv     *mcpserver.MCPServer
	session string
}

// await marks session of srv as waiting here for a response until done.
func await(srv *mcpserver.MCPServer, session string) (done func()) {
	k := awaitKey{srv, session}
	v, _ := awaiting.LoadOrStore(k, new(atomic.Int32))
	n := v.(*atomic.Int32)
	n.Add(1)
	return func() {
		if n.Add(-1) <= 0 {
			awaiting.CompareAndDelete(k, n)
		}
	}
}

// awaits reports whether a request of srv waits for session's client.
func awaits(srv *mcpserver.MCPServer, session string) bool {
	v, ok := awaiting.Load(awaitKey{srv, session})
	return ok && v.(*atomic.Int32).Load() > 0
}

// deliver passes a response forwarded from another instance to this
// transport, when a call here waits for it.
func (t *transport) deliver(session string, msg []byte) {
	if !awaits(t.srv, session) {
		return
	}
	req, err := http.NewRequest(http.MethodPost, "http://localhost/mcp", bytes.NewReader(msg))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcpserver.HeaderKeySessionID, session)
	t.h.ServeHTTP(&discard{h: http.Header{}}, req)
}
