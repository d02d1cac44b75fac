package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// TestServeFreshStartSeesCommitsAtOnce: six fresh starts of serve --pds on
// the same data directory (the second on: a kept read and stream
// position). In each, for the first second and a half, another client
// commits and the agent reads at once, again and again: every commit is in
// the read that follows it. (The follower catches up within moments of
// start, and the reference PDS hands a commit to its stream up to a second
// later: a read answered from the kept state then missed it.)
func TestServeFreshStartSeesCommitsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	srv := pdstest.Start(t, pdstest.Options{})
	ctx := context.Background()
	a, err := srv.CreateAccount(ctx, "freshstart")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pds.PasswordEnv, a.AppPassword)
	app, err := srv.Client(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	n := 0
	for start := range 6 {
		began := time.Now()
		in, w := io.Pipe()
		outR, outW := io.Pipe()
		stderr := &syncBuffer{}
		done := make(chan int, 1)
		go func() {
			done <- run([]string{"serve", "--store", dir, "--pds", srv.URL, "--identifier", a.Handle, "--plc", srv.PLCURL}, in, outW, stderr)
			outW.Close()
		}()
		lines := bufio.NewScanner(outR)
		lines.Buffer(make([]byte, 4<<20), 4<<20)
		id := 0
		call := func(method string, params any) map[string]any {
			t.Helper()
			id++
			raw, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
			if _, err := w.Write(append(raw, '\n')); err != nil {
				t.Fatalf("start %d: %v; stderr:\n%s", start, err, stderr)
			}
			for lines.Scan() {
				var msg map[string]any
				if json.Unmarshal(lines.Bytes(), &msg) == nil && msg["id"] == float64(id) {
					return msg
				}
			}
			t.Fatalf("start %d: serve ended: %v; stderr:\n%s", start, lines.Err(), stderr)
			return nil
		}
		call("initialize", map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "test", "version": "1"}})
		w.Write([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"))
		reads := 0
		for time.Since(began) < 1500*time.Millisecond || reads < 2 {
			n++
			text := fmt.Sprintf("commit %d by the app", n)
			if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": a.DID.String(), "collection": "app.bulleted.node",
				"record": map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": fmt.Sprintf("k%04d", n), "createdAt": "2026-12-04T10:00:00.000Z"}}, nil); err != nil {
				t.Fatal(err)
			}
			res := call("tools/call", map[string]any{"name": "read_outline", "arguments": map[string]any{"limit": 1000}})
			raw, _ := json.Marshal(res["result"])
			if !strings.Contains(string(raw), text) {
				t.Fatalf("start %d, %.2f s after it: %q, committed just before, is missing from the read at once:\n%.1500s", start, time.Since(began).Seconds(), text, raw)
			}
			reads++
		}
		w.Close()
		if code := <-done; code != 0 {
			t.Fatalf("start %d: serve exited %d; stderr:\n%s", start, code, stderr)
		}
		t.Logf("start %d: %d commits read at once", start, reads)
	}
}
