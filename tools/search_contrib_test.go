package tools_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestSearchFindsContributions: search in an outline finds the bullets its
// admitted contributors wrote under it (held in their repositories), after
// the outline's own hits and in the outline's order, with the breadcrumb
// running through the owner's bullets, the contributor named, and pages that
// continue from the owner's hits into the contributions. A bullet written
// under a bullet that does not admit its writer is not shown, and under=
// restricts contributions to that subtree.
func TestSearchFindsContributions(t *testing.T) {
	const contributor = "did:plc:contributorbob"
	l := openLocal(t)
	ctx := context.Background()
	me := l.DID().String()
	node := func(rkey, parent, sortKey, text string) store.Write {
		v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}
		if parent != "" {
			v["parent"] = parent
		}
		return store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: rkey, Value: v}
	}
	if _, err := l.Apply(ctx, "", []store.Write{
		node("3kown11111111", "", "a", "budget review: my own"),
		node("3kshared22222", "", "b", "Shared plan"),
		node("3kprivate2222", "", "c", "Private"),
		{Op: store.Create, Collection: "app.bulleted.outline", RKey: "3kshared22222", Value: map[string]any{"$type": "app.bulleted.outline",
			"root": "at://" + me + "/app.bulleted.node/3kshared22222", "contributors": []any{map[string]any{"did": contributor}}, "createdAt": "2026-03-10T09:00:00.000Z"}},
	}); err != nil {
		t.Fatal(err)
	}
	rec := func(rkey, parent, sortKey, text string) store.Record {
		return store.Record{Collection: "app.bulleted.node", RKey: rkey, CID: "c" + rkey, Value: store.MustValue(map[string]any{"$type": "app.bulleted.node",
			"text": text, "parent": parent, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"})}
	}
	shared := "at://" + me + "/app.bulleted.node/3kshared22222"
	bob := outline.Build(&store.Snapshot{DID: contributor, Commit: "b1", Records: []store.Record{
		rec("3kbob11111111", shared, "a", "Budget Review notes from Bob"),
		rec("3kbob22222222", "at://"+contributor+"/app.bulleted.node/3kbob11111111", "a", "second budget review item"),
		rec("3kbob33333333", "at://"+me+"/app.bulleted.node/3kprivate2222", "a", "budget review where Bob is not admitted"),
	}})
	down := false
	env := sharedEnv(t, l, func(ctx context.Context, ident string) (*outline.Tree, error) {
		if down {
			return nil, errors.New("connection refused")
		}
		if ident != contributor {
			return nil, errors.New("unknown identity " + ident)
		}
		return bob, nil
	})
	c := inProcess(t, env)
	type hit struct{ rkey, author, crumbs, parent string }
	// each page is asked twice: compact (key, author, path) and
	// fields=full (parent, breadcrumb); both must agree
	page := func(args map[string]any) ([]hit, string, string) {
		t.Helper()
		res, sc := call(t, c, "search", args)
		if res.IsError {
			t.Fatalf("search %v: %s", args, text(res))
		}
		fa := map[string]any{"fields": "full"}
		for k, v := range args {
			fa[k] = v
		}
		_, full := call(t, c, "search", fa)
		fhs, _ := full["hits"].([]any)
		var out []hit
		for i, h := range flatHits(sc) {
			a, _ := h["author"].(string)
			f := fhs[i].(map[string]any)
			p, _ := f["parent"].(string)
			var crumbs []string
			for _, x := range f["breadcrumb"].([]any) {
				// the compact form clips each ancestor at 24 characters
				r := []rune(x.(string))
				if len(r) > 24 {
					r = append(r[:23], '…')
				}
				crumbs = append(crumbs, string(r))
			}
			if strings.Join(crumbs, " › ") != h["path"] || f["rkey"] != h["rkey"] {
				t.Fatalf("compact hit %v, full %v", h, f)
			}
			out = append(out, hit{h["rkey"].(string), a, h["path"].(string), p})
		}
		if len(fhs) != len(out) {
			t.Fatalf("%d compact hits, %d full", len(out), len(fhs))
		}
		cur, _ := sc["cursor"].(string)
		return out, cur, text(res)
	}
	want := []hit{
		{"3kown11111111", "", "", ""},
		{"3kbob11111111", contributor, "Shared plan", "3kshared22222"},
		{"3kbob22222222", contributor, "Shared plan › Budget Review notes fro…", "3kbob11111111"},
	}
	all, cur, txt := page(map[string]any{"text": "budget review"})
	if cur != "" || len(all) != len(want) {
		t.Fatalf("one page: %+v (cursor %q)\n%s", all, cur, txt)
	}
	for i := range want {
		if all[i] != want[i] {
			t.Fatalf("hit %d: %+v, want %+v", i, all[i], want[i])
		}
	}
	if !strings.Contains(txt, "by "+contributor) {
		t.Fatalf("the text does not name the contributor:\n%s", txt)
	}
	// pages of one: from the owner's hits into the contributions
	var paged []hit
	args := map[string]any{"text": "budget review", "limit": 1}
	for range 5 {
		hs, cur, _ := page(args)
		paged = append(paged, hs...)
		if cur == "" {
			break
		}
		args["cursor"] = cur
	}
	if len(paged) != len(want) {
		t.Fatalf("paged: %+v", paged)
	}
	for i := range want {
		if paged[i] != want[i] {
			t.Fatalf("paged hit %d: %+v, want %+v", i, paged[i], want[i])
		}
	}
	// a contributions cursor belongs to its query
	if res, _ := call(t, c, "search", map[string]any{"text": "other", "cursor": "~1." + strings.Repeat("0", 12)}); !res.IsError {
		t.Fatalf("a cursor of another query was accepted: %s", text(res))
	}
	under, _, _ := page(map[string]any{"text": "budget review", "under": "3kshared22222"})
	if len(under) != 2 || under[0].rkey != "3kbob11111111" || under[1].rkey != "3kbob22222222" {
		t.Fatalf("under the shared bullet: %+v", under)
	}
	// depth counts a contribution's levels as shown: Bob's bullet is the
	// shared bullet's child, his second one its grandchild
	for _, d := range []struct {
		text  string
		depth int
		want  []string
	}{
		{"budget review", 1, []string{"3kbob11111111"}},
		{"budget review", 2, []string{"3kbob11111111", "3kbob22222222"}},
		{"second", 1, nil},
		{"second", 2, []string{"3kbob22222222"}},
	} {
		var got []string
		args := map[string]any{"text": d.text, "under": "3kshared22222", "depth": d.depth, "limit": 1}
		for range 5 {
			hs, cur, _ := page(args)
			for _, h := range hs {
				got = append(got, h.rkey)
			}
			if cur == "" {
				break
			}
			args["cursor"] = cur
		}
		if !slices.Equal(got, d.want) {
			t.Fatalf("under the shared bullet, %q depth %d: %v, want %v", d.text, d.depth, got, d.want)
		}
	}
	if none, _, _ := page(map[string]any{"text": "budget review", "under": "3kprivate2222"}); len(none) != 0 {
		t.Fatalf("under the private bullet: %+v", none)
	}
	down = true
	own, cur, txt := page(map[string]any{"text": "budget review"})
	if len(own) != 1 || cur != "" || !strings.Contains(txt, "could not read contributor") {
		t.Fatalf("with the contributor's repository down: %+v %q\n%s", own, cur, txt)
	}
}
