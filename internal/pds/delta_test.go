package pds_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// fresh is the repository of did read anew, whole, by a new client.
func fresh(t testing.TB, did syntax.DID) *store.Snapshot {
	t.Helper()
	s, err := pds.New(atclient.NewAPIClient(srv.URL), did).SnapshotCAR(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type counts struct{ heads, cars, diffs, walks int64 }

func countsOf(r *pds.Repo) counts {
	return counts{r.Stats.Heads.Load(), r.Stats.CARs.Load(), r.Stats.Diffs.Load(), r.Stats.Walks.Load()}
}

// After our own write, Changes answers from what applyWrites returned: one
// getLatestCommit, no CAR read, no walk of the MST; exactly the writes,
// with the values a read of the commit decodes (an int sent comes back an
// int64) and the CIDs the PDS gave them.
func TestChangesOwnWrite(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	e := outline.New(r)
	var ns []intent.NewNode
	for i := range 30 {
		ns = append(ns, intent.NewNode{Text: fmt.Sprint("bullet ", i), Note: "note"})
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: ns}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	did := r.DID().String()
	upd := tr.Roots.At(3).Rec
	value := map[string]any{}
	for k, v := range upd.Value.Map() {
		value[k] = v
	}
	value["text"] = "edited #tag"
	value["facets"] = []any{map[string]any{"index": map[string]any{"byteStart": 7, "byteEnd": 11},
		"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#tag", "tag": "tag"}}}}
	created := "3kzzzzzzzzz2a"
	writes := []store.Write{
		{Op: store.Create, Collection: "app.bulleted.node", RKey: created, Value: map[string]any{"$type": "app.bulleted.node",
			"text": "new", "sortKey": "zz", "createdAt": "2026-12-01T10:00:00.000Z", "parent": "at://" + did + "/app.bulleted.node/" + tr.Roots.At(0).Key()}},
		{Op: store.Update, Collection: upd.Collection, RKey: upd.RKey, Value: value},
		{Op: store.Delete, Collection: "app.bulleted.note", RKey: tr.Roots.At(5).Key()},
	}
	before := countsOf(r)
	res, err := r.Apply(ctx, tr.Commit, writes)
	if err != nil {
		t.Fatal(err)
	}
	commit, rev, changes, ok, err := r.Changes(ctx, tr.Commit)
	if err != nil || !ok {
		t.Fatalf("Changes: ok %v, %v", ok, err)
	}
	if commit != res.Commit || rev != res.Rev {
		t.Fatalf("Changes at %s/%s, the write made %s/%s", commit, rev, res.Commit, res.Rev)
	}
	if got := countsOf(r); got != (counts{before.heads + 1, before.cars, before.diffs, before.walks}) {
		t.Fatalf("requests and walks %+v, before %+v: want one getLatestCommit and nothing else", got, before)
	}
	s := fresh(t, r.DID())
	find := func(coll, rkey string) *store.Record {
		for i := range s.Records {
			if s.Records[i].Collection == coll && s.Records[i].RKey == rkey {
				return &s.Records[i]
			}
		}
		return nil
	}
	if len(changes) != len(writes) {
		t.Fatalf("%d changes for %d writes", len(changes), len(writes))
	}
	for i, w := range writes {
		ch := changes[i]
		if ch.Collection != w.Collection || ch.RKey != w.RKey {
			t.Fatalf("change %d is %s/%s, the write %s/%s", i, ch.Collection, ch.RKey, w.Collection, w.RKey)
		}
		read := find(w.Collection, w.RKey)
		if w.Op == store.Delete {
			if !ch.Value.IsZero() || read != nil {
				t.Fatalf("deleted %s: change %v, read %v", w.RKey, ch.Value, read)
			}
			continue
		}
		if read == nil || ch.CID != res.Results[i].CID || !reflect.DeepEqual(ch, *read) {
			t.Fatalf("change %d differs from a read of the commit:\n%#v\n%#v", i, ch, read)
		}
	}
	// the engine's tree, brought forward by the same changes
	tr, err = e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Describe(), outline.Build(s).Describe(); got != want {
		t.Fatalf("the engine's tree differs from a fresh read:\n%s", firstLine(got, want))
	}
	if got := countsOf(r); got.cars != before.cars || got.diffs != before.diffs || got.walks != before.walks {
		t.Fatalf("the engine read more: %+v, before %+v", got, before)
	}
}

// Another client of the same account creates, updates and deletes (many at
// once, so that the MST restructures; records deleted and then created
// again with the same value, which restores MST nodes), between our own
// writes: after each round the engine's tree, kept by Changes, equals the
// tree of a fresh whole read, and no round read the whole repository or
// walked the whole MST.
func TestChangesOtherClient(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	r := pdstest.Login(t, srv, a, t.TempDir(), nil)
	other := pdstest.Login(t, srv, a, t.TempDir(), nil)
	e := outline.New(r)
	rng := rand.New(rand.NewPCG(5, 6))
	did := a.DID.String()
	top := "3kaaaaaaaaa2a"
	node := func(rk, text, parent string) map[string]any {
		v := map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "a" + rk[len(rk)-4:], "createdAt": "2026-12-01T10:00:00.000Z"}
		if parent != "" {
			v["parent"] = "at://" + did + "/app.bulleted.node/" + parent
		}
		return v
	}
	live := map[string]map[string]any{}
	var keys []string
	newKey := func() string {
		return syntax.NewTID(1_750_000_000_000_000+rng.Int64N(1<<40), uint(rng.IntN(1024))).String()
	}
	write := func(ws []store.Write) {
		t.Helper()
		for len(ws) > 0 {
			k := min(len(ws), store.MaxBatch)
			if _, err := other.Apply(ctx, "", ws[:k]); err != nil {
				t.Fatal(err)
			}
			ws = ws[k:]
		}
	}
	ws := []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: top, Value: node(top, "top", "")}}
	for range 600 {
		k := newKey()
		v := node(k, "seed "+k, top)
		live[k] = v
		keys = append(keys, k)
		ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: k, Value: v})
	}
	write(ws)
	if _, err := e.Tree(ctx); err != nil {
		t.Fatal(err)
	}
	base := countsOf(r)
	check := func(round int) {
		t.Helper()
		tr, err := e.Tree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tr.Describe(), outline.Build(fresh(t, a.DID)).Describe(); got != want {
			t.Fatalf("round %d: the engine's tree differs from a fresh read:\n%s", round, firstLine(got, want))
		}
		if got := countsOf(r); got.cars != base.cars || got.walks != base.walks {
			t.Fatalf("round %d: %d whole reads, %d walks of the MST", round, got.cars-base.cars, got.walks-base.walks)
		}
	}
	var gone []string // deleted, with their values kept, to create again
	dead := map[string]map[string]any{}
	for round := range 14 {
		var ws []store.Write
		n := []int{1, 5, 250}[round%3] // 250: the MST changes shape
		for range n {
			switch x := rng.IntN(10); {
			case x < 4:
				k := newKey()
				v := node(k, "new "+k, keys[rng.IntN(len(keys))])
				if _, ok := live[k]; ok {
					continue
				}
				live[k] = v
				keys = append(keys, k)
				ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: k, Value: v})
			case x < 7:
				k := keys[rng.IntN(len(keys))]
				if _, ok := live[k]; !ok || k == top || dup(ws, k) {
					continue
				}
				v := node(k, fmt.Sprint("edited ", round, " ", k), top)
				live[k] = v
				ws = append(ws, store.Write{Op: store.Update, Collection: "app.bulleted.node", RKey: k, Value: v})
			default:
				k := keys[rng.IntN(len(keys))]
				if _, ok := live[k]; !ok || k == top || dup(ws, k) {
					continue
				}
				dead[k] = live[k]
				delete(live, k)
				gone = append(gone, k)
				ws = append(ws, store.Write{Op: store.Delete, Collection: "app.bulleted.node", RKey: k})
			}
		}
		if round%2 == 1 { // created again as they were: the MST nodes of before come back
			for _, k := range gone {
				if dup(ws, k) {
					continue
				}
				live[k] = dead[k]
				ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: k, Value: dead[k]})
			}
			gone = nil
		}
		write(ws)
		check(round)
		// and one of ours in between
		if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return intent.Insert{Pos: outline.Position{Parent: top, Where: "first"}, Nodes: []intent.NewNode{{Text: fmt.Sprint("ours ", round)}}}.Plan(p)
		}); err != nil {
			t.Fatal(err)
		}
		if round%4 == 0 {
			check(round)
		}
	}
}

func dup(ws []store.Write, rkey string) bool {
	for _, w := range ws {
		if w.RKey == rkey {
			return true
		}
	}
	return false
}

// firstLine shows where two descriptions part.
func firstLine(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(al), len(bl))
}
