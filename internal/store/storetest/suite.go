// Package storetest is the behavioural suite every store.Repository
// implementation must pass (the embedded store and the PDS backend).
package storetest

import (
	"context"
	"errors"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

func node(text, key string) map[string]any {
	return map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": key, "createdAt": "2026-07-30T09:30:00.000Z"}
}

// Run runs the suite; open returns a fresh, empty repository.
func Run(t *testing.T, open func(t *testing.T) store.Repository) {
	ctx := context.Background()
	t.Run("create update delete", func(t *testing.T) {
		r := open(t)
		s0, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Apply(ctx, s0.Commit, []store.Write{
			{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2", Value: node("a", "a0")},
			{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kbbbbbbbbbb2", Value: node("b", "a1")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != 2 || res.Results[0].CID == "" || res.Commit == s0.Commit {
			t.Fatalf("bad result %+v", res)
		}
		s1, _ := r.Snapshot(ctx)
		if len(s1.Records) != 2 || s1.Commit != res.Commit || s1.Rev != res.Rev {
			t.Fatalf("snapshot %+v", s1)
		}
		if _, err := r.Apply(ctx, s1.Commit, []store.Write{
			{Op: store.Update, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2", Value: node("A", "a0")},
			{Op: store.Delete, Collection: "app.bulleted.node", RKey: "3kbbbbbbbbbb2"},
		}); err != nil {
			t.Fatal(err)
		}
		s2, _ := r.Snapshot(ctx)
		if len(s2.Records) != 1 || s2.Records[0].Value.Get("text") != "A" {
			t.Fatalf("after update/delete: %+v", s2.Records)
		}
	})
	t.Run("stale swapCommit conflicts and writes nothing", func(t *testing.T) {
		r := open(t)
		s0, _ := r.Snapshot(ctx)
		if _, err := r.Apply(ctx, s0.Commit, []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2", Value: node("a", "a0")}}); err != nil {
			t.Fatal(err)
		}
		_, err := r.Apply(ctx, s0.Commit, []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kbbbbbbbbbb2", Value: node("b", "a1")}})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("want ErrConflict, got %v", err)
		}
		s1, _ := r.Snapshot(ctx)
		if len(s1.Records) != 1 {
			t.Fatalf("conflicting write landed: %d records", len(s1.Records))
		}
	})
	t.Run("batch is atomic", func(t *testing.T) {
		r := open(t)
		s0, _ := r.Snapshot(ctx)
		_, err := r.Apply(ctx, s0.Commit, []store.Write{
			{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2", Value: node("a", "a0")},
			{Op: store.Update, Collection: "app.bulleted.node", RKey: "3kzzzzzzzzzz2", Value: node("z", "a1")},
		})
		if err == nil {
			t.Fatal("update of a missing record succeeded")
		}
		s1, _ := r.Snapshot(ctx)
		if len(s1.Records) != 0 || s1.Commit != s0.Commit {
			t.Fatal("half a batch landed")
		}
	})
	t.Run("batch limit", func(t *testing.T) {
		r := open(t)
		ws := make([]store.Write, store.MaxBatch+1)
		for i := range ws {
			ws[i] = store.Write{Op: store.Delete, Collection: "app.bulleted.node", RKey: "x"}
		}
		if _, err := r.Apply(ctx, "", ws); !errors.Is(err, store.ErrTooManyWrites) {
			t.Fatalf("want ErrTooManyWrites, got %v", err)
		}
	})
	t.Run("unknown fields round-trip", func(t *testing.T) {
		r := open(t)
		v := node("a", "a0")
		v["layout"] = "kanban"
		v["future"] = map[string]any{"x": "y"}
		if _, err := r.Apply(ctx, "", []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: "3kaaaaaaaaaa2", Value: v}}); err != nil {
			t.Fatal(err)
		}
		s, _ := r.Snapshot(ctx)
		got := s.Records[0].Value.Map()
		if got["layout"] != "kanban" || got["future"].(map[string]any)["x"] != "y" {
			t.Fatalf("lost fields: %v", got)
		}
	})
}
