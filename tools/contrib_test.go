package tools_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// A contribution (a bullet of this repository under a bullet of an outline
// that admits this identity) cannot be moved out of the shared outline:
// move_node refuses it (cross_repo) directly, as a dry run and inside
// apply_batch; when the owner's repository cannot be read the move is
// refused as unavailable (it may be one); a bullet under another
// repository's bullet that is not admitted there is detached and can be
// re-attached. Nothing is written when a move is refused.
func TestContributionNotMovable(t *testing.T) {
	const owner = "did:plc:owneroftheplan"
	l := openLocal(t)
	ctx := context.Background()
	me := l.DID().String()
	node := func(rkey, parent, text string) store.Write {
		return store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: rkey, Value: map[string]any{"$type": "app.bulleted.node",
			"text": text, "parent": parent, "sortKey": "a", "createdAt": "2026-03-10T09:00:00.000Z"}}
	}
	if _, err := l.Apply(ctx, "", []store.Write{
		node("3kaaaaaaaaaa2", "at://"+owner+"/app.bulleted.node/3kshared22222", "my idea for the plan"),
		node("3kaaaaaaaaab2", "at://"+owner+"/app.bulleted.node/3kprivate2222", "under a private bullet"),
	}); err != nil {
		t.Fatal(err)
	}
	ownerTree := outline.Build(&store.Snapshot{DID: owner, Commit: "o1", Records: []store.Record{
		{Collection: "app.bulleted.node", RKey: "3kshared22222", CID: "c1", Value: store.MustValue(map[string]any{"$type": "app.bulleted.node", "text": "Shared", "sortKey": "a", "createdAt": "2026-03-10T09:00:00.000Z"})},
		{Collection: "app.bulleted.node", RKey: "3kprivate2222", CID: "c2", Value: store.MustValue(map[string]any{"$type": "app.bulleted.node", "text": "Private", "sortKey": "b", "createdAt": "2026-03-10T09:00:00.000Z"})},
		{Collection: "app.bulleted.outline", RKey: "3kshared22222", CID: "c3", Value: store.MustValue(map[string]any{"$type": "app.bulleted.outline", "root": "at://" + owner + "/app.bulleted.node/3kshared22222",
			"contributors": []any{map[string]any{"did": me}}, "createdAt": "2026-03-10T09:00:00.000Z"})},
	}})
	down := false
	env := sharedEnv(t, l, func(ctx context.Context, ident string) (*outline.Tree, error) {
		if down {
			return nil, errors.New("connection refused")
		}
		if ident != owner {
			return nil, errors.New("unknown identity " + ident)
		}
		return ownerTree, nil
	})
	c := inProcess(t, env)
	snapshot := func() []store.Record {
		s, err := l.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return append([]store.Record(nil), s.Records...)
	}
	try := func(kind, name, args string) {
		t.Helper()
		var a map[string]any
		json.Unmarshal([]byte(args), &a)
		before := snapshot()
		res, sc := call(t, c, name, a)
		e, _ := sc["error"].(map[string]any)
		got := ""
		if e != nil {
			got, _ = e["kind"].(string)
		}
		if res.IsError != (kind != "") || got != kind {
			t.Fatalf("%s %s: want error kind %q, got %q: %s", name, args, kind, got, text(res))
		}
		if after := snapshot(); kind != "" && !reflect.DeepEqual(before, after) {
			t.Fatalf("%s %s refused, but the repository changed", name, args)
		}
	}
	try("cross_repo", "move_node", `{"node":"3kaaaaaaaaaa2","parent":"top"}`)
	try("cross_repo", "move_node", `{"node":"3kaaaaaaaaaa2","parent":"top","dry_run":true}`)
	try("cross_repo", "move_node", `{"nodes":["3kaaaaaaaaab2","3kaaaaaaaaaa2"],"parent":"top"}`)
	try("cross_repo", "apply_batch", `{"ops":[{"tool":"insert_after","args":{"text":"first"}},{"tool":"move_node","args":{"node":"3kaaaaaaaaaa2","parent":"top"}}]}`)
	// one's own bullet named by one's own handle is one's own repository
	env.Engine.Resolver = fakeResolver{"me.example.com": me}
	mine := outline.Position{}
	out, err := env.Engine.Do(ctx, intent.Insert{Pos: mine, Nodes: []intent.NewNode{{Text: "my own"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	try("cross_repo", "move_node", `{"node":"3kaaaaaaaaaa2","parent":"at://me.example.com/app.bulleted.node/`+out.Plan.Created[0].RKey+`"}`)
	try("unavailable", "move_node", `{"node":"3kaaaaaaaaaa2","parent":"at://nobody.example.com/app.bulleted.node/`+out.Plan.Created[0].RKey+`"}`)
	if _, err := env.Engine.Undo(ctx, 1, "", false); err != nil {
		t.Fatal(err)
	}
	down = true
	try("unavailable", "move_node", `{"node":"3kaaaaaaaaab2","parent":"top"}`)
	res, _ := call(t, c, "list_detached", map[string]any{})
	if s := text(res); !strings.Contains(s, "could not be checked here") {
		t.Fatalf("list_detached with the owner's repository down:\n%s", s)
	}
	down = false
	res, sc := call(t, c, "list_detached", map[string]any{})
	if s := text(res); !strings.Contains(s, "3kaaaaaaaaab2 (parent is in another repository (no outline there admits you") || !strings.Contains(s, "leave it there") {
		t.Fatalf("list_detached:\n%s", s)
	}
	if d, _ := sc["detached"].([]any); len(d) != 1 {
		t.Fatalf("detached %v", sc["detached"])
	}
	try("", "move_node", `{"node":"3kaaaaaaaaab2","parent":"top"}`)
	for _, r := range snapshot() {
		if r.RKey == "3kaaaaaaaaab2" && r.Value.Get("parent") != nil {
			t.Fatalf("the stray bullet was not re-attached: %v", r.Value)
		}
		if r.RKey == "3kaaaaaaaaaa2" && r.Value.Get("parent") != "at://"+owner+"/app.bulleted.node/3kshared22222" {
			t.Fatalf("the contribution moved: %v", r.Value)
		}
	}
}
