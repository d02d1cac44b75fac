package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// ping is an initialize request (a ping needs a session first).
const ping = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

// post sends an initialize request through h with the given headers and returns the status.
func post(t *testing.T, h http.Handler, host string, headers map[string]string) int {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://"+host+"/mcp", strings.NewReader(ping))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Code
}

func TestHTTPOrigin(t *testing.T) {
	s := server.New(engine(t), true)
	cases := []struct {
		name   string
		addr   string
		allow  []string
		host   string
		origin string
		ok     bool
	}{
		{"no origin", "127.0.0.1:8080", nil, "127.0.0.1:8080", "", true},
		{"loopback origin", "127.0.0.1:8080", nil, "127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"localhost origin", "127.0.0.1:8080", nil, "localhost:8080", "http://localhost:3000", true},
		{"ipv6 loopback origin", "[::1]:8080", nil, "[::1]:8080", "http://[::1]:5173", true},
		{"foreign origin", "127.0.0.1:8080", nil, "127.0.0.1:8080", "https://evil.example", false},
		{"rebound host", "127.0.0.1:8080", nil, "evil.example:8080", "", false},
		{"rebound host and origin", "127.0.0.1:8080", nil, "evil.example:8080", "http://evil.example:8080", false},
		{"null origin", "127.0.0.1:8080", nil, "127.0.0.1:8080", "null", false},
		{"allowed origin", "127.0.0.1:8080", []string{"https://app.example"}, "127.0.0.1:8080", "https://APP.example:443", true},
		{"allowed origin's host", "127.0.0.1:8080", []string{"https://mcp.example"}, "mcp.example", "https://mcp.example", true},
		{"off loopback, allowed", "0.0.0.0:8080", []string{"https://app.example"}, "10.0.0.5:8080", "https://app.example", true},
		{"off loopback, loopback origin", "0.0.0.0:8080", nil, "10.0.0.5:8080", "http://localhost:8080", false},
		{"off loopback, no origin", "0.0.0.0:8080", nil, "10.0.0.5:8080", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := server.HTTPHandler(s, server.HTTPOptions{Addr: c.addr, AllowOrigins: c.allow})
			hdr := map[string]string{}
			if c.origin != "" {
				hdr["Origin"] = c.origin
			}
			code := post(t, h, c.host, hdr)
			if c.ok && code != http.StatusOK || !c.ok && code != http.StatusForbidden {
				t.Fatalf("status %d, want accepted: %v", code, c.ok)
			}
		})
	}
}

func TestHTTPBearerScheme(t *testing.T) {
	h := server.HTTPHandler(server.New(engine(t), true), server.HTTPOptions{Token: "s3cret"})
	cases := []struct {
		name, auth string
		ok         bool
	}{
		{"canonical", "Bearer s3cret", true},
		{"lower-case scheme", "bearer s3cret", true},
		{"upper-case scheme", "BEARER s3cret", true},
		{"two spaces", "Bearer  s3cret", true},
		{"token case matters", "Bearer S3CRET", false},
		{"token prefix", "Bearer s3cre", false},
		{"other scheme", "Basic s3cret", false},
		{"scheme only", "Bearer", false},
		{"none", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code := post(t, h, "127.0.0.1:8080", map[string]string{"Authorization": c.auth})
			if c.ok && code != http.StatusOK || !c.ok && code != http.StatusUnauthorized {
				t.Fatalf("status %d, want accepted: %v", code, c.ok)
			}
		})
	}
}

// Serve returns after its context ends (what SIGTERM does in serve): a
// request under way finishes, a listening stream is ended, and the port no
// longer accepts connections.
func TestHTTPGracefulShutdown(t *testing.T) {
	started := make(chan struct{}, 2)
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.HTTPHandler(server.New(engine(t), true), server.HTTPOptions{}))
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		io.WriteString(w, "done")
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		started <- struct{}{}
		<-r.Context().Done()
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- server.Serve(ctx, server.NewHTTPServer(mux), ln, time.Minute) }()

	resp, err := http.Post(url+"/mcp", "application/json", strings.NewReader(ping))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("ping: %d", resp.StatusCode)
	}
	slow := make(chan string, 1)
	go func() {
		resp, err := http.Post(url+"/slow", "text/plain", strings.NewReader("x"))
		if err != nil {
			slow <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		slow <- string(b)
	}()
	stream, err := http.Get(url + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	<-started
	<-started

	stop()
	// the stream ends without the test closing it
	if _, err := io.ReadAll(stream.Body); err != nil {
		t.Fatalf("stream: %v", err)
	}
	close(release)
	if got := <-slow; got != "done" {
		t.Fatalf("the request under way got %q", got)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(time.Minute): // a guard, not a timing assertion
		t.Fatal("Serve did not return")
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Fatal("still accepting connections after shutdown")
	}
}
