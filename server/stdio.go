package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"
)

// ServeStdio serves s over stdio: JSON-RPC lines read from in, written to
// out, until in ends or ctx is cancelled.
//
// Every notification a request sends (notify: its progress) is written
// before the request's response. mcp-go's stdio transport (v1.6.0) writes
// notifications from a goroutine of its own, taking them off a channel,
// while a response is written directly by the goroutine that served the
// request: a response could overtake the notification sent just before it,
// and a client drops progress that arrives after its result (the
// TypeScript SDK does). Here the request's own goroutine writes its
// notifications to out, under the same lock as everything else written
// there, before its handler returns.
func ServeStdio(ctx context.Context, s *mcpserver.MCPServer, in io.Reader, out io.Writer) error {
	w := &stdioWriter{w: out}
	ss := mcpserver.NewStdioServer(s)
	ss.SetContextFunc(func(ctx context.Context) context.Context {
		return context.WithValue(ctx, stdioKey{}, w)
	})
	return ss.Listen(ctx, in, w)
}

type stdioKey struct{}

// stdioWriter serialises the writes to stdout: mcp-go writes each message
// (a line) in one Write, under a lock of its own that notify cannot take.
type stdioWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *stdioWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// errNoServer: a notification sent with a context no MCP request is
// served under (a bug of the caller's).
var errNoServer = errors.New("no MCP server in the context: the notification was not sent")

// notify sends a notification about the request ctx serves, so that it
// reaches the client before the request's response: on stdio (ServeStdio)
// it is written before notify returns; on streamable HTTP mcp-go queues it
// on the request's own SSE stream, which it drains before writing the
// response; in process, mcp-go hands it over in order.
func notify(ctx context.Context, method string, params map[string]any) error {
	if w, ok := ctx.Value(stdioKey{}).(*stdioWriter); ok {
		session := mcpserver.ClientSessionFromContext(ctx)
		if session == nil || !session.Initialized() {
			return mcpserver.ErrNotificationNotInitialized
		}
		b, err := json.Marshal(mcp.JSONRPCNotification{
			JSONRPC: mcp.JSONRPC_VERSION,
			Notification: mcp.Notification{
				Method: method,
				Params: mcp.NotificationParams{AdditionalFields: params},
			},
		})
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	srv := mcpserver.ServerFromContext(ctx)
	if srv == nil {
		return errNoServer
	}
	return srv.SendNotificationToClient(ctx, method, params)
}
