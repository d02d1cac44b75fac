package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted"
	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted/pgtest"
)

// lockedBuffer is a bytes.Buffer written by one goroutine, read by another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestHostedMemoryLimitSaid: serve --database --memory 256MiB holds the Go
// runtime to the budget (its soft limit set to the budget less the
// reserve for memory outside it) and says on stderr which limit is in
// force; a GOMEMLIMIT of the environment is kept and named instead.
func TestHostedMemoryLimitSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg, err := pgtest.Start()
	if err != nil {
		t.Fatalf("the hosted mode's test needs PostgreSQL: %v", err)
	}
	t.Cleanup(pg.Stop)
	key := make([]byte, 32)
	rand.Read(key)
	t.Setenv("BULLETED_MCP_SEAL_KEY", base64.StdEncoding.EncodeToString(key))
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })

	ctx, cancel := context.WithCancel(context.Background())
	var stderr lockedBuffer
	done := make(chan int)
	go func() {
		done <- serveHosted(ctx, &stderr, hostedFlags{addr: "127.0.0.1:0", publicURL: "http://127.0.0.1:1", database: pg.NewDatabase(t),
			dir: t.TempDir(), mem: &memoryFlags{memory: "256MiB", idle: time.Minute}})
	}()
	want := "Go soft memory limit 208.0 MiB: the memory budget 256.0 MiB less 48.0 MiB"
	inForce := int64(208 << 20)
	if env := os.Getenv("GOMEMLIMIT"); env != "" {
		want, inForce = "from GOMEMLIMIT="+env, old
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), want) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr does not say %q:\n%s", want, stderr.String())
	}
	if got := debug.SetMemoryLimit(-1); got != inForce {
		t.Errorf("the Go soft memory limit in force is %s, want %s", hosted.FormatBytes(got), hosted.FormatBytes(inForce))
	}
}
