package tools_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/client"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// bigLevel writes a bullet "Big" with n children ("item 0000" …) straight
// into a new embedded store, and returns the store, Big's key and the
// children's keys in order.
func bigLevel(t *testing.T, n int) (*store.Local, string, []string) {
	t.Helper()
	l := openLocal(t)
	clock := syntax.NewTIDClock(0)
	key := func() string { return clock.Next().String() }
	parent := key()
	sks, err := order.Spread("", "", n)
	if err != nil {
		t.Fatal(err)
	}
	ws := []store.Write{{Op: store.Create, Collection: lexicon.Node, RKey: parent, Value: map[string]any{
		"$type": lexicon.Node, "text": "Big", "sortKey": "m", "createdAt": "2026-01-01T00:00:00.000Z"}}}
	var kids []string
	for i := 0; i < n; i++ {
		k := key()
		kids = append(kids, k)
		ws = append(ws, store.Write{Op: store.Create, Collection: lexicon.Node, RKey: k, Value: map[string]any{
			"$type": lexicon.Node, "text": fmt.Sprintf("item %04d", i), "sortKey": sks[i], "createdAt": "2026-01-01T00:00:00.000Z",
			"parent": "at://" + l.DID().String() + "/" + lexicon.Node + "/" + parent}})
	}
	for len(ws) > 0 {
		k := min(len(ws), store.MaxBatch)
		if _, err := l.Apply(context.Background(), "", ws[:k]); err != nil {
			t.Fatal(err)
		}
		ws = ws[k:]
	}
	return l, parent, kids
}

var lineKey = regexp.MustCompile(`·(\S+)$`)

// pageKeys are the record keys of a text page's lines, without skip.
func pageKeys(txt, skip string) []string {
	var out []string
	for _, ln := range strings.Split(txt, "\n") {
		if m := lineKey.FindStringSubmatch(ln); m != nil && m[1] != skip {
			out = append(out, m[1])
		}
	}
	return out
}

func mustCall(t *testing.T, c *client.Client, name string, args map[string]any) map[string]any {
	t.Helper()
	res, sc := call(t, c, name, args)
	if res.IsError {
		t.Fatalf("%s %v: %s", name, args, text(res))
	}
	return sc
}

// pagingMoves pages Big's 2,000 children with tool (read_outline or
// search), 100 a page, and between pages moves one child already read to
// the end and one not read yet to the front. It returns how often each
// child was seen and the pages' change notices (text and structured).
func pagingMoves(t *testing.T, c *client.Client, tool, big string, kids []string, after func(page int)) (map[string]int, []string, []map[string]any) {
	t.Helper()
	seen := map[string]int{}
	var notes []string
	var changes []map[string]any
	args := map[string]any{"node": big, "depth": 1, "limit": 100}
	if tool == "search" {
		args = map[string]any{"text": "item", "under": big, "limit": 100}
	}
	for page := 0; ; page++ {
		res, sc := call(t, c, tool, args)
		if res.IsError {
			t.Fatalf("page %d: %s", page, text(res))
		}
		txt := text(res)
		if tool == "search" {
			for _, h := range flatHits(sc) {
				seen[h["rkey"].(string)]++
			}
		} else {
			for _, k := range pageKeys(txt, big) {
				seen[k]++
			}
		}
		if i := strings.Index(txt, "Note: the outline has changed"); i >= 0 {
			notes = append(notes, txt[i:])
		} else if page > 0 {
			notes = append(notes, "")
		}
		if ch, ok := sc["changedSince"].(map[string]any); ok {
			changes = append(changes, ch)
		} else if page > 0 {
			changes = append(changes, nil)
		}
		cur, _ := sc["cursor"].(string)
		if cur == "" {
			break
		}
		// one read on this page to the end, one not read yet to the front
		mustCall(t, c, "move_node", map[string]any{"node": kids[page*100+10], "parent": big, "position": "last"})
		mustCall(t, c, "move_node", map[string]any{"node": kids[page*100+150], "parent": big, "position": "first"})
		if after != nil {
			after(page)
		}
		args["cursor"] = cur
	}
	return seen, notes, changes
}

// Issue #25: a level paged while bullets move between pages gives every
// child exactly once (the pages continue on the tree the read began at),
// and every page after the first change says so, in text and structured
// content, with the number of records changed.
func TestPagingWhileMovingEveryChildOnce(t *testing.T) {
	for _, tool := range []string{"read_outline", "search"} {
		t.Run(tool, func(t *testing.T) {
			l, big, kids := bigLevel(t, 2000)
			c := inProcess(t, &tools.Env{Engine: outline.New(l)})
			seen, notes, changes := pagingMoves(t, c, tool, big, kids, nil)
			if len(seen) != len(kids) {
				t.Errorf("%d distinct children seen, want %d", len(seen), len(kids))
			}
			for _, k := range kids {
				if seen[k] != 1 {
					t.Errorf("child %s seen %d times", k, seen[k])
				}
			}
			if len(notes) != 19 {
				t.Fatalf("%d pages after the first, want 19", len(notes))
			}
			for i, n := range notes {
				if !strings.Contains(n, "continues from the snapshot the read began at") || !strings.Contains(n, "read again from the start (without cursor)") {
					t.Fatalf("page %d: no change notice in the text: %q", i+1, n)
				}
				ch := changes[i]
				if ch == nil || ch["snapshot"] != true || ch["changed"] != float64(2*(i+1)) || ch["rev"] == ch["now"] || ch["rev"] == "" {
					t.Fatalf("page %d: changedSince %v", i+1, ch)
				}
			}
			// the repository as read back: the moves landed, and a read
			// from the start has no notice
			sc := mustCall(t, c, "read_outline", map[string]any{"node": big, "depth": 1, "limit": 5})
			if got := pageKeys(sc["text"].(string), big); len(got) != 5 || got[0] != kids[18*100+150] || sc["changedSince"] != nil {
				t.Fatalf("read from the start: %v %v", got, sc["changedSince"])
			}
			if tool != "read_outline" {
				return
			}
			// every format says it: json (structured content is the view)
			first := mustCall(t, c, "read_outline", map[string]any{"node": big, "depth": 1, "limit": 100})["cursor"]
			mustCall(t, c, "move_node", map[string]any{"node": kids[0], "parent": big, "position": "last"})
			for _, format := range []string{"json", "markdown", "opml"} {
				res, sc := call(t, c, "read_outline", map[string]any{"node": big, "depth": 1, "limit": 100, "cursor": first, "format": format})
				ch, _ := sc["changedSince"].(map[string]any)
				if res.IsError || ch == nil || ch["snapshot"] != true || ch["changed"] != float64(1) || !strings.Contains(text(res), "continues from the snapshot") {
					t.Fatalf("%s: %v\n%s", format, ch, text(res))
				}
			}
		})
	}
}

// When the tree a cursor was made from is no longer kept (here: unused
// longer than the snapshots keep a tree), the page is read from the current
// outline and says that bullets moved since may be missed or repeated, in
// text and structured content.
func TestPagingFallbackSaysMissedOrRepeated(t *testing.T) {
	l, big, kids := bigLevel(t, 300)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	env := &tools.Env{Engine: outline.New(l), Snapshots: &tools.Snapshots{Now: func() time.Time { return now }}}
	c := inProcess(t, env)
	seen, notes, changes := pagingMoves(t, c, "read_outline", big, kids, func(int) { now = now.Add(tools.DefaultSnapshotAge + time.Second) })
	for i, n := range notes {
		if !strings.Contains(n, "no longer kept") || !strings.Contains(n, "may be missed or repeated") || !strings.Contains(n, "read again from the start (without cursor)") {
			t.Fatalf("page %d: no fallback notice in the text: %q", i+1, n)
		}
		if ch := changes[i]; ch == nil || ch["snapshot"] != false || ch["rev"] == ch["now"] {
			t.Fatalf("page %d: changedSince %v", i+1, ch)
		}
	}
	if len(notes) != 2 {
		t.Fatalf("%d pages after the first, want 2", len(notes))
	}
	// what the notice warns of did happen: read from the current outline,
	// the page after a move repeats one child and misses another
	twice, missed := 0, 0
	for _, k := range kids {
		switch seen[k] {
		case 0:
			missed++
		case 2:
			twice++
		}
	}
	if twice == 0 || missed == 0 {
		t.Fatalf("twice %d, missed %d", twice, missed)
	}
}

// The snapshots are bounded by bytes: a tree whose changed bullets would
// hold more than MaxBytes beyond the current tree is dropped, and the page
// says so.
func TestPagingSnapshotsBoundedByBytes(t *testing.T) {
	l, big, kids := bigLevel(t, 300)
	env := &tools.Env{Engine: outline.New(l), Snapshots: &tools.Snapshots{MaxBytes: 1}}
	c := inProcess(t, env)
	_, notes, changes := pagingMoves(t, c, "read_outline", big, kids, nil)
	for i := range notes {
		if ch := changes[i]; ch == nil || ch["snapshot"] != false || !strings.Contains(notes[i], "no longer kept") {
			t.Fatalf("page %d: %v %q", i+1, ch, notes[i])
		}
	}
}

// Contributors' bullets are read live (their trees are not kept): when one
// of the repositories they come from changes while an outline is paged, the
// next page says that theirs may be missed or repeated, in read_outline and
// in search (paging among the contributions).
func TestPagingSaysContributionsChanged(t *testing.T) {
	const contributor = "did:plc:contributorbob"
	l := openLocal(t)
	me := l.DID().String()
	shared := "at://" + me + "/" + lexicon.Node + "/3kshared22222"
	if _, err := l.Apply(context.Background(), "", []store.Write{
		{Op: store.Create, Collection: lexicon.Node, RKey: "3kshared22222", Value: map[string]any{"$type": lexicon.Node, "text": "Shared plan", "sortKey": "b", "createdAt": "2026-03-10T09:00:00.000Z"}},
		{Op: store.Create, Collection: lexicon.Outline, RKey: "3kshared22222", Value: map[string]any{"$type": lexicon.Outline,
			"root": shared, "contributors": []any{map[string]any{"did": contributor}}, "createdAt": "2026-03-10T09:00:00.000Z"}},
	}); err != nil {
		t.Fatal(err)
	}
	bobAt := func(commit string, n int) *outline.Tree {
		var recs []store.Record
		for i := range n {
			rk := fmt.Sprintf("3kbob%08d", i)
			recs = append(recs, store.Record{Collection: lexicon.Node, RKey: rk, CID: commit + rk, Value: store.MustValue(map[string]any{"$type": lexicon.Node,
				"text": fmt.Sprintf("budget idea %d", i), "parent": shared, "sortKey": fmt.Sprintf("a%d", i), "createdAt": "2026-03-10T09:00:00.000Z"})})
		}
		return outline.Build(&store.Snapshot{DID: contributor, Commit: commit, Records: recs})
	}
	bob := bobAt("b1", 4)
	env := sharedEnv(t, l, func(ctx context.Context, ident string) (*outline.Tree, error) { return bob, nil })
	c := inProcess(t, env)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"read_outline", map[string]any{"node": "3kshared22222", "depth": 1, "limit": 2}},
		{"search", map[string]any{"text": "budget idea", "limit": 2}},
	} {
		bob = bobAt("b1", 4)
		sc := mustCall(t, c, tc.tool, tc.args)
		if sc["cursor"] == nil || sc["changedSince"] != nil {
			t.Fatalf("%s page 1: %v", tc.tool, sc)
		}
		// Bob's repository changes: a bullet before the cursor is gone
		bob = bobAt("b2", 3)
		tc.args["cursor"] = sc["cursor"]
		res, sc := call(t, c, tc.tool, tc.args)
		ch, _ := sc["changedSince"].(map[string]any)
		if res.IsError || ch == nil || ch["contributions"] != true || !strings.Contains(text(res), "contributors' bullets shown in this outline changed since this read began") {
			t.Fatalf("%s page 2: %v\n%s", tc.tool, ch, text(res))
		}
	}
}

// A cursor that carries no revision (made before cursors did) cannot tell
// whether the outline changed: the page says so rather than nothing.
func TestPagingCursorWithoutRevision(t *testing.T) {
	l, big, kids := bigLevel(t, 30)
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	sc := mustCall(t, c, "read_outline", map[string]any{"node": big, "depth": 1, "limit": 10})
	raw, err := base64.RawURLEncoding.DecodeString(sc["cursor"].(string))
	if err != nil {
		t.Fatal(err)
	}
	var cur map[string]any
	if err := json.Unmarshal(raw, &cur); err != nil || cur["r"] == nil {
		t.Fatalf("cursor %s: %v", raw, err)
	}
	delete(cur, "r")
	raw, _ = json.Marshal(cur)
	res, sc := call(t, c, "read_outline", map[string]any{"node": big, "depth": 1, "limit": 10, "cursor": base64.RawURLEncoding.EncodeToString(raw)})
	ch, _ := sc["changedSince"].(map[string]any)
	if res.IsError || ch == nil || ch["snapshot"] != false || !strings.Contains(text(res), "does not say which revision") {
		t.Fatalf("%v\n%s", ch, text(res))
	}
	if got := pageKeys(text(res), big); len(got) != 10 || got[0] != kids[10] {
		t.Fatalf("page 2: %v", got)
	}
}
