package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
)

func engine(t *testing.T) *outline.Engine {
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return outline.New(l)
}

func initialize(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
}

// A plan of 450 creates is three commits; a request with a progress token
// gets a notification before each.
func TestProgressNotifications(t *testing.T) {
	c, err := client.NewInProcessClient(server.New(engine(t), false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var mu sync.Mutex
	var got []map[string]any
	third := make(chan struct{})
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == "notifications/progress" {
			mu.Lock()
			got = append(got, n.Params.AdditionalFields)
			if len(got) == 3 {
				close(third)
			}
			mu.Unlock()
		}
	})
	initialize(t, c)
	var nodes []any
	for i := 0; i < 450; i++ {
		nodes = append(nodes, map[string]any{"text": "b"})
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "insert_after"
	req.Params.Arguments = map[string]any{"nodes": nodes}
	req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
	res, err := c.CallTool(context.Background(), req)
	if err != nil || res.IsError {
		t.Fatalf("insert: %v %+v", err, res)
	}
	// the in-process client hands notifications over on another goroutine:
	// the last may follow the result (seen under load); wait for it, not
	// for a time (the bound only ends a test that would hang)
	select {
	case <-third:
	case <-time.After(time.Minute):
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("want 3 progress notifications, got %d: %v", len(got), got)
	}
	for i, n := range got {
		if n["progressToken"] != "tok-1" || n["total"] != float64(3) && n["total"] != 3 || n["progress"] != float64(i) && n["progress"] != i {
			t.Fatalf("notification %d: %v", i, n)
		}
		if !strings.Contains(n["message"].(string), "batch") {
			t.Fatalf("notification %d message: %v", i, n["message"])
		}
	}
}

func TestHTTPBearerToken(t *testing.T) {
	h := server.HTTPHandler(server.New(engine(t), true), server.HTTPOptions{Token: "s3cret"})
	ts := httptest.NewServer(h)
	defer ts.Close()
	// no token: 401 before anything reaches the MCP server
	resp, err := http.Post(ts.URL+"/mcp", "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
		t.Fatalf("without a token: %d", resp.StatusCode)
	}
	// wrong token
	bad, _ := client.NewStreamableHttpClient(ts.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer nope"}))
	if err := bad.Start(context.Background()); err == nil {
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
		if _, err := bad.Initialize(context.Background(), init); err == nil {
			t.Fatal("a wrong token was accepted")
		}
	}
	// the right token: a real session, read-only tools only
	c, err := client.NewStreamableHttpClient(ts.URL+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	initialize(t, c)
	list, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.Annotations.ReadOnlyHint == nil || !*tl.Annotations.ReadOnlyHint {
			t.Fatalf("--read-only exposed %s", tl.Name)
		}
	}
	if len(list.Tools) < 3 {
		t.Fatalf("%d tools", len(list.Tools))
	}
}

func TestCheckHTTP(t *testing.T) {
	for addr, loop := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:9": true, ":8080": false, "0.0.0.0:80": false, "10.0.0.5:80": false} {
		if got := server.IsLoopback(addr); got != loop {
			t.Errorf("IsLoopback(%s) = %v", addr, got)
		}
		err := server.CheckHTTP(addr, "")
		if loop != (err == nil) {
			t.Errorf("CheckHTTP(%s, no token) = %v", addr, err)
		}
		if !loop && !errors.Is(err, server.ErrNeedToken) {
			t.Errorf("CheckHTTP(%s): want ErrNeedToken, got %v", addr, err)
		}
		if err := server.CheckHTTP(addr, "tok"); err != nil {
			t.Errorf("CheckHTTP(%s, token) = %v", addr, err)
		}
	}
}
