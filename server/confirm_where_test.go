package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
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

// meddler answers accept after another writer added a bullet the where
// filter selects: the set the person confirmed is not the set now.
type meddler struct {
	before func()
	asked  int
}

func (m *meddler) Elicit(_ context.Context, r mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	m.asked++
	m.before()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// TestConfirmWhereSetChanged: a where delete the person accepts after
// another writer changed what where selects is refused (conflict), nothing
// deleted: the confirmation was for the set shown.
func TestConfirmWhereSetChanged(t *testing.T) {
	env, l, _ := confirmSetup(t)
	other := outline.New(l)
	m := &meddler{before: func() {
		if _, err := other.Do(context.Background(), intent.Insert{Nodes: []intent.NewNode{{Text: "old note, late"}}}, false); err != nil {
			t.Error(err)
		}
	}}
	c := connect(t, env, mcp.ProtocolVersion20251125, nil, client.WithElicitationHandler(m))
	res := call(t, c, "delete_node", map[string]any{"where": map[string]any{"text": "old note"}}, nil)
	if m.asked != 1 || !res.IsError || errKind(res) != "conflict" {
		t.Fatalf("asked %d: want a conflict, got %v %s %v", m.asked, res.IsError, errKind(res), res.Content)
	}
	if n := nodeCount(t, l); n != 28 {
		t.Fatalf("%d bullets left, want 28 (nothing deleted)", n)
	}
}
