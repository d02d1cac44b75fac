package intent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// countingResolver resolves every handle to one DID, counting lookups.
type countingResolver struct{ n *int }

func (r countingResolver) ResolveHandle(_ context.Context, h string) (syntax.DID, error) {
	*r.n++
	return syntax.DID("did:plc:" + strings.Repeat("a", 24)), nil
}

// An edit of a bullet's text re-derives its facets from what the record
// held: offline, a mention the text already held as plain text is not said
// again (the edit did not change it), a new one is; online, a mention the
// record already carried keeps its DID without a lookup.
func TestEditFacetsKnowWhatWasThere(t *testing.T) {
	ctx := context.Background()
	repo, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	e := outline.New(repo)
	out, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "call @bob.example.com"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(out.Plan.Diagnostics, "\n")
	if !strings.Contains(said, "mention @bob.example.com left as plain text") {
		t.Fatalf("an insert offline must say its mention is plain text: %q", said)
	}
	key := out.Plan.Created[0].RKey
	edit := func(text string) string {
		t.Helper()
		out, err := e.Do(ctx, intent.Edit{Node: key, Text: &text}, false)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(out.Plan.Diagnostics, "\n")
	}
	if said := edit("call @bob.example.com today"); strings.Contains(said, "bob.example.com") {
		t.Errorf("the edit kept a plain-text mention as it was, and said so again: %q", said)
	}
	if said := edit("call @bob.example.com and @carol.example.com"); !strings.Contains(said, "mention @carol.example.com left as plain text") || strings.Contains(said, "bob.example.com") {
		t.Errorf("a new mention offline must be said, the old one not: %q", said)
	}

	// online: the mention resolved once keeps its DID through edits
	n := 0
	e.Resolver = countingResolver{&n}
	edit("ask @dave.example.com")
	if n != 1 {
		t.Fatalf("%d lookups for one new mention", n)
	}
	edit("ask @dave.example.com twice")
	if n != 1 {
		t.Errorf("an edit looked up a mention the record already carried (%d lookups)", n)
	}
	tr, _ := e.Tree(ctx)
	if fs, _ := tr.Nodes.Get(key).Rec.Value.Map()["facets"].([]any); len(fs) != 1 {
		t.Errorf("facets after the edit: %v", fs)
	}
}
