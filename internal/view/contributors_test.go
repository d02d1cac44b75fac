package view_test

import (
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
)

// A contributor's bullet rendered in the owner's outline is neither
// detached nor an invalid record because its parent is in the owner's
// repository (in the contributor's own tree it is both); a real problem of
// the record still shows.
func TestContributionRowNotDetachedNorInvalid(t *testing.T) {
	// TID-shaped record keys: the record check wants them
	const shared, idea, detail, bad = "3kshared22222", "3kidea2222222", "3kdetail22222", "3kbad22222222"
	ownTree := outline.Build(&store.Snapshot{DID: owner, Records: []store.Record{
		nodeIn(owner, shared, "", "a", "Shared"),
		{Collection: "app.bulleted.outline", RKey: "self", CID: "o1", Value: store.MustValue(map[string]any{"$type": "app.bulleted.outline",
			"contributors": []any{map[string]any{"did": friend}}, "createdAt": "2026-03-10T09:00:00.000Z"})},
	}})
	friendTree := outline.Build(&store.Snapshot{DID: friend, Records: []store.Record{
		nodeIn(owner, idea, shared, "b", "Friend's idea"),
		nodeIn(friend, detail, idea, "a", "Friend's detail"),
		nodeIn(owner, bad, shared, "", "No sort key"),
	}})
	if it := friendTree.Nodes.Get(idea); it == nil || it.Detached == "" || !strings.Contains(friendTree.Invalid(it), "another repository") {
		t.Fatalf("in the friend's tree the contribution should be detached and flagged: %+v", it)
	}
	c, notes := view.Gather(ownTree, func(string) (*outline.Tree, error) { return friendTree, nil })
	if len(notes) > 0 {
		t.Fatal(notes)
	}
	v, err := view.Read(ownTree, nil, view.Options{Depth: 5, Contributions: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Nodes) != 1 || len(v.Nodes[0].Children) != 2 {
		t.Fatalf("rows %+v", v.Nodes)
	}
	if r := v.Nodes[0]; r.Invalid != "" || r.Detached != "" {
		t.Fatalf("the owner's row: %+v", r)
	}
	for _, r := range v.Nodes[0].Children {
		if r.Author != friend || !r.ReadOnly || r.Detached != "" {
			t.Fatalf("contribution row %+v", r)
		}
		switch r.Text {
		case "Friend's idea":
			if r.Invalid != "" || len(r.Children) != 1 || r.Children[0].Invalid != "" || r.Children[0].Detached != "" {
				t.Fatalf("contribution row %+v (child %+v)", r, r.Children)
			}
		case "No sort key":
			if !strings.Contains(r.Invalid, "sortKey") || strings.Contains(r.Invalid, "another repository") {
				t.Fatalf("the invalid contribution's problem: %q", r.Invalid)
			}
		default:
			t.Fatalf("row %+v", r)
		}
	}
	if txt := v.Text(false); strings.Count(txt, "[invalid record]") != 1 {
		t.Fatalf("text:\n%s", txt)
	}
}
