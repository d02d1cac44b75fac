package search

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

const did = "did:plc:owner"

func node(rkey, parent, sortKey, text string, extra map[string]any) store.Record {
	v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}
	if parent != "" {
		v["parent"] = "at://" + did + "/app.bulleted.node/" + parent
	}
	for k, x := range extra {
		v[k] = x
	}
	return store.Record{Collection: "app.bulleted.node", RKey: rkey, CID: "c-" + rkey + fmt.Sprint(len(text)), Value: store.MustValue(v)}
}

func tagFacet(tag string, start int) []any {
	return []any{map[string]any{"index": map[string]any{"byteStart": float64(start), "byteEnd": float64(start + 1 + len(tag))},
		"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#tag", "tag": tag}}}}
}

func fixture() []store.Record {
	return []store.Record{
		node("work", "", "a", "Work", nil),
		node("budget", "work", "a", "Budget review with finance", map[string]any{"layout": "todo"}),
		node("plan", "work", "b", "Plan Q3 #planning", map[string]any{"facets": tagFacet("planning", 8), "layout": "todo", "completedAt": "2026-04-02T10:00:00.000Z"}),
		node("deep", "plan", "a", "Call @bob.test about the BUDGET", map[string]any{"facets": []any{map[string]any{"index": map[string]any{"byteStart": float64(5), "byteEnd": float64(14)},
			"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#mention", "did": "did:plc:bob"}}}}, "createdAt": "2026-05-01T00:00:00.000Z"}),
		node("home", "", "b", "Home", nil),
		node("hbudget", "home", "a", "Household budget", map[string]any{"layout": "h2"}),
		node("board", "home", "b", "Board", map[string]any{"layout": "kanban"}),
		{Collection: "app.bulleted.note", RKey: "home", CID: "n-home", Value: store.MustValue(map[string]any{"$type": "app.bulleted.note", "text": "remember the budget spreadsheet", "subject": "at://" + did + "/app.bulleted.node/home", "createdAt": "2026-03-10T09:00:00.000Z"})},
	}
}

func keys(r *Result) []string {
	var out []string
	for _, h := range r.Hits {
		out = append(out, h.RKey)
	}
	return out
}

func TestFilters(t *testing.T) {
	t.Parallel()
	tr := outline.Build(&store.Snapshot{DID: did, Commit: "c1", Records: fixture()})
	x := New()
	cases := []struct {
		name string
		q    Query
		want []string
	}{
		{"substring is case-insensitive, text and note, outline order", Query{Text: "budget"}, []string{"budget", "deep", "home", "hbudget"}},
		{"regex", Query{Text: `^(plan|call)\b`, Regex: true}, []string{"plan", "deep"}},
		{"tag without hash", Query{Tags: []string{"Planning"}}, []string{"plan"}},
		{"tag with hash", Query{Tags: []string{"#planning"}}, []string{"plan"}},
		{"mention by DID", Query{Mentions: []string{"did:plc:bob"}}, []string{"deep"}},
		{"mention by handle", Query{Mentions: []string{"@bob.test"}}, []string{"deep"}},
		{"layout", Query{Layout: "h2"}, []string{"hbudget"}},
		{"a layout this version does not know", Query{Layout: "kanban"}, []string{"board"}},
		{"no layout is bullet", Query{Layout: "bullet", Text: "o"}, []string{"work", "deep", "home"}},
		{"open todos", Query{State: "open"}, []string{"budget"}},
		{"done todos", Query{State: "done"}, []string{"plan"}},
		{"created range by date", Query{CreatedFrom: "2026-04-01", CreatedTo: "2026-05-01"}, []string{"deep"}},
		{"completed range excludes", Query{CompletedFrom: "2026-04-03"}, nil},
		{"completed range includes the to day", Query{CompletedTo: "2026-04-02"}, []string{"plan"}},
		{"subtree", Query{Text: "budget", Under: tr.Nodes.Get("work")}, []string{"budget", "deep"}},
		{"filters combine", Query{Text: "budget", Layout: "todo"}, []string{"budget"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := x.Search(tr, c.q)
			if err != nil {
				t.Fatal(err)
			}
			if got := keys(r); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	r, _ := x.Search(tr, Query{Text: "about the budget"})
	h := r.Hits[0]
	if !slices.Equal(h.Breadcrumb, []string{"Work", "Plan Q3 #planning"}) || h.Parent != "plan" || h.Text != "Call @bob.test about the BUDGET" {
		t.Fatalf("hit %+v", h)
	}
	if r, _ := x.Search(tr, Query{Text: "spreadsheet"}); len(r.Hits) != 1 || !r.Hits[0].InNote || r.Hits[0].Text != "Home" || r.Hits[0].Note != "remember the budget spreadsheet" {
		t.Fatalf("note hit %+v", r.Hits)
	}
	if _, err := x.Search(tr, Query{Text: "(", Regex: true}); !errors.Is(err, ErrQuery) {
		t.Fatalf("bad regex: %v", err)
	}
	if _, err := x.Search(tr, Query{CreatedFrom: "yesterday"}); !errors.Is(err, ErrQuery) {
		t.Fatalf("bad date: %v", err)
	}
}

func TestAroundShortens(t *testing.T) {
	t.Parallel()
	long := ""
	for i := 0; i < 30; i++ {
		long += "word "
	}
	s := long + "NEEDLE" + long
	got := around(s, len(long), 6)
	want := "…" + long[len(long)-Window:] + "NEEDLE" + long[:Window] + "…"
	if got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}

// Pages of hits reach every match once, also when bullets are inserted
// before and after the cursor between pages; the index follows the new
// commit incrementally.
func TestCursorAcrossEdits(t *testing.T) {
	t.Parallel()
	recs := []store.Record{node("top", "", "a", "Top", nil)}
	for i := 0; i < 50; i++ {
		recs = append(recs, node(fmt.Sprintf("k%03d", i), "top", fmt.Sprintf("m%03d", i), fmt.Sprintf("match %d", i), nil))
	}
	tr := outline.Build(&store.Snapshot{DID: did, Commit: "c1", Records: recs})
	x := New()
	seen := map[string]int{}
	cur := ""
	for page := 0; ; page++ {
		r, err := x.Search(tr, Query{Text: "match", Limit: 7, Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys(r) {
			seen[k]++
		}
		if page == 1 {
			// a new match before the cursor (not repeated) and one after
			// (must be found), and one unrelated edit
			recs = append(recs, node("early", "top", "l", "match early", nil), node("late", "top", "z", "match late", nil))
			recs[0] = node("top", "", "a", "Top renamed", nil)
			tr = outline.Build(&store.Snapshot{DID: did, Commit: "c2", Records: recs})
		}
		if r.Cursor == "" {
			break
		}
		cur = r.Cursor
	}
	if x.Derived != 3 {
		t.Fatalf("index re-derived %d entries for 3 changed records", x.Derived)
	}
	for i := 0; i < 50; i++ {
		if k := fmt.Sprintf("k%03d", i); seen[k] != 1 {
			t.Fatalf("%s seen %d times", k, seen[k])
		}
	}
	if seen["late"] != 1 || seen["early"] != 0 {
		t.Fatalf("late %d early %d", seen["late"], seen["early"])
	}
	if _, err := x.Search(tr, Query{Text: "other", Cursor: cur}); !errors.Is(err, ErrCursor) {
		t.Fatalf("cursor of another query: %v", err)
	}
}
