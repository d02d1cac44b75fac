package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// Confirmation is decided by the gate from what a plan removes and moves,
// whatever made the plan: these paths asked nothing before it was.

func gateEnv(t *testing.T) (*tools.Env, store.Repository) {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	rules := tools.DefaultConfirm // asks above 20 removed
	return &tools.Env{Engine: outline.New(l), Confirm: &rules}, l
}

func texts(n int, f string) []intent.NewNode {
	var ns []intent.NewNode
	for i := range n {
		ns = append(ns, intent.NewNode{Text: fmt.Sprintf(f, i)})
	}
	return ns
}

// TestConfirmUndoOfBigInsert: undo of a 300-bullet insert deletes 300
// bullets: it asks, declined writes nothing, accepted deletes them.
func TestConfirmUndoOfBigInsert(t *testing.T) {
	env, l := gateEnv(t)
	if _, err := env.Engine.Do(context.Background(), intent.Insert{Nodes: texts(300, "imported %d")}, false); err != nil {
		t.Fatal(err)
	}
	p := &person{answer: mcp.ElicitationResponseActionDecline}
	c := connect(t, env, mcp.ProtocolVersion20251125, p)
	res := call(t, c, "undo", map[string]any{}, nil)
	if len(p.asked) != 1 || !strings.Contains(p.asked[0], "300 bullet(s) deleted") || errKind(res) != "declined" {
		t.Fatalf("undo of 300: asked %q, kind %q", p.asked, errKind(res))
	}
	if n := nodeCount(t, l); n != 300 {
		t.Fatalf("a declined undo wrote: %d bullets", n)
	}
	p.answer = mcp.ElicitationResponseActionAccept
	if res := call(t, c, "undo", map[string]any{}, nil); res.IsError {
		t.Fatalf("accepted undo: %v", res.Content)
	}
	if n := nodeCount(t, l); n != 0 || len(p.asked) != 2 {
		t.Fatalf("accepted undo: %d bullets left, asked %d times", n, len(p.asked))
	}
}

// TestConfirmCountsMirrors: deleting a bullet that holds 30 mirrors removes
// 31 rows: it asks (only nodes were counted before).
func TestConfirmCountsMirrors(t *testing.T) {
	env, l := gateEnv(t)
	ctx := context.Background()
	out, err := env.Engine.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "holder"}, {Text: "original"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	holder, orig := out.Plan.Created[0].RKey, out.Plan.Created[1].RKey
	for range 30 {
		if _, err := env.Engine.Do(ctx, intent.Mirror{Original: orig, Pos: outline.Position{Parent: holder}}, false); err != nil {
			t.Fatal(err)
		}
	}
	p := &person{answer: mcp.ElicitationResponseActionDecline}
	c := connect(t, env, mcp.ProtocolVersion20251125, p)
	res := call(t, c, "delete_node", map[string]any{"node": holder, "children": "subtree"}, nil)
	if len(p.asked) != 1 || !strings.Contains(p.asked[0], "31 bullet(s) deleted (30 of them mirrors)") || errKind(res) != "declined" {
		t.Fatalf("delete of 1 + 30 mirrors: asked %q, kind %q", p.asked, errKind(res))
	}
	if n := nodeCount(t, l); n != 2 {
		t.Fatalf("a declined delete wrote: %d bullets", n)
	}
}

// TestConfirmThresholdEdge: 20 removed asks nothing, 21 asks (the rule is
// "more than 20").
func TestConfirmThresholdEdge(t *testing.T) {
	for _, n := range []int{20, 21} {
		env, l := gateEnv(t)
		out, err := env.Engine.Do(context.Background(), intent.Insert{Nodes: []intent.NewNode{{Text: "box", Children: texts(n-1, "in box %d")}}}, false)
		if err != nil {
			t.Fatal(err)
		}
		p := &person{answer: mcp.ElicitationResponseActionAccept}
		c := connect(t, env, mcp.ProtocolVersion20251125, p)
		if res := call(t, c, "delete_node", map[string]any{"node": out.Plan.Created[0].RKey, "children": "subtree"}, nil); res.IsError {
			t.Fatalf("%d: %v", n, res.Content)
		}
		if want := map[int]int{20: 0, 21: 1}[n]; len(p.asked) != want {
			t.Fatalf("a delete of %d bullets asked %d times, want %d", n, len(p.asked), want)
		}
		if left := nodeCount(t, l); left != 0 {
			t.Fatalf("%d: %d bullets left", n, left)
		}
	}
}

// TestConfirmImport: an import is a write like any other: its undo asks,
// and so would a delete it made (the gate counts, not the tool).
func TestConfirmUndoImport(t *testing.T) {
	env, l := gateEnv(t)
	p := &person{answer: mcp.ElicitationResponseActionDecline}
	c := connect(t, env, mcp.ProtocolVersion20251125, p)
	var md strings.Builder
	for i := range 40 {
		fmt.Fprintf(&md, "- line %d\n", i)
	}
	if res := call(t, c, "import_outline", map[string]any{"content": md.String()}, nil); res.IsError || len(p.asked) != 0 {
		t.Fatalf("import: %v, asked %d", res.Content, len(p.asked))
	}
	if res := call(t, c, "undo", map[string]any{}, nil); errKind(res) != "declined" || len(p.asked) != 1 {
		t.Fatalf("undo of an import of 40: kind %q, asked %d", errKind(res), len(p.asked))
	}
	if n := nodeCount(t, l); n != 40 {
		t.Fatalf("declined: %d bullets", n)
	}
}
