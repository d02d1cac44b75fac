package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeFollowSays: what following cannot do is said on stderr, not
// silently dropped: a stream that cannot be reached (once, however often it
// is retried), and a stream position missing beside the read cache it was
// kept with. A serve that ends keeps the position (written as the follower
// ends), and the next start uses it without a word.
func TestServeFollowSays(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	srv := pdstest.Start(t, pdstest.Options{})
	ctx := context.Background()
	a, err := srv.CreateAccount(ctx, "follower")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pds.PasswordEnv, a.AppPassword)
	dir := t.TempDir()
	// serve runs until wait says so, then its stdin ends
	serve := func(wait func(stderr *syncBuffer) bool, extra ...string) string {
		t.Helper()
		in, w := io.Pipe()
		var stdout bytes.Buffer
		stderr := &syncBuffer{}
		args := append([]string{"serve", "--store", dir, "--pds", srv.URL, "--identifier", a.Handle, "--plc", srv.PLCURL}, extra...)
		done := make(chan int)
		go func() { done <- run(args, in, &stdout, stderr) }()
		for deadline := time.Now().Add(30 * time.Second); !wait(stderr); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("serve %v: not within 30 s; stderr:\n%s", extra, stderr)
			}
		}
		w.Close()
		if code := <-done; code != 0 {
			t.Fatalf("serve %v exited %d; stderr:\n%s", extra, code, stderr)
		}
		return stderr.String()
	}
	files := func(pattern string) []string {
		m, _ := filepath.Glob(filepath.Join(dir, pattern))
		return m
	}

	// a Jetstream nobody answers at: said once, though retried
	out := serve(func(e *syncBuffer) bool {
		time.Sleep(3500 * time.Millisecond) // two attempts at least (backoff 1 s, 2 s)
		return true
	}, "--jetstream", "ws://127.0.0.1:1/subscribe")
	if n := strings.Count(out, "the commit stream is down"); n != 1 {
		t.Fatalf("an unreachable stream said %d times, want once:\n%s", n, out)
	}

	// the PDS's own stream: the app's edit is taken in, and the position is
	// kept with the cache when serve ends
	app, err := srv.Client(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	var posted time.Time
	serve(func(*syncBuffer) bool {
		if len(files("repo-*.car")) == 0 {
			return false // the follower's first read keeps the cache
		}
		// an edit every half second until one comes through the stream (one
		// made before the follower connected is read, not streamed)
		if time.Since(posted) > 500*time.Millisecond {
			posted = time.Now()
			if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": a.DID.String(), "collection": "app.bulleted.node",
				"record": map[string]any{"$type": "app.bulleted.node", "text": "from the app", "sortKey": "z", "createdAt": "2026-12-04T10:00:00.000Z"}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		// the commit taken in from the stream: on so small a repository it
		// rewrites the cache, and the position with it
		return len(files("stream-*.json")) > 0
	})
	pos := files("stream-*.json")
	if len(pos) != 1 {
		t.Fatalf("no stream position kept after serve ended: %v", files("*"))
	}
	out = serve(func(*syncBuffer) bool { time.Sleep(time.Second); return true })
	if strings.Contains(out, "position") {
		t.Fatalf("a kept position was not used silently:\n%s", out)
	}

	// the position deleted while the cache stays: damage, said
	if err := os.Remove(pos[0]); err != nil {
		t.Fatal(err)
	}
	out = serve(func(e *syncBuffer) bool { return strings.Contains(e.String(), "position") })
	if !strings.Contains(out, "is missing beside the cache: caught up by a read instead") {
		t.Fatalf("a missing stream position was not said:\n%s", out)
	}
}
