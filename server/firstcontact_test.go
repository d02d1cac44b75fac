package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestFirstContactSize: what a client is sent before its first tool call
// (initialize with the instructions, tools/list with the output schemas,
// resources/list, resources/templates/list, prompts/list), as the JSON-RPC
// responses go on the wire, is at most 32 KB in every payload mode (it was
// 45.7 KB in both and structured: 26 KB of output schemas spelling out
// every field and error kind on each tool).
func TestFirstContactSize(t *testing.T) {
	l := payloadRepo(t, 200)
	for _, mode := range []tools.Payload{tools.PayloadBoth, tools.PayloadStructured, tools.PayloadText, tools.PayloadAuto} {
		s, err := server.NewWithOptions(&tools.Env{Engine: outline.New(l)}, server.Options{Payload: mode})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		total := 0
		var parts []string
		for i, m := range []string{
			`"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"claude-code","version":"1"}}`,
			`"tools/list"`, `"resources/list"`, `"resources/templates/list"`, `"prompts/list"`,
		} {
			raw := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%s}`, i+1, m)
			res := s.HandleMessage(ctx, json.RawMessage(raw))
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			if json.Valid(b) && len(b) < 60 {
				t.Fatalf("%s: %s", m, b)
			}
			total += len(b)
			parts = append(parts, fmt.Sprintf("%d", len(b)))
		}
		t.Logf("%s: first contact %d B (initialize, tools, resources, templates, prompts: %v)", mode, total, parts)
		if total > 32*1024 {
			t.Errorf("%s: first contact is %d B, over 32 KB", mode, total)
		}
	}
}
