package main

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// TestServePayload: serve --payload refuses an unknown mode; over stdio
// the mode a session gets is said on stderr at its start and in the
// instructions initialize returns (auto: structured for Claude Code).
func TestServePayload(t *testing.T) {
	var stderr bytes.Buffer
	if code := runServe([]string{"--store", t.TempDir(), "--payload", "verbose"}, nil, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), "unknown payload mode") {
		t.Fatalf("--payload verbose: exit %d: %s", code, stderr.String())
	}
	for _, c := range []struct {
		env, client, want string
	}{
		{"", "claude-code", `payload structured (--payload auto, client "claude-code")`},
		{"", "some-client", `payload both (--payload auto, client "some-client")`},
		{"text", "claude-code", "payload text (set by --payload text)"},
	} {
		t.Setenv("BULLETED_PAYLOAD", c.env)
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		errs := &syncBuffer{}
		done := make(chan int, 1)
		go func() { done <- runServe([]string{"--store", t.TempDir()}, inR, outW, errs); outW.Close() }()
		go io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"`+c.client+`","version":"2.1"}}}`+"\n")
		line, err := bufio.NewReader(outR).ReadString('\n')
		if err != nil {
			t.Fatalf("%s: no answer to initialize: %v; stderr %s", c.client, err, errs.String())
		}
		inW.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not end after stdin closed")
		}
		mode := strings.Fields(strings.TrimPrefix(c.want, "payload "))[0]
		if !strings.Contains(line, `Payload: `+mode+` (`) {
			t.Errorf("%s: the instructions do not say %s: %.300s", c.client, mode, line[max(0, len(line)-400):])
		}
		if n := strings.Count(errs.String(), "session with "); n != 1 || !strings.Contains(errs.String(), c.want) {
			t.Errorf("%s: stderr said the mode %d time(s), want once %q:\n%s", c.client, n, c.want, errs.String())
		}
	}
}
