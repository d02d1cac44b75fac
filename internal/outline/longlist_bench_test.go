package outline_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// siblingStore is an embedded store whose top level is one list of n siblings
// (written directly, keys spread evenly), and an engine on it, warmed up.
func siblingStore(b *testing.B, n int) (*outline.Engine, []string) {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	keys, err := order.Spread("", "", n)
	if err != nil {
		b.Fatal(err)
	}
	clock := syntax.NewTIDClock(0)
	rkeys := make([]string, n)
	ws := make([]store.Write, n)
	for i := range ws {
		rkeys[i] = clock.Next().String()
		ws[i] = store.Write{Op: store.Create, Collection: lexicon.Node, RKey: rkeys[i],
			Value: map[string]any{"$type": lexicon.Node, "text": "sibling", "sortKey": keys[i], "createdAt": "2026-12-06T00:00:00.000Z"}}
	}
	for len(ws) > 0 {
		k := min(len(ws), store.MaxBatch)
		if _, err := l.Apply(ctx, "", ws[:k]); err != nil {
			b.Fatal(err)
		}
		ws = ws[k:]
	}
	e, err := outline.Open(l, outline.Options{Operations: filepath.Join(dir, "ops")})
	if err != nil {
		b.Fatal(err)
	}
	if t, err := e.Tree(ctx); err != nil || t.Roots.Len() != n {
		b.Fatalf("%v: %d roots", err, t.Roots.Len())
	}
	return e, rkeys
}

// BenchmarkInsertLongList: one bullet inserted into a list of 50,000
// siblings (issue 41), in the middle of it and after its last bullet: a
// dry run (the plan and the gate: placing among the siblings) and a real
// insert (the write, the tree brought forward), in the middle, first and
// last (each copies the chunk of the sibling list it joins and the list's
// directory, outline.Kids: not the list).
//
//	go test ./internal/outline -run '^$' -bench InsertLongList -benchtime 300x
//
// Placing read every sibling (their keys copied, the newest found by
// comparing every record key): 59% of the engine's CPU here, a dry run
// 1.9–4.3 ms. It reads the 33 on each side of the gap now: 35–150 µs (2
// cores shared with other work; the write's wall time is the store's).
func BenchmarkInsertLongList(b *testing.B) {
	const n = 50_000
	ctx := context.Background()
	e, rkeys := siblingStore(b, n)
	for _, c := range []struct {
		name  string
		after string
		dry   bool
	}{
		{"middle/dry", rkeys[n/2], true},
		{"last/dry", rkeys[n-1], true},
		{"middle/write", rkeys[n/3], false},
		{"first/write", "", false},
		{"last/write", "last", false},
	} {
		b.Run(c.name, func(b *testing.B) {
			pos := outline.Position{After: c.after}
			switch c.after {
			case "":
				pos.Where = "first"
			case "last":
				pos = outline.Position{Where: "last"}
			}
			in := intent.Insert{Pos: pos, Nodes: []intent.NewNode{{Text: "new"}}}
			for b.Loop() {
				out, err := e.Do(ctx, in, c.dry)
				if err != nil || len(out.Plan.Created) != 1 {
					b.Fatal(err)
				}
			}
		})
	}
}
