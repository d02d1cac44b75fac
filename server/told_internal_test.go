package server

import (
	"context"
	"errors"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestToldOfStopsAtAFailedUpdate: a session whose update failed to leave
// (its stream broke while it was told) is counted as told of the
// revision before that commit, not after it, so that its next stream (on
// any instance: the revision is stored when the stream closes) tells it
// again; a session the update reached is told of the commit.
func TestToldOfStopsAtAFailedUpdate(t *testing.T) {
	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := outline.New(l)
	if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "one"}}}, false); err != nil {
		t.Fatal(err)
	}
	t1, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSubscriptions()
	const uri = "bulleted://outline"
	for _, session := range []string{"broken", "fine"} {
		if err := s.add(session, uri, t1, "", true); err != nil {
			t.Fatal(err)
		}
	}
	s.setSender("broken", func(string) error { return errors.New("the stream broke") })
	s.setSender("fine", func(string) error { return nil })
	if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "two"}}}, false); err != nil {
		t.Fatal(err)
	}
	t2, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if t2.Rev <= t1.Rev {
		t.Fatalf("revs %s, %s", t1.Rev, t2.Rev)
	}
	if sent := s.CommitSeen(t2); sent != 1 {
		t.Fatalf("%d updates sent, want 1 (the fine session's)", sent)
	}
	if got := s.toldOf("broken"); got != t1.Rev {
		t.Errorf("the broken session counts as told of %s, want %s (the rev before the update it missed)", got, t1.Rev)
	}
	if got := s.toldOf("fine"); got != t2.Rev {
		t.Errorf("the fine session counts as told of %s, want %s", got, t2.Rev)
	}
	s.drop("broken")
	if _, ok := s.missed["broken"]; ok {
		t.Error("a dropped session's missed revision is kept")
	}
}
