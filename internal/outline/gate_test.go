package outline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// The gate's rule 2 for notes: a plan made with the kit that deletes a
// bullet and keeps its note is refused, in a dry run and for real, and
// nothing is written; the same plan with the note deleted too passes.
func TestGateKeepsNoNoteOfADeletedBullet(t *testing.T) {
	ctx := context.Background()
	e := outline.New(openLocal(t, t.TempDir()))
	out, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "with a note", Note: "the note"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	key := out.Plan.Created[0].RKey
	del := func(note bool) func(p *outline.Planner) error {
		return func(p *outline.Planner) error {
			it, err := p.Node(key)
			if err != nil {
				return err
			}
			if it.Note == nil {
				return fmt.Errorf("the bullet has no note")
			}
			p.Delete(it.Rec, "")
			if note {
				p.Delete(*it.Note, "")
			}
			return nil
		}
	}
	for _, dryRun := range []bool{true, false} {
		_, err := e.DoFunc(ctx, dryRun, del(false))
		if !errors.Is(err, outline.ErrInvalidInput) {
			t.Fatalf("dry run %v: the note kept: want a refusal, got %v", dryRun, err)
		}
	}
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tr.Record(lexicon.Note, key); !ok || tr.Nodes.Get(key) == nil {
		t.Fatal("a refused plan wrote")
	}
	if _, err := e.DoFunc(ctx, false, del(true)); err != nil {
		t.Fatalf("the bullet with its note: %v", err)
	}
}
