package server

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

//go:embed instructions.md
var Instructions string

// Version of the server.
const Version = "0.1.0"

// New returns the MCP server over engine; readOnly exposes only read-only
// tools.
func New(engine *outline.Engine, readOnly bool) *mcpserver.MCPServer {
	return NewWith(&tools.Env{Engine: engine}, readOnly)
}

// NewWith is New with a full tool environment (the PDS backend adds a reader
// of other identities' repositories).
func NewWith(env *tools.Env, readOnly bool) *mcpserver.MCPServer {
	s := mcpserver.NewMCPServer("bulleted-mcp", Version,
		mcpserver.WithToolCapabilities(false),
		mcpserver.WithInstructions(Instructions),
		mcpserver.WithRecovery(),
	)
	for _, t := range tools.All() {
		if readOnly && !t.ReadOnly {
			continue
		}
		t := t
		s.AddTool(t.MCP(), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args := tools.Args(req.GetArguments())
			if args == nil {
				args = tools.Args{}
			}
			if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
				ctx = outline.WithProgress(ctx, progressNotifier(ctx, req.Params.Meta.ProgressToken))
			}
			return t.Handle(ctx, env, args)
		})
	}
	return s
}

// progressNotifier sends notifications/progress for a request that asked
// for them (a multi-commit plan reports before each commit).
func progressNotifier(ctx context.Context, token mcp.ProgressToken) outline.Progress {
	srv := mcpserver.ServerFromContext(ctx)
	return func(done, total, writes, allWrites int) {
		if srv == nil {
			return
		}
		_ = srv.SendNotificationToClient(ctx, "notifications/progress", map[string]any{
			"progressToken": token,
			"progress":      done,
			"total":         total,
			"message":       fmt.Sprintf("committing batch %d of %d (%d of %d writes committed so far)", done+1, total, writes, allWrites),
		})
	}
}

// ErrNeedToken: an HTTP listener off loopback needs BULLETED_MCP_TOKEN.
var ErrNeedToken = errors.New("refusing to listen beyond loopback without a bearer token (set BULLETED_MCP_TOKEN)")

// IsLoopback reports whether addr (host:port) binds only loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// HTTPHandler serves streamable HTTP on /mcp; with a token, every request
// must carry "Authorization: Bearer TOKEN".
func HTTPHandler(s *mcpserver.MCPServer, token string) http.Handler {
	h := mcpserver.NewStreamableHTTPServer(s)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	if token == "" {
		return mux
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(strings.TrimSpace(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bulleted-mcp"`)
			http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// CheckHTTP validates an HTTP listen address and token.
func CheckHTTP(addr, token string) error {
	if !IsLoopback(addr) && token == "" {
		return fmt.Errorf("%s: %w", addr, ErrNeedToken)
	}
	return nil
}
