package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// Every progress notification of a call reaches a stdio client before the
// call's result, on a busy machine too: mcp-go writes notifications from a
// goroutine of its own, and a client (the TypeScript SDK) drops progress
// that follows its result. The calls are two-commit inserts with a
// progress token (two notifications each), made while busy goroutines hold
// the processors.
func TestStdioProgressBeforeResult(t *testing.T) {
	const calls = 24
	busy(t)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- server.ServeStdio(ctx, server.New(engine(t), false), inR, outW); outW.Close() }()
	defer func() { inW.Close(); <-served }()

	send := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := inW.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	type message struct {
		ID     *int            `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	// the reader counts, per call, the notifications before its result and
	// any after it
	var before, after [calls + 1]atomic.Int32
	var answered [calls + 1]atomic.Bool
	results := make(chan message, calls+1)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var m message
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				results <- message{Error: json.RawMessage(fmt.Sprintf("%q", sc.Text()))}
				continue
			}
			switch {
			case m.Method == "notifications/progress":
				var p struct {
					Token int `json:"progressToken"`
				}
				if json.Unmarshal(m.Params, &p) != nil || p.Token < 1 || p.Token > calls {
					results <- message{Error: json.RawMessage(fmt.Sprintf("%q", sc.Text()))}
					continue
				}
				if answered[p.Token].Load() {
					after[p.Token].Add(1)
				} else {
					before[p.Token].Add(1)
				}
			case m.ID != nil && *m.ID >= 1 && *m.ID <= calls:
				answered[*m.ID].Store(true)
				results <- m
			case m.ID != nil:
				results <- m // initialize
			}
		}
	}()

	send(map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": mcp.LATEST_LEGACY_PROTOCOL_VERSION, "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": "test", "version": "1"}}})
	if m := <-results; m.ID == nil || *m.ID != 0 || m.Error != nil {
		t.Fatalf("initialize: %+v", m)
	}
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	nodes := make([]any, 250) // two commits
	for i := range nodes {
		nodes[i] = map[string]any{"text": "b"}
	}
	for id := 1; id <= calls; id++ {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
			"name": "insert_after", "arguments": map[string]any{"nodes": nodes},
			"_meta": map[string]any{"progressToken": id}}})
	}
	late := 0
	for range calls {
		m := <-results
		if m.ID == nil || m.Error != nil {
			t.Fatalf("not a result: %+v %s", m, m.Error)
		}
		if n := before[*m.ID].Load(); n != 2 {
			late++
			t.Errorf("call %d: %d of 2 progress notifications before its result", *m.ID, n)
		}
	}
	if late > 0 {
		t.Fatalf("%d of %d results overtook their progress", late, calls)
	}
}

// busy holds the processors, as other work on a loaded machine does: two
// of them (GOMAXPROCS), each wanted by two spinning goroutines, until the
// test ends.
func busy(t *testing.T) {
	old := runtime.GOMAXPROCS(2)
	stop := make(chan struct{})
	var spinners sync.WaitGroup
	for range 4 {
		spinners.Add(1)
		go func() {
			defer spinners.Done()
			for n := 0; ; n++ {
				if n%1024 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
			}
		}()
	}
	t.Cleanup(func() {
		close(stop)
		spinners.Wait()
		runtime.GOMAXPROCS(old)
	})
}

// The same over streamable HTTP: a call's notifications go out on its own
// SSE stream, ahead of its response (mcp-go routes a notification sent
// while a POST is handled to that POST's stream and drains it before the
// response), in a session with its GET stream open (the other stream that
// could carry them) and at 2026-07-28 (no session).
func TestHTTPProgressBeforeResult(t *testing.T) {
	const calls = 12
	busy(t)
	srv := httptest.NewServer(server.HTTPHandler(server.New(engine(t), false), server.HTTPOptions{}))
	defer srv.Close()
	c := rawClient{t, srv.URL}
	legacy := map[string]string{"MCP-Protocol-Version": "2025-06-18"}
	session := c.initialize()
	// the session's standalone stream, open throughout
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	get.Header.Set("Accept", "text/event-stream")
	get.Header.Set("Mcp-Session-Id", session)
	get.Header.Set("MCP-Protocol-Version", "2025-06-18")
	stream, err := http.DefaultClient.Do(get)
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %v %v", err, stream)
	}
	defer stream.Body.Close()

	nodes := make([]any, 250) // two commits
	for i := range nodes {
		nodes[i] = map[string]any{"text": "b"}
	}
	call := func(id int, modern bool) (string, error) {
		meta := map[string]any{"progressToken": id}
		hdr, sess := legacy, session
		if modern {
			meta["io.modelcontextprotocol/protocolVersion"] = "2026-07-28"
			meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{}
			hdr, sess = map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "insert_after"}, ""
		}
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": map[string]any{
			"name": "insert_after", "arguments": map[string]any{"nodes": nodes}, "_meta": meta}})
		r := c.do(http.MethodPost, sess, string(b), hdr)
		if r.status != http.StatusOK {
			return "", fmt.Errorf("status %d: %.300s", r.status, r.body)
		}
		// the events in the order they were sent
		// (or the result alone, as JSON, when nothing came before it)
		events := []string{r.body}
		if !strings.HasPrefix(r.body, "{") {
			events = nil
			for _, line := range strings.Split(r.body, "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok {
					events = append(events, data)
				}
			}
		}
		progress := 0
		for _, data := range events {
			var m struct {
				ID     *int   `json:"id"`
				Method string `json:"method"`
				Params struct {
					Token int `json:"progressToken"`
				} `json:"params"`
				Result json.RawMessage `json:"result"`
			}
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				return "", fmt.Errorf("event %q: %v", data, err)
			}
			switch {
			case m.Method == "notifications/progress" && m.Params.Token != id:
				return "", fmt.Errorf("another call's progress on this call's stream: %s", data)
			case m.Method == "notifications/progress":
				progress++
			case m.ID != nil && *m.ID == id && m.Result != nil:
				if progress != 2 {
					return fmt.Sprintf("%d of 2 progress notifications before the result", progress), nil
				}
				return "", nil
			}
		}
		return "", fmt.Errorf("no result in %.500s", r.body)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var late []string
	for id := 1; id <= calls; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			what, err := call(id, id%2 == 0)
			if err != nil {
				t.Errorf("call %d: %v", id, err)
				return
			}
			if what != "" {
				mu.Lock()
				late = append(late, fmt.Sprintf("call %d (modern %v): %s", id, id%2 == 0, what))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(late) > 0 {
		t.Fatalf("%d of %d results overtook their progress: %v", len(late), calls, late)
	}
}
