package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// An operation record cut short by a crash of the machine (its operation
// sent nothing) is said on stderr and in the session's first tool result,
// both parts, and set aside: the server opens and writes as before.
func TestTornRecordNotice(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	empty := ""
	rf := remoteFlags{pds: &empty, identifier: &empty, plc: &empty}
	text := resultText
	b, err := openBackend(ctx, dir, rf)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := callTool(ctx, b.env, "insert_after", `{"text":"one"}`); err != nil || res.IsError {
		t.Fatalf("insert: %v", err)
	}
	b.close()
	torn := filepath.Join(dir, "ops", "3kzzzzzzzzz22.json")
	if err := os.WriteFile(torn, []byte(`{"id":"3kzzzzzzzzz22","did":"did:`), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err = openBackend(ctx, dir, rf)
	if err != nil {
		t.Fatalf("a torn record kept the server from opening: %v", err)
	}
	defer b.close()
	var stderr strings.Builder
	b.tell(&stderr)
	want := "The operations journal held a record cut short, " + torn
	if !strings.Contains(stderr.String(), "bulleted-mcp: notice: "+want) {
		t.Fatalf("stderr %q", stderr.String())
	}
	res, err := callTool(ctx, b.env, "read_outline", "")
	if err != nil || res.IsError {
		t.Fatalf("read: %v", err)
	}
	if got := text(res); !strings.HasPrefix(got, "Notice: "+want) || !strings.Contains(got, "one") {
		t.Fatalf("the first result does not say the record was set aside:\n%.500s", got)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	if notes, _ := sc["notices"].([]any); len(notes) == 0 || !strings.Contains(notes[0].(string), want) {
		t.Fatalf("no structured notice: %v", sc["notices"])
	}
	res, err = callTool(ctx, b.env, "insert_after", `{"text":"two"}`)
	if err != nil || res.IsError || strings.Contains(text(res), "cut short") {
		t.Fatalf("the next call: %v %.300s", err, text(res))
	}
}

// resultText is a tool result's text content, its parts joined.
func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
