package tools_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// TestIntoSharedOutline: import_outline and move_node put bullets under
// another identity's bullet where its outline admits this identity. The
// bullets stay records of this repository whose parent is the owner's
// bullet (their own children keep theirs), placed among the bullets the
// owner's outline shows there by position; a bullet that does not admit
// this identity is refused with nothing written, and a dry run writes
// nothing. Checked on the repository as read back.
func TestIntoSharedOutline(t *testing.T) {
	const owner = "did:plc:owneroftheplan"
	l := openLocal(t)
	ctx := context.Background()
	me := l.DID().String()
	ownerNode := func(rkey, parent, sortKey, text string) store.Record {
		v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}
		if parent != "" {
			v["parent"] = "at://" + owner + "/app.bulleted.node/" + parent
		}
		return store.Record{Collection: "app.bulleted.node", RKey: rkey, CID: "c" + rkey, Value: store.MustValue(v)}
	}
	shared := "at://" + owner + "/app.bulleted.node/3kshared22222"
	ownerTree := outline.Build(&store.Snapshot{DID: owner, Commit: "o1", Records: []store.Record{
		ownerNode("3kshared22222", "", "a", "Shared"),
		ownerNode("3kownerkid222", "3kshared22222", "m", "the owner's own child"),
		ownerNode("3kprivate2222", "", "b", "Private"),
		{Collection: "app.bulleted.outline", RKey: "3kshared22222", CID: "c3", Value: store.MustValue(map[string]any{"$type": "app.bulleted.outline", "root": shared,
			"contributors": []any{map[string]any{"did": me}}, "createdAt": "2026-03-10T09:00:00.000Z"})},
	}})
	env := sharedEnv(t, l, func(ctx context.Context, ident string) (*outline.Tree, error) {
		if ident != owner {
			return nil, errors.New("unknown identity " + ident)
		}
		return ownerTree, nil
	})
	c := inProcess(t, env)
	records := func() map[string]map[string]any {
		s, err := l.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]map[string]any{}
		for _, r := range s.Records {
			if r.Collection == "app.bulleted.node" {
				out[r.Value.Str("text")] = r.Value.Map()
			}
		}
		return out
	}
	mustOK := func(name string, args map[string]any) map[string]any {
		t.Helper()
		res, sc := call(t, c, name, args)
		if res.IsError {
			t.Fatalf("%s %v: %s", name, args, text(res))
		}
		return sc
	}
	refused := func(kind, name string, args map[string]any) {
		t.Helper()
		before := records()
		res, sc := call(t, c, name, args)
		e, _ := sc["error"].(map[string]any)
		if got, _ := e["kind"].(string); !res.IsError || got != kind {
			t.Fatalf("%s %v: want %s, got %s", name, args, kind, text(res))
		}
		if after := records(); !reflect.DeepEqual(before, after) {
			t.Fatalf("%s refused, but the repository changed", name)
		}
	}

	mustOK("import_outline", map[string]any{"content": "- one\n  - child of one\n- two", "parent": shared, "position": "first"})
	r := records()
	for _, k := range []string{"one", "two"} {
		if r[k]["parent"] != shared {
			t.Fatalf("%s: parent %v, want %s", k, r[k]["parent"], shared)
		}
	}
	if p, _ := r["child of one"]["parent"].(string); p == shared || p == "" {
		t.Fatalf("the child's parent is %q, want its own parent in this repository", p)
	}
	if k1, k2 := r["one"]["sortKey"].(string), r["two"]["sortKey"].(string); !(k1 < k2 && k2 < "m") {
		t.Fatalf("imported first: sortKeys %q, %q, want both before the owner's %q", k1, k2, "m")
	}

	sc := mustOK("insert_after", map[string]any{"nodes": `[{"text":"mine to move","children":[{"text":"its child"}]}]`})
	rk := sc["created"].([]any)[0].(map[string]any)["rkey"].(string)
	before := records()["its child"]["parent"]
	refused("cross_repo", "move_node", map[string]any{"node": rk, "parent": "at://" + owner + "/app.bulleted.node/3kprivate2222"})
	mustOK("move_node", map[string]any{"node": rk, "parent": shared, "after": "at://" + owner + "/app.bulleted.node/3kownerkid222", "dry_run": true})
	if records()["mine to move"]["parent"] != nil {
		t.Fatal("a dry run moved the bullet")
	}
	mustOK("move_node", map[string]any{"node": rk, "parent": shared, "after": "at://" + owner + "/app.bulleted.node/3kownerkid222"})
	r = records()
	if r["mine to move"]["parent"] != shared || r["its child"]["parent"] != before {
		t.Fatalf("after the move: %v / %v", r["mine to move"], r["its child"])
	}
	if k := r["mine to move"]["sortKey"].(string); k <= "m" {
		t.Fatalf("moved after the owner's child: sortKey %q, want after %q", k, "m")
	}
	// now a contribution: moving it out again is refused
	refused("cross_repo", "move_node", map[string]any{"node": rk, "parent": "top"})
}

// sharedEnv is the tool environment of an engine over repo that reads other
// identities' repositories with others (the contributor rules on).
func sharedEnv(t *testing.T, repo store.Repository, others outline.Others) *tools.Env {
	t.Helper()
	e, err := outline.Open(repo, outline.Options{Others: others})
	if err != nil {
		t.Fatal(err)
	}
	return &tools.Env{Engine: e}
}
