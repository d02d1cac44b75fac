package server_test

import (
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestConfirmWhereDelete: a delete that selects its bullets by where (25
// "old note" bullets) is held by the gate's confirmation as any other
// write: declined, nothing is written; accepted, the 25 go, and "keep"
// stays.
func TestConfirmWhereDelete(t *testing.T) {
	env, l, _ := confirmSetup(t)
	p := &person{answer: mcp.ElicitationResponseActionDecline}
	c := connect(t, env, mcp.ProtocolVersion20251125, p)
	del := map[string]any{"where": map[string]any{"text": "old note"}}
	res := call(t, c, "delete_node", del, nil)
	if !res.IsError || errKind(res) != "declined" {
		t.Fatalf("declined: want an error of kind declined, got %v %s", res.IsError, errKind(res))
	}
	if n := nodeCount(t, l); n != 27 {
		t.Fatalf("declined: %d bullets left, want 27", n)
	}
	if len(p.asked) != 1 || !strings.Contains(p.asked[0], "25 bullet(s) deleted") {
		t.Fatalf("asked %q", p.asked)
	}
	p.answer = mcp.ElicitationResponseActionAccept
	if res := call(t, c, "delete_node", del, nil); res.IsError {
		t.Fatalf("accepted: %v", res.Content)
	}
	if n := nodeCount(t, l); n != 2 {
		t.Fatalf("accepted: %d bullets left, want 2", n)
	}
}
