package enginetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

// sortChildren: the top level sorted by text lands in that order as read
// back from the repository, with only the keys that had to change written,
// and undo restores the order.
func sortChildren(t *testing.T, open Open) {
	ctx := context.Background()
	e := outline.New(open(t))
	Insert(t, e, outline.Position{}, "delta", "Alpha", "charlie 10", "bravo", "charlie 9", "echo")
	before := Texts(t, e, "")
	out, err := e.Do(ctx, intent.Sort{By: intent.SortText}, false)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(Texts(t, e, "")), "[Alpha bravo charlie 9 charlie 10 delta echo]"; got != want {
		t.Fatalf("sorted: %s, want %s", got, want)
	}
	// from [delta Alpha charlie10 bravo charlie9 echo]: Alpha, bravo,
	// charlie 9 and echo are already in order and keep their keys
	if n := len(out.Plan.Writes); n != 2 {
		t.Errorf("%d writes, want 2 (delta and charlie 10)", n)
	}
	if _, err := e.Undo(ctx, 1, "", false); err != nil {
		t.Fatal(err)
	}
	if got := Texts(t, e, ""); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("after undo: %v, want %v", got, before)
	}
}
