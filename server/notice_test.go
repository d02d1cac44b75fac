package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
)

func callTool(t *testing.T, c *client.Client, name string, args map[string]any) (string, map[string]any) {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.CallTool(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("%s: %+v", name, res.Content)
	}
	var text strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text.WriteString(tc.Text)
		}
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var sc map[string]any
	json.Unmarshal(raw, &sc)
	return text.String(), sc
}

// A store opened with its HEAD recovered from the block log says so in
// the session's first tool result (text and structured "notices"), once,
// and reads every bullet.
func TestRecoveredHeadNotice(t *testing.T) {
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ws []store.Write
	clock := syntax.NewTIDClock(0)
	for i := range 150 {
		ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: clock.Next().String(),
			Value: map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprintf("bullet %d", i), "sortKey": fmt.Sprintf("a%05d", i), "createdAt": "2026-07-30T09:30:00.000Z"}})
	}
	if _, err := l.Apply(context.Background(), "", ws); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := os.Remove(filepath.Join(dir, "HEAD")); err != nil {
		t.Fatal(err)
	}
	l, err = store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := client.NewInProcessClient(server.New(outline.New(l), false))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	initialize(t, c)
	text, sc := callTool(t, c, "read_outline", map[string]any{"limit": 500})
	if !strings.HasPrefix(text, "Notice: The embedded store's HEAD file was missing: recovered it from the block log") {
		t.Fatalf("the first result does not start with the recovery notice:\n%.400s", text)
	}
	if !strings.Contains(text, "bullet 149") {
		t.Fatalf("the outline is not all there:\n%.400s", text)
	}
	notes, _ := sc["notices"].([]any)
	if len(notes) != 1 || !strings.Contains(fmt.Sprint(notes[0]), "150 records") {
		t.Fatalf("structured notices %v", sc["notices"])
	}
	text, sc = callTool(t, c, "read_outline", map[string]any{"limit": 1})
	if strings.Contains(text, "Notice:") || sc["notices"] != nil {
		t.Fatalf("the notice is repeated: %.200s %v", text, sc["notices"])
	}
}
