package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// deadlineRecorder is a ResponseRecorder that records the read deadlines
// the handler sets (http.ResponseController finds SetReadDeadline on it).
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// TestHTTPBodyBounded: serve --http reads a request body within
// server.BodyTimeout (the deadline lifted once it is read, so that the
// response may stream) and refuses one over server.MaxRequestBody with 413.
func TestHTTPBodyBounded(t *testing.T) {
	h := server.HTTPHandler(server.New(engine(t), true), server.HTTPOptions{Addr: "127.0.0.1:8080"})
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader(ping))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	w := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	before := time.Now()
	h.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Fatalf("initialize: %d %s", w.Code, w.Body)
	}
	if len(w.deadlines) != 2 || w.deadlines[0].Before(before) || w.deadlines[0].After(time.Now().Add(server.BodyTimeout)) || !w.deadlines[1].IsZero() {
		t.Fatalf("read deadlines set: %v, want one within %v, then lifted", w.deadlines, server.BodyTimeout)
	}
	big := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader(`{"x":"`+strings.Repeat("x", server.MaxRequestBody)+`"}`))
	big.Header.Set("Content-Type", "application/json")
	big.Header.Set("Accept", "application/json, text/event-stream")
	w = &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	h.ServeHTTP(w, big)
	if w.Code != http.StatusRequestEntityTooLarge && w.Code != http.StatusBadRequest {
		t.Fatalf("a body over %d bytes: %d", server.MaxRequestBody, w.Code)
	}
	if b := w.Body.String(); !strings.Contains(b, "too large") && !strings.Contains(b, "exceeds") {
		t.Fatalf("a body over %d bytes: %d %s", server.MaxRequestBody, w.Code, w.Body)
	}
}
