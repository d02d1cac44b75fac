package server

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// bound, the last resort for a result over MaxResultBytes, never replaces
// or cuts the structured content: it shortens the text at a line end and
// says so in both parts.
func TestBoundKeepsStructuredContent(t *testing.T) {
	rows := make([]any, 400)
	for i := range rows {
		rows[i] = map[string]any{"rkey": "3kabcdefghi22", "text": strings.Repeat("x", 80)}
	}
	sc := map[string]any{"did": "did:plc:x", "nodes": rows, "cursor": "c1"}
	want, _ := json.Marshal(sc)
	res := mcp.NewToolResultStructured(sc, strings.Repeat("- a line of the page ·3kabcdefghi22\n", 2000))
	res = bound(res, 0, tools.PayloadBoth)
	got, _ := json.Marshal(res.StructuredContent)
	var back map[string]any
	json.Unmarshal(got, &back)
	delete(back, "notices")
	again, _ := json.Marshal(back)
	if string(again) != string(want) {
		t.Fatalf("structured content changed: %.300s", got)
	}
	txt := res.Content[0].(mcp.TextContent).Text
	if !strings.Contains(txt, "the structured content is complete") || !strings.Contains(string(got), "the text was cut") {
		t.Fatalf("the cut is not said in both parts: %.200s / %.200s", txt[len(txt)-200:], got)
	}
	if n := tools.ResultSize(res); n > MaxResultBytes {
		t.Fatalf("%d bytes after bound", n)
	}
	if !strings.HasSuffix(strings.SplitN(txt, "\n[", 2)[0], "·3kabcdefghi22") {
		t.Fatalf("the text is not cut at a line end: %.200s", txt)
	}
}
