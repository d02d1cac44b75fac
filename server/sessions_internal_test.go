package server

import (
	"strings"
	"testing"
	"time"
)

// A session idle for longer than the limit ends (and says so); one with
// an open GET stream does not; beyond max sessions the one unused the
// longest is pushed out, and its client is told why.
func TestSessionsExpireAndEvict(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := newSessions(time.Hour, 3)
	m.now = func() time.Time { return now }

	a := m.Generate()
	b := m.Generate()
	m.stream(b, +1) // b listens on a GET stream
	now = now.Add(30 * time.Minute)
	c := m.Generate()
	if why := m.touch(a); why != "" {
		t.Fatalf("a after 30 min: %s", why)
	}
	now = now.Add(61 * time.Minute) // a: 61 min idle, c: 61 min idle
	if why := m.touch(a); !strings.Contains(why, "expired after 1h0m0s") {
		t.Fatalf("a after 61 idle minutes: %q", why)
	}
	if _, err := m.Validate(a); err == nil {
		t.Fatal("Validate accepted an expired session")
	}
	if why := m.touch(b); why != "" {
		t.Fatalf("b with an open stream: %s", why)
	}
	m.stream(b, -1)

	// c is idle past the limit, so a new session ends it first; then b,
	// d, e fill the three places and f pushes out b (unused the longest)
	d := m.Generate()
	if why := m.touch(c); !strings.Contains(why, "expired") {
		t.Fatalf("c: %q", why)
	}
	now = now.Add(time.Minute)
	e := m.Generate()
	now = now.Add(time.Minute)
	if why := m.touch(d); why != "" {
		t.Fatal(why)
	}
	f := m.Generate()
	if why := m.touch(b); !strings.Contains(why, "at most 3 sessions") {
		t.Fatalf("b after f: %q", why)
	}
	for _, id := range []string{d, e, f} {
		if why := m.touch(id); why != "" {
			t.Fatalf("%s: %s", id, why)
		}
	}
	if len(m.live) != 3 || len(m.ended) > 3 {
		t.Fatalf("live %d, ended %d", len(m.live), len(m.ended))
	}
	if why := m.touch("mcp-session-x"); !strings.Contains(why, "unknown session") {
		t.Fatalf("unknown: %q", why)
	}
}
