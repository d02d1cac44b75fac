package view_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
)

func nodeIn(repo, rkey, parent, sortKey, text string) store.Record {
	v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}
	if parent != "" {
		v["parent"] = "at://" + repo + "/app.bulleted.node/" + parent
	}
	return store.Record{Collection: "app.bulleted.node", RKey: rkey, CID: "c-" + rkey, Value: store.MustValue(v)}
}

// Paging through a level of 2,000 children (each with one child) reaches
// every row exactly once, also while bullets are inserted before and after
// the cursor and the last row of a page is deleted between pages.
func TestPagingBigLevelAcrossEdits(t *testing.T) {
	recs := []store.Record{nodeIn(owner, "big", "", "a", "Big")}
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("n%04d", i)
		recs = append(recs, nodeIn(owner, k, "big", fmt.Sprintf("m%04d", i), k), nodeIn(owner, k+"c", k, "a", k+" child"))
	}
	snap := func(commit string) *outline.Tree {
		return outline.Build(&store.Snapshot{DID: owner, Commit: commit, Records: append([]store.Record(nil), recs...)})
	}
	tr := snap("c0")
	seen, gone, deleted := map[string]int{}, map[string]bool{}, ""
	cur, pages := "", 0
	for {
		v, err := view.Read(tr, nil, view.Options{Depth: 3, Limit: 137, Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, r := range v.Flat() {
			seen[r.RKey]++
		}
		if v.Total > 137 || (v.Cursor == "") != (v.Stop != "limit") {
			t.Fatalf("page %d: total %d stop %s cursor %q", pages, v.Total, v.Stop, v.Cursor)
		}
		if v.Cursor == "" {
			break
		}
		cur = v.Cursor
		if pages == 3 {
			// before the cursor (never shown), after it (must be shown)
			recs = append(recs, nodeIn(owner, "early", "big", "m0000x", "early"), nodeIn(owner, "late", "big", "m1999x", "late"))
			tr = snap("c1")
		}
		if pages == 5 {
			// delete the page's last row: the walk continues from where it stood
			last := v.Flat()[len(v.Flat())-1].RKey
			for i, r := range recs {
				if r.RKey == last {
					recs = append(recs[:i], recs[i+1:]...)
					break
				}
			}
			deleted = last
			gone[last] = true
			if !strings.HasSuffix(last, "c") {
				gone[last+"c"] = true // its child is detached with it
			}
			tr = snap("c2")
		}
	}
	if seen["big"] != 1 || seen["late"] != 1 || seen["early"] != 0 {
		t.Fatalf("big %d late %d early %d", seen["big"], seen["late"], seen["early"])
	}
	n := 0
	for i := 0; i < 2000; i++ {
		for _, k := range []string{fmt.Sprintf("n%04d", i), fmt.Sprintf("n%04dc", i)} {
			want := 1
			if gone[k] && k != deleted {
				want = 0 // the deleted row's child, detached with it
			}
			if seen[k] != want {
				t.Fatalf("%s seen %d times", k, seen[k])
			}
			n++
		}
	}
	if n != 4000 {
		t.Fatalf("%d of 4000 rows seen (pages %d)", n, pages)
	}
}

func TestPagingTextSaysHowToContinue(t *testing.T) {
	recs := []store.Record{}
	for i := 0; i < 30; i++ {
		recs = append(recs, nodeIn(owner, fmt.Sprintf("k%02d", i), "", fmt.Sprintf("s%02d", i), "row"))
	}
	tr := outline.Build(&store.Snapshot{DID: owner, Records: recs})
	v, _ := view.Read(tr, nil, view.Options{Limit: 10})
	txt := v.Text(false)
	if !strings.Contains(txt, "cursor=\""+v.Cursor+"\"") || v.Stop != "limit" || !v.Truncated {
		t.Fatalf("no continuation:\n%s", txt)
	}
	if _, err := view.Read(tr, tr.Nodes.Get("k01"), view.Options{Cursor: v.Cursor}); err == nil {
		t.Fatal("cursor of another node accepted")
	}
	if !strings.Contains(v.Markdown(), "<!-- cut by limit") || !strings.Contains(v.OPML(), "<!-- cut by limit") {
		t.Fatal("exports do not say they are cut")
	}
}

func mirrorRec(repo, rkey, parent, sortKey, original string) store.Record {
	v := map[string]any{"$type": "app.bulleted.mirror", "original": original, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}
	if parent != "" {
		v["parent"] = "at://" + repo + "/app.bulleted.node/" + parent
	}
	return store.Record{Collection: "app.bulleted.mirror", RKey: rkey, CID: "c-" + rkey, Value: store.MustValue(v)}
}

// A mirror renders its original's subtree to the read's depth, read-only
// and marked; a mirror inside that subtree pointing back is cut as a cycle.
func TestMirrorSubtreeAndCycle(t *testing.T) {
	otherTree := outline.Build(&store.Snapshot{DID: other, Records: []store.Record{
		nodeIn(other, "recipes", "", "a", "Recipes"),
		nodeIn(other, "soup", "recipes", "a", "Soup"),
		nodeIn(other, "leek", "soup", "a", "Leek"),
		nodeIn(other, "onion", "leek", "a", "Onion (depth 4)"),
		mirrorRec(other, "back", "recipes", "b", "at://"+owner+"/app.bulleted.node/home"),
	}})
	ownTree := outline.Build(&store.Snapshot{DID: owner, Records: []store.Record{
		nodeIn(owner, "home", "", "a", "Home"),
		mirrorRec(owner, "m1", "home", "a", "at://"+other+"/app.bulleted.node/recipes"),
	}})
	trees := func(d string) (*outline.Tree, error) { return otherTree, nil }
	v, err := view.Read(ownTree, nil, view.Options{Depth: 4})
	if err != nil {
		t.Fatal(err)
	}
	v.Enrich(ownTree, trees)
	// record keys here are not TIDs: the records are flagged invalid, which
	// is not what this test is about
	txt := strings.ReplaceAll(v.Text(false), " [invalid record]", "")
	for _, want := range []string{
		`  - ↪ "Recipes" (mirror of at://did:plc:other/app.bulleted.node/recipes, read-only) ·m1`,
		"    - Soup [by did:plc:other, read-only] ·soup",
		"      - Leek [by did:plc:other, read-only] (+1) ·leek",
		`    - ↪ "Home" (mirror of at://did:plc:owner/app.bulleted.node/home, read-only) [by did:plc:other, read-only] ·back`,
		"      - ↪ \"Recipes\" (mirror of at://did:plc:other/app.bulleted.node/recipes, read-only) [mirrored, read-only] ·m1\n        (mirror cut: cycle",
	} {
		if !strings.Contains(txt, want) {
			t.Fatalf("missing %q in\n%s", want, txt)
		}
	}
	if strings.Contains(txt, "Onion") {
		t.Fatalf("mirror rendered below the depth:\n%s", txt)
	}
	// markdown: the mirror names its original; the rows it shows are
	// marked (whoever wrote them), and the cut is said
	if md := v.Markdown(); !strings.Contains(md, "  - ↪ Recipes {mirror=at://did:plc:other/app.bulleted.node/recipes}\n    - Soup _(mirrored, read-only)_\n") ||
		!strings.Contains(md, "        <!-- mirror cut: cycle: this mirror shows a bullet it is itself inside -->\n") {
		t.Fatalf("markdown mirror:\n%s", md)
	}
	if o := v.OPML(); !strings.Contains(o, `<outline text="Recipes" _mirror="at://did:plc:other/app.bulleted.node/recipes" _readOnly="true"><outline text="Soup"`) {
		t.Fatalf("opml mirror:\n%s", o)
	}
}

// Contributors' bullets under the owner's bullets render in place, marked
// with their author, only where an outline record admits them.
func TestContributorsRenderInPlace(t *testing.T) {
	ownTree := outline.Build(&store.Snapshot{DID: owner, Records: []store.Record{
		nodeIn(owner, "shared", "", "a", "Shared"),
		nodeIn(owner, "own1", "shared", "a", "Owner first"),
		nodeIn(owner, "private", "", "b", "Private"),
		{Collection: "app.bulleted.outline", RKey: "shared", CID: "o1", Value: store.MustValue(map[string]any{"$type": "app.bulleted.outline", "root": "at://" + owner + "/app.bulleted.node/shared",
			"title": "Team plan", "contributors": []any{map[string]any{"did": friend}}, "createdAt": "2026-03-10T09:00:00.000Z"})},
	}})
	friendTree := outline.Build(&store.Snapshot{DID: friend, Records: []store.Record{
		nodeIn(owner, "fr1", "shared", "b", "Friend's idea"),
		nodeIn(friend, "fr2", "fr1", "a", "Friend's detail"),
		nodeIn(owner, "fr3", "private", "a", "Not admitted here"),
	}})
	trees := func(d string) (*outline.Tree, error) { return friendTree, nil }
	c, notes := view.Gather(ownTree, trees)
	if len(notes) > 0 {
		t.Fatal(notes)
	}
	v, err := view.Read(ownTree, nil, view.Options{Depth: 5, Contributions: c})
	if err != nil {
		t.Fatal(err)
	}
	want := `- Shared ·shared
  - Owner first ·own1
  - Friend's idea [by did:plc:friend, read-only] ·fr1
    - Friend's detail [by did:plc:friend, read-only] ·fr2
- Private ·private
`
	if got := strings.ReplaceAll(v.Text(false), " [invalid record]", ""); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if !outline.Contributed(ownTree, friendTree, friendTree.Nodes.Get("fr1")) || outline.Contributed(ownTree, friendTree, friendTree.Nodes.Get("fr3")) {
		t.Fatal("Contributed disagrees with the outline record")
	}
}
