package outline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/order"
	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/store"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

func newEngine(t testing.TB) *outline.Engine {
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return outline.New(l)
}

func insert(t testing.TB, e *outline.Engine, pos outline.Position, texts ...string) []string {
	t.Helper()
	var ns []outline.NewNode
	for _, s := range texts {
		ns = append(ns, outline.NewNode{Text: s})
	}
	out, err := e.Do(context.Background(), false, func(p *outline.Planner) error { return p.Insert(pos, ns) })
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range out.Plan.Created {
		keys = append(keys, c.RKey)
	}
	return keys
}

func texts(t testing.TB, e *outline.Engine, parent string) []string {
	tr, _ := e.Tree(context.Background())
	var it *outline.Item
	if parent != "" {
		it, _ = tr.Resolve(parent)
	}
	var out []string
	for _, c := range tr.ChildrenOf(it) {
		out = append(out, c.Str("text"))
	}
	return out
}

func TestInsertMoveDeleteUndo(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	top := insert(t, e, outline.Position{}, "A", "B", "C")
	insert(t, e, outline.Position{After: top[0]}, "A2")
	if got := texts(t, e, ""); !reflect.DeepEqual(got, []string{"A", "A2", "B", "C"}) {
		t.Fatalf("order %v", got)
	}
	kids := insert(t, e, outline.Position{Parent: top[1]}, "b1", "b2")
	// move C before A
	if _, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.Move([]string{top[2]}, outline.Position{Where: "first"}) }); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, e, ""); !reflect.DeepEqual(got, []string{"C", "A", "A2", "B"}) {
		t.Fatalf("after move %v", got)
	}
	// cycle
	_, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.Move([]string{top[1]}, outline.Position{Parent: kids[0]}) })
	if !errors.Is(err, outline.ErrCycle) {
		t.Fatalf("want cycle, got %v", err)
	}
	// anchor not a child
	_, err = e.Do(ctx, false, func(p *outline.Planner) error {
		return p.Insert(outline.Position{Parent: top[1], After: top[0]}, []outline.NewNode{{Text: "x"}})
	})
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrAnchorMissing) || oe.Next == "" {
		t.Fatalf("want anchor missing with next step, got %v", err)
	}
	// delete refuses with children, lifts them in place
	_, err = e.Do(ctx, false, func(p *outline.Planner) error { return p.DeleteNode(top[1], "") })
	if !errors.Is(err, outline.ErrHasChildren) {
		t.Fatalf("want has children, got %v", err)
	}
	tr0, _ := e.Tree(ctx)
	before := tr0.Snap
	if _, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.DeleteNode(top[1], "lift") }); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, e, ""); !reflect.DeepEqual(got, []string{"C", "A", "A2", "b1", "b2"}) {
		t.Fatalf("after lift %v", got)
	}
	// undo restores the snapshot exactly
	if _, err := e.Undo(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	tr1, _ := e.Tree(ctx)
	if !sameRecords(before, tr1.Snap) {
		t.Fatal("undo did not restore the records")
	}
	// dry run writes nothing
	c0 := tr1.Commit
	out, err := e.Do(ctx, true, func(p *outline.Planner) error { return p.DeleteNode(top[1], "subtree") })
	if err != nil || len(out.Plan.Writes) != 3 || out.Plan.Cost != 3 {
		t.Fatalf("dry run plan: %v %+v", err, out)
	}
	tr2, _ := e.Tree(ctx)
	if tr2.Commit != c0 {
		t.Fatal("dry run wrote")
	}
}

func TestNotesPoliciesCompleteUnknownFields(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	out, err := e.Do(ctx, false, func(p *outline.Planner) error {
		return p.Insert(outline.Position{}, []outline.NewNode{{Text: "todo https://x.test #tag", Layout: "todo", Completed: true, Note: "n"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Plan.Writes) != 2 || out.Plan.Cost != 6 {
		t.Fatalf("want node+note in one commit: %+v", out.Plan.Writes)
	}
	k := out.Plan.Created[0].RKey
	tr, _ := e.Tree(ctx)
	it, _ := tr.Resolve(k)
	if it.Note == nil || it.Str("completedAt") == "" || it.Rec.Value["facets"] == nil {
		t.Fatalf("record %+v", it.Rec.Value)
	}
	// unknown layout and fields survive an edit
	v := outline.Copy(it.Rec.Value)
	v["layout"], v["x-future"] = "kanban", "keep"
	if _, err := e.Repo.Apply(ctx, "", []store.Write{{Op: store.Update, Collection: "app.bulleted.node", RKey: k, Value: v}}); err != nil {
		t.Fatal(err)
	}
	txt := "edited"
	if _, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.Edit(k, outline.Edit{Text: &txt}) }); err != nil {
		t.Fatal(err)
	}
	tr, _ = e.Tree(ctx)
	it, _ = tr.Resolve(k)
	if it.Str("layout") != "kanban" || it.Str("x-future") != "keep" || it.Str("text") != "edited" {
		t.Fatalf("fields lost: %v", it.Rec.Value)
	}
	// policy twice = one record
	for i := 0; i < 2; i++ {
		if _, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.SetPolicy(k, []string{"mentioned"}, false) }); err != nil {
			t.Fatal(err)
		}
	}
	tr, _ = e.Tree(ctx)
	if len(tr.Policies) != 1 || tr.Policies[k].Value["root"] == nil {
		t.Fatalf("policies %v", tr.Policies)
	}
	_, err = e.Do(ctx, false, func(p *outline.Planner) error { return p.SetPolicy(k, []string{"everyone"}, false) })
	if !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("unknown rule accepted: %v", err)
	}
	// invalid text rejected with a field path, nothing written
	long := make([]byte, 10001)
	for i := range long {
		long[i] = 'a'
	}
	_, err = e.Do(ctx, false, func(p *outline.Planner) error {
		return p.Insert(outline.Position{}, []outline.NewNode{{Text: "ok"}, {Text: string(long)}})
	})
	if err == nil || !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("want invalid, got %v", err)
	}
	if want := "nodes[1].text"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
}

func contains(s, sub string) bool {
	return len(s) >= len(sub) && (s == sub || len(sub) == 0 || indexOf(s, sub) >= 0)
}
func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func sameRecords(a, b *store.Snapshot) bool {
	if len(a.Records) != len(b.Records) {
		return false
	}
	for i := range a.Records {
		if a.Records[i].CID != b.Records[i].CID || a.Records[i].RKey != b.Records[i].RKey {
			return false
		}
	}
	return true
}

// TestRandomIntents applies random intents and checks the invariants after
// each: keys strictly ordered and ≤ 512 bytes, no cycles, nothing detached by
// the engine, notes co-keyed, every record valid, undo restores exactly.
func TestRandomIntents(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	rng := rand.New(rand.NewPCG(3, 4))
	insert(t, e, outline.Position{}, "root")
	for step := 0; step < 150; step++ {
		tr, _ := e.Tree(ctx)
		var all []*outline.Item
		for _, it := range tr.Nodes {
			all = append(all, it)
		}
		if len(all) == 0 {
			insert(t, e, outline.Position{}, "root")
			continue
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Key() < all[j].Key() })
		pick := func() string { return all[rng.IntN(len(all))].Key() }
		before := tr.Snap
		var fn func(p *outline.Planner) error
		switch rng.IntN(5) {
		case 0, 1:
			par := pick()
			fn = func(p *outline.Planner) error {
				return p.Insert(outline.Position{Parent: par}, []outline.NewNode{{Text: fmt.Sprint("n", step), Note: "note"}})
			}
		case 2:
			a, b := pick(), pick()
			fn = func(p *outline.Planner) error { return p.Move([]string{a}, outline.Position{Parent: b}) }
		case 3:
			a := pick()
			fn = func(p *outline.Planner) error { return p.DeleteNode(a, "lift") }
		case 4:
			a := pick()
			fn = func(p *outline.Planner) error { return p.Complete(a, rng.IntN(2) == 0) }
		}
		_, err := e.Do(ctx, false, fn)
		if err != nil {
			var oe *outline.Error
			if !errors.As(err, &oe) {
				t.Fatalf("step %d: %v", step, err)
			}
			continue
		}
		checkInvariants(t, e)
		if step%10 == 0 {
			if _, err := e.Undo(ctx, 1, false); err != nil {
				t.Fatalf("undo: %v", err)
			}
			tr, _ := e.Tree(ctx)
			if !sameRecords(before, tr.Snap) {
				t.Fatalf("step %d: undo did not restore", step)
			}
		}
	}
}

func checkInvariants(t *testing.T, e *outline.Engine) {
	t.Helper()
	tr, _ := e.Tree(context.Background())
	if len(tr.Detached) > 0 {
		t.Fatalf("engine detached %s: %s", tr.Detached[0].Key(), tr.Detached[0].Detached)
	}
	var walk func(items []*outline.Item)
	walk = func(items []*outline.Item) {
		var keys []string
		for _, it := range items {
			keys = append(keys, it.SortKey())
			if it.Invalid != "" {
				t.Fatalf("invalid record %s: %s", it.Key(), it.Invalid)
			}
			walk(it.Children)
		}
		if !order.Sorted(keys) {
			t.Fatalf("sibling keys not strictly ordered: %q", keys)
		}
		for _, k := range keys {
			if len(k) > order.MaxKey {
				t.Fatal("key over 512")
			}
		}
	}
	walk(tr.Roots)
	for rk, n := range tr.Notes {
		if tr.Nodes[rk] == nil {
			t.Fatalf("note %s without its node", rk)
		}
		if err := validate.Default().Data(n.Value, "", nil); err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkPlanInsert10k(b *testing.B) {
	ctx := context.Background()
	e := newEngine(b)
	for i := 0; i < 50; i++ {
		var ns []outline.NewNode
		for j := 0; j < 200; j++ {
			ns = append(ns, outline.NewNode{Text: "bullet"})
		}
		if _, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.Insert(outline.Position{}, ns) }); err != nil {
			b.Fatal(err)
		}
	}
	tr, _ := e.Tree(ctx)
	anchor := tr.Roots[5000].Key()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Do(ctx, true, func(p *outline.Planner) error {
			return p.Insert(outline.Position{After: anchor}, []outline.NewNode{{Text: "new"}})
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInsertCommit10k is an insert that commits on a 10,000-bullet
// outline: plan, validate, commit to the embedded store, and the next
// snapshot's tree (only changed records are validated again).
func BenchmarkInsertCommit10k(b *testing.B) {
	ctx := context.Background()
	e := newEngine(b)
	for i := 0; i < 50; i++ {
		var ns []outline.NewNode
		for j := 0; j < 200; j++ {
			ns = append(ns, outline.NewNode{Text: "bullet"})
		}
		if _, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.Insert(outline.Position{}, ns) }); err != nil {
			b.Fatal(err)
		}
	}
	tr, _ := e.Tree(ctx)
	anchor := tr.Roots[5000].Key()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Do(ctx, false, func(p *outline.Planner) error {
			return p.Insert(outline.Position{After: anchor}, []outline.NewNode{{Text: "new"}})
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRebuild10k is the tree refresh after a one-record commit on a
// 10,000-bullet outline (unchanged records are not validated again).
func BenchmarkRebuild10k(b *testing.B) {
	ctx := context.Background()
	e := newEngine(b)
	for i := 0; i < 50; i++ {
		var ns []outline.NewNode
		for j := 0; j < 200; j++ {
			ns = append(ns, outline.NewNode{Text: "bullet"})
		}
		if _, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.Insert(outline.Position{}, ns) }); err != nil {
			b.Fatal(err)
		}
	}
	tr, _ := e.Tree(ctx)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		outline.Rebuild(tr.Snap, tr)
	}
}

// The undo journal survives a restart when kept on disk, and a journal of
// another repository is ignored.
func TestJournalKeptAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := dir + "/undo.json"
	l, err := store.OpenLocal(dir + "/repo")
	if err != nil {
		t.Fatal(err)
	}
	e := outline.New(l)
	if err := e.KeepJournal(path); err != nil {
		t.Fatal(err)
	}
	keys := insert(t, e, outline.Position{}, "one", "two")
	if _, err := e.Do(ctx, false, func(p *outline.Planner) error {
		return p.Edit(keys[0], outline.Edit{Text: ptr("ONE"), Note: ptr("a note")})
	}); err != nil {
		t.Fatal(err)
	}
	before, _ := l.Snapshot(ctx)
	l.Close()

	l2, err := store.OpenLocal(dir + "/repo")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	e2 := outline.New(l2)
	if err := e2.KeepJournal(path); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, e2, ""); !reflect.DeepEqual(got, []string{"ONE", "two"}) {
		t.Fatalf("reopened outline: %v (snapshot had %d records)", got, len(before.Records))
	}
	if _, err := e2.Undo(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, e2, ""); !reflect.DeepEqual(got, []string{"one", "two"}) {
		t.Fatalf("after undo across restart: %v", got)
	}
	tr, _ := e2.Tree(ctx)
	if len(tr.Notes) != 0 {
		t.Fatalf("undo left %d note(s)", len(tr.Notes))
	}
	if _, err := e2.Undo(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	if got := texts(t, e2, ""); len(got) != 0 {
		t.Fatalf("second undo: %v", got)
	}

	// another repository's engine starts with an empty journal
	other, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	e3 := outline.New(other)
	insert(t, e2, outline.Position{}, "three")
	if err := e3.KeepJournal(path); err != nil {
		t.Fatal(err)
	}
	if _, err := e3.Undo(ctx, 1, true); !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("undo with another repository's journal: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// A bullet whose parent no longer resolves is listed as detached and can be
// re-attached by a move that names a parent; without one the move refuses.
func TestReattachDetached(t *testing.T) {
	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := outline.New(l)
	home := insert(t, e, outline.Position{}, "home")[0]
	orphan := "3kaaaaaaaaa2o"
	if _, err := l.Apply(ctx, "", []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: orphan, Value: map[string]any{
		"$type": "app.bulleted.node", "text": "orphan", "sortKey": "a", "createdAt": "2026-01-01T00:00:00Z",
		"parent": "at://" + l.DID().String() + "/app.bulleted.node/3kaaaaaaaaa2x"}}}); err != nil {
		t.Fatal(err)
	}
	tr, _ := e.Tree(ctx)
	if len(tr.Detached) != 1 || tr.Detached[0].Key() != orphan {
		t.Fatalf("detached: %v", tr.Detached)
	}
	_, err = e.Do(ctx, false, func(p *outline.Planner) error { return p.Move([]string{orphan}, outline.Position{}) })
	if !errors.Is(err, outline.ErrParentMissing) {
		t.Fatalf("move without parent: %v", err)
	}
	out, err := e.Do(ctx, false, func(p *outline.Planner) error { return p.Move([]string{orphan}, outline.Position{Parent: home}) })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(out.Plan.Diagnostics, " "), "re-attached") {
		t.Fatalf("diagnostics: %v", out.Plan.Diagnostics)
	}
	tr, _ = e.Tree(ctx)
	if len(tr.Detached) != 0 || !reflect.DeepEqual(texts(t, e, home), []string{"orphan"}) {
		t.Fatalf("after re-attach: detached %d, children %v", len(tr.Detached), texts(t, e, home))
	}
}
