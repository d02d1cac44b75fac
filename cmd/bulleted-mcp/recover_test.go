package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `call` on a store whose HEAD was removed reads every bullet, says on
// stderr and in the tool result that HEAD was recovered, and neither that
// call nor the next one shrinks the log (before: an empty outline, exit 0,
// no word, and the next open compacted the log away).
func TestCallRecoversMissingHead(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 400
	}
	dir := t.TempDir()
	nodes := make([]map[string]any, n)
	for i := range nodes {
		nodes[i] = map[string]any{"text": "bullet"}
	}
	args, _ := json.Marshal(map[string]any{"nodes": nodes})
	var out, errb bytes.Buffer
	if c := run([]string{"call", "--store", dir, "insert_after", "-"}, bytes.NewReader(args), &out, &errb); c != 0 {
		t.Fatalf("insert: exit %d: %s", c, errb.String())
	}
	logPath := filepath.Join(dir, "blocks.log")
	info, err := os.Stat(logPath)
	if err != nil {
		t.Fatal(err)
	}
	size := info.Size()
	if err := os.Remove(filepath.Join(dir, "HEAD")); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if c := run([]string{"call", "--store", dir, "read_outline", `{"limit":3}`}, nil, &stdout, &stderr); c != 0 {
		t.Fatalf("read: exit %d: %s", c, stderr.String())
	}
	if !strings.Contains(stderr.String(), "bulleted-mcp: notice: The embedded store's HEAD file was missing: recovered it from the block log") {
		t.Fatalf("stderr does not say HEAD was recovered: %q", stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "Notice: The embedded store's HEAD file was missing") || !strings.Contains(stdout.String(), "- bullet") {
		t.Fatalf("the tool result does not say HEAD was recovered:\n%.300s", stdout.String())
	}
	// every bullet is there, the notice is not said again, the log is whole
	for _, cmd := range [][]string{{"export", "--store", dir, "--format", "markdown"}, {"call", "--store", dir, "read_outline", `{"limit":3}`}} {
		stdout.Reset()
		stderr.Reset()
		if c := run(cmd, nil, &stdout, &stderr); c != 0 {
			t.Fatalf("%s: exit %d: %s", cmd[0], c, stderr.String())
		}
		if strings.Contains(stderr.String(), "notice") || strings.Contains(stdout.String(), "Notice:") {
			t.Fatalf("%s: the notice is repeated: %q", cmd[0], stderr.String())
		}
		if got := strings.Count(stdout.String(), "- bullet"); cmd[0] == "export" && got != n {
			t.Fatalf("export: %d bullets, want %d", got, n)
		}
		if info, _ := os.Stat(logPath); info.Size() != size {
			t.Fatalf("%s: the log is %d bytes, was %d", cmd[0], info.Size(), size)
		}
	}
}

// `call` on a store whose signing.key is gone refuses, exit 1, says what to
// do, and changes nothing.
func TestCallRefusesWithoutKey(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	if c := run([]string{"call", "--store", dir, "insert_after", `{"text":"kept"}`}, nil, &out, &errb); c != 0 {
		t.Fatalf("insert: exit %d: %s", c, errb.String())
	}
	os.Remove(filepath.Join(dir, "signing.key"))
	logBefore, _ := os.ReadFile(filepath.Join(dir, "blocks.log"))
	out.Reset()
	errb.Reset()
	if c := run([]string{"call", "--store", dir, "read_outline"}, nil, &out, &errb); c != 1 {
		t.Fatalf("exit %d, want 1; stdout %q", c, out.String())
	}
	if !strings.Contains(errb.String(), "signing.key is missing") || !strings.Contains(errb.String(), "Restore signing.key") {
		t.Fatalf("stderr %q", errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "signing.key")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a signing.key was made")
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "blocks.log")); !bytes.Equal(after, logBefore) {
		t.Fatal("the log changed")
	}
}
