package view_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
)

const (
	owner  = "did:plc:owner"
	friend = "did:plc:friend"
	other  = "did:plc:other"
)

func rec(coll, rkey string, v map[string]any) store.Record {
	v["$type"] = coll
	if v["createdAt"] == nil {
		v["createdAt"] = "2026-07-30T09:30:00.000Z"
	}
	return store.Record{Collection: coll, RKey: rkey, CID: "bafy" + rkey, Value: store.MustValue(v)}
}

func mention(did string) []any {
	return []any{map[string]any{"index": map[string]any{"byteStart": int64(0), "byteEnd": int64(7)},
		"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#mention", "did": did}}}}
}

// Comments render only under the owner's policy: `mentioned` lets
// identities mentioned in the bullet or above comment; no policy, or an
// empty allow on a subtree, closes it. Mirrors show the original's text.
func TestCommentsAndMirrorsEnrich(t *testing.T) {
	node := func(rkey, parent, text string, facets []any) store.Record {
		v := map[string]any{"text": text, "sortKey": "a" + rkey}
		if parent != "" {
			v["parent"] = "at://" + owner + "/app.bulleted.node/" + parent
		}
		if facets != nil {
			v["facets"] = facets
		}
		return rec("app.bulleted.node", rkey, v)
	}
	uri := func(rkey string) string { return "at://" + owner + "/app.bulleted.node/" + rkey }
	base := []store.Record{
		node("3kgroceries22", "", "@friend Groceries", mention(friend)),
		node("3keggs222222", "3kgroceries22", "Eggs", nil),
		node("3kclosed2222", "", "Closed", nil),
		node("3kclosedkid2", "3kclosed2222", "@friend inside", mention(friend)),
		rec("app.bulleted.mirror", "3kmirror2222", map[string]any{"original": "at://" + other + "/app.bulleted.node/3krecipes222", "sortKey": "b"}),
	}
	friendTree := outline.Build(&store.Snapshot{DID: friend, Records: []store.Record{
		rec("app.bulleted.comment", "3kc1", map[string]any{"subject": uri("3keggs222222"), "text": "Free-range?"}),
		rec("app.bulleted.comment", "3kc2", map[string]any{"subject": uri("3kclosedkid2"), "text": "hidden"}),
	}})
	otherTree := outline.Build(&store.Snapshot{DID: other, Records: []store.Record{
		node("3krecipes222", "", "Recipes", nil),
	}})
	trees := func(did string) (*outline.Tree, error) {
		if did == friend {
			return friendTree, nil
		}
		return otherTree, nil
	}
	read := func(recs []store.Record) string {
		tr := outline.Build(&store.Snapshot{DID: owner, Records: recs})
		v, err := view.Read(tr, nil, view.Options{Depth: 5})
		if err != nil {
			t.Fatal(err)
		}
		v.Enrich(tr, trees)
		return v.Text(false)
	}
	// no policy: silence is closed
	txt := read(base)
	if strings.Contains(txt, "comment") {
		t.Fatalf("comments rendered without a policy:\n%s", txt)
	}
	if !strings.Contains(txt, `"Recipes" (mirror of at://did:plc:other/app.bulleted.node/3krecipes222, read-only)`) {
		t.Fatalf("mirror not resolved:\n%s", txt)
	}
	// repository-wide mentioned; a subtree closed by an empty allow
	withPolicy := append(append([]store.Record(nil), base...),
		rec("app.bulleted.commentPolicy", "self", map[string]any{"allow": []any{"mentioned"}}),
		rec("app.bulleted.commentPolicy", "3kclosed2222", map[string]any{"allow": []any{}, "root": uri("3kclosed2222")}))
	txt = read(withPolicy)
	if !strings.Contains(txt, "[1 comment(s)] ·3keggs222222") {
		t.Fatalf("the mentioned friend's comment on a child did not render:\n%s", txt)
	}
	if strings.Contains(txt, "comment(s)] ·3kclosedkid2") {
		t.Fatalf("a comment under a closed subtree rendered:\n%s", txt)
	}
	// unknown rules grant nothing
	unknown := append(append([]store.Record(nil), base...),
		rec("app.bulleted.commentPolicy", "self", map[string]any{"allow": []any{"everyone"}}))
	if txt := read(unknown); strings.Contains(txt, "comment") {
		t.Fatalf("an unknown rule granted comments:\n%s", txt)
	}
}

// A large cold build validates in parallel and still flags exactly the
// invalid records (run with -race to check the workers).
func TestBuildLargeFlagsInvalid(t *testing.T) {
	var recs []store.Record
	clock := syntax.NewTIDClock(0)
	for i := 0; i < 1500; i++ {
		v := map[string]any{"text": "ok", "sortKey": fmt.Sprintf("a%04d", i)}
		if i%500 == 7 {
			delete(v, "text") // required
		}
		recs = append(recs, rec("app.bulleted.node", clock.Next().String(), v))
	}
	tr := outline.Build(&store.Snapshot{DID: owner, Records: recs})
	var bad []string
	for it := range tr.Roots.Items() {
		if tr.Invalid(it) != "" {
			bad = append(bad, it.Key())
		}
	}
	if len(bad) != 3 || tr.Roots.Len() != 1500 {
		t.Fatalf("%d invalid (want 3) of %d: %.200v", len(bad), tr.Roots.Len(), bad)
	}
}
