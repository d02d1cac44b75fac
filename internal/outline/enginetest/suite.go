// Package enginetest is the outline engine's behavioural suite. Every
// repository implementation runs it: the embedded store in package outline's
// tests, the PDS backend against the reference PDS.
package enginetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// Open returns a fresh, empty repository for one test.
type Open func(t testing.TB) store.Repository

// Run runs the suite; steps is the length of the random-intent run.
func Run(t *testing.T, open Open, steps int) {
	t.Run("InsertMoveDeleteUndo", func(t *testing.T) { insertMoveDeleteUndo(t, open) })
	t.Run("NotesPoliciesCompleteUnknownFields", func(t *testing.T) { notesPoliciesCompleteUnknownFields(t, open) })
	t.Run("RandomIntents", func(t *testing.T) { randomIntents(t, open, steps) })
	t.Run("ReattachDetached", func(t *testing.T) { reattachDetached(t, open) })
	t.Run("ResumeAfterForeignAppends", func(t *testing.T) { resumeAfterForeignAppends(t, open) })
	t.Run("SortChildren", func(t *testing.T) { sortChildren(t, open) })
	t.Run("EveryIntentAndItsInverse", func(t *testing.T) { everyIntentAndItsInverse(t, open) })
	t.Run("GateWorldChanged", func(t *testing.T) { worldChanged(t, open) })
	t.Run("GateProperty", func(t *testing.T) { gateProperty(t, open, steps) })
}

// Insert plans and commits new top-level or nested bullets and returns their
// record keys.
func Insert(t testing.TB, e *outline.Engine, pos outline.Position, texts ...string) []string {
	t.Helper()
	var ns []intent.NewNode
	for _, s := range texts {
		ns = append(ns, intent.NewNode{Text: s})
	}
	out, err := e.DoFunc(context.Background(), false, func(p *outline.Planner) error { return intent.Insert{Pos: pos, Nodes: ns}.Plan(p) })
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range out.Plan.Created {
		keys = append(keys, c.RKey)
	}
	return keys
}

func Texts(t testing.TB, e *outline.Engine, parent string) []string {
	tr, _ := e.Tree(context.Background())
	var it *outline.Item
	if parent != "" {
		it, _ = tr.Resolve(parent)
	}
	var out []string
	for c := range tr.ChildrenOf(it).Items() {
		out = append(out, c.Str("text"))
	}
	return out
}

func insertMoveDeleteUndo(t *testing.T, open Open) {
	ctx := context.Background()
	e := outline.New(open(t))
	top := Insert(t, e, outline.Position{}, "A", "B", "C")
	Insert(t, e, outline.Position{After: top[0]}, "A2")
	if got := Texts(t, e, ""); !reflect.DeepEqual(got, []string{"A", "A2", "B", "C"}) {
		t.Fatalf("order %v", got)
	}
	kids := Insert(t, e, outline.Position{Parent: top[1]}, "b1", "b2")
	// move C before A
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return (intent.Move{Nodes: []string{top[2]}, Pos: outline.Position{Where: "first"}}).Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	if got := Texts(t, e, ""); !reflect.DeepEqual(got, []string{"C", "A", "A2", "B"}) {
		t.Fatalf("after move %v", got)
	}
	// cycle
	_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Move{Nodes: []string{top[1]}, Pos: outline.Position{Parent: kids[0]}}.Plan(p)
	})
	if !errors.Is(err, outline.ErrCycle) {
		t.Fatalf("want cycle, got %v", err)
	}
	// anchor not a child
	_, err = e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{Parent: top[1], After: top[0]}, Nodes: []intent.NewNode{{Text: "x"}}}.Plan(p)
	})
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrAnchorMissing) || oe.Next == "" {
		t.Fatalf("want anchor missing with next step, got %v", err)
	}
	// delete refuses with children, lifts them in place
	_, err = e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Delete{Node: top[1], Children: ""}.Plan(p) })
	if !errors.Is(err, outline.ErrHasChildren) {
		t.Fatalf("want has children, got %v", err)
	}
	tr0, _ := e.Tree(ctx)
	before := tr0.Snapshot()
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Delete{Node: top[1], Children: "lift"}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	if got := Texts(t, e, ""); !reflect.DeepEqual(got, []string{"C", "A", "A2", "b1", "b2"}) {
		t.Fatalf("after lift %v", got)
	}
	// undo restores the snapshot exactly
	if _, err := e.Undo(ctx, 1, "", false); err != nil {
		t.Fatal(err)
	}
	tr1, _ := e.Tree(ctx)
	if !sameRecords(before, tr1.Snapshot()) {
		t.Fatal("undo did not restore the records")
	}
	// dry run writes nothing
	c0 := tr1.Commit
	out, err := e.DoFunc(ctx, true, func(p *outline.Planner) error { return intent.Delete{Node: top[1], Children: "subtree"}.Plan(p) })
	if err != nil || len(out.Plan.Writes) != 3 || out.Plan.Cost != 3 {
		t.Fatalf("dry run plan: %v %+v", err, out)
	}
	tr2, _ := e.Tree(ctx)
	if tr2.Commit != c0 {
		t.Fatal("dry run wrote")
	}
}

func notesPoliciesCompleteUnknownFields(t *testing.T, open Open) {
	ctx := context.Background()
	e := outline.New(open(t))
	out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "todo https://x.test #tag", Layout: "todo", Completed: true, Note: "n"}}}.Plan(p)
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
	if it.Note == nil || it.Str("completedAt") == "" || it.Rec.Value.Get("facets") == nil {
		t.Fatalf("record %+v", it.Rec.Value)
	}
	// unknown layout and fields survive an edit
	v := it.Rec.Value.Map()
	v["layout"], v["x-future"] = "kanban", "keep"
	if _, err := e.Repo.Apply(ctx, "", []store.Write{{Op: store.Update, Collection: "app.bulleted.node", RKey: k, Value: v}}); err != nil {
		t.Fatal(err)
	}
	txt := "edited"
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Edit{Node: k, Text: &txt}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	tr, _ = e.Tree(ctx)
	it, _ = tr.Resolve(k)
	if it.Str("layout") != "kanban" || it.Str("x-future") != "keep" || it.Str("text") != "edited" {
		t.Fatalf("fields lost: %v", it.Rec.Value)
	}
	// policy twice = one record
	for i := 0; i < 2; i++ {
		if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return (intent.Policy{Root: k, Allow: []string{"mentioned"}, Remove: false}).Plan(p)
		}); err != nil {
			t.Fatal(err)
		}
	}
	tr, _ = e.Tree(ctx)
	if tr.Policies.Len() != 1 || tr.Policies.Get(k).Value.Get("root") == nil {
		t.Fatalf("policies %v", tr.Policies)
	}
	_, err = e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Policy{Root: k, Allow: []string{"everyone"}, Remove: false}.Plan(p)
	})
	if !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("unknown rule accepted: %v", err)
	}
	// invalid text rejected with a field path, nothing written
	long := make([]byte, 10001)
	for i := range long {
		long[i] = 'a'
	}
	_, err = e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "ok"}, {Text: string(long)}}}.Plan(p)
	})
	if err == nil || !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("want invalid, got %v", err)
	}
	if want := "nodes[1].text"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
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

// randomIntents applies random intents and checks the invariants after
// each: keys strictly ordered and ≤ 512 bytes, no cycles, nothing detached by
// the engine, notes co-keyed, every record valid, undo restores exactly.
func randomIntents(t *testing.T, open Open, steps int) {
	ctx := context.Background()
	e := outline.New(open(t))
	rng := rand.New(rand.NewPCG(3, 4))
	Insert(t, e, outline.Position{}, "root")
	// the refusals each intent may meet on a random pick (a move under
	// itself or its own subtree, a move or tick that changes nothing); any
	// other error fails the run, and each intent must succeed often enough
	// that a planner refusing everything cannot pass
	refusals := map[string][]error{
		"insert":   nil,
		"move":     {outline.ErrCycle, outline.ErrNoChange},
		"delete":   nil,
		"complete": {outline.ErrNoChange},
	}
	tried, landed := map[string]int{}, map[string]int{}
	for step := 0; step < steps; step++ {
		tr, _ := e.Tree(ctx)
		var all []*outline.Item
		for _, it := range tr.Nodes.All() {
			all = append(all, it)
		}
		if len(all) == 0 {
			Insert(t, e, outline.Position{}, "root")
			continue
		}
		sort.Slice(all, func(i, j int) bool { return all[i].Key() < all[j].Key() })
		pick := func() string { return all[rng.IntN(len(all))].Key() }
		before := tr.Snapshot()
		var fn func(p *outline.Planner) error
		var kind string
		switch rng.IntN(5) {
		case 0, 1:
			kind = "insert"
			par := pick()
			fn = func(p *outline.Planner) error {
				return intent.Insert{Pos: outline.Position{Parent: par}, Nodes: []intent.NewNode{{Text: fmt.Sprint("n", step), Note: "note"}}}.Plan(p)
			}
		case 2:
			kind = "move"
			a, b := pick(), pick()
			fn = func(p *outline.Planner) error {
				return intent.Move{Nodes: []string{a}, Pos: outline.Position{Parent: b}}.Plan(p)
			}
		case 3:
			kind = "delete"
			a := pick()
			fn = func(p *outline.Planner) error { return intent.Delete{Node: a, Children: "lift"}.Plan(p) }
		case 4:
			kind = "complete"
			a := pick()
			fn = func(p *outline.Planner) error { return intent.Complete{Node: a, Done: rng.IntN(2) == 0}.Plan(p) }
		}
		tried[kind]++
		_, err := e.DoFunc(ctx, false, fn)
		if err != nil {
			expected := false
			for _, r := range refusals[kind] {
				expected = expected || errors.Is(err, r)
			}
			if !expected {
				t.Fatalf("step %d: %s refused unexpectedly: %v", step, kind, err)
			}
			continue
		}
		landed[kind]++
		checkInvariants(t, e)
		if step%10 == 0 {
			if _, err := e.Undo(ctx, 1, "", false); err != nil {
				t.Fatalf("undo: %v", err)
			}
			tr, _ := e.Tree(ctx)
			if !sameRecords(before, tr.Snapshot()) {
				t.Fatalf("step %d: undo did not restore", step)
			}
		}
	}
	t.Logf("intents landed of tried: %v of %v", landed, tried)
	for kind, n := range tried {
		// at least a third of each intent's tries land (the picks follow
		// the seed and creation order, so the counts are the same on every
		// run: moves land 18 of 26 times on the embedded store, 2 of 5 in
		// the PDS backend's shorter run; the other intents every time)
		if n >= 3 && 3*landed[kind] < n {
			t.Errorf("%s landed %d of %d tries: below the floor of a third", kind, landed[kind], n)
		}
	}
}

func checkInvariants(t *testing.T, e *outline.Engine) {
	t.Helper()
	tr, _ := e.Tree(context.Background())
	if tr.Detached.Len() > 0 {
		t.Fatalf("engine detached %s: %s", tr.Detached.At(0).Key(), tr.Detached.At(0).Detached)
	}
	// the engine keeps its tree current from each commit's changes: it
	// must be the tree of the repository's records as read back
	s, err := e.Repo.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tr.Describe(), outline.Build(s).Describe(); got != want {
		t.Fatalf("the engine's tree differs from the repository's records:\n%s", firstDiff(got, want))
	}
	var walk func(items outline.Kids)
	walk = func(items outline.Kids) {
		var keys []string
		for it := range items.Items() {
			keys = append(keys, it.SortKey())
			if tr.Invalid(it) != "" {
				t.Fatalf("invalid record %s: %s", it.Key(), tr.Invalid(it))
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
	for rk, n := range tr.Notes.All() {
		if tr.Nodes.Get(rk) == nil {
			t.Fatalf("note %s without its node", rk)
		}
		if err := validate.Default().Data(n.Value.Map(), "", nil); err != nil {
			t.Fatal(err)
		}
	}
}

// A bullet whose parent no longer resolves is listed as detached and can be
// re-attached by a move that names a parent; without one the move refuses.
func reattachDetached(t *testing.T, open Open) {
	ctx := context.Background()
	l := open(t)
	e := outline.New(l)
	home := Insert(t, e, outline.Position{}, "home")[0]
	orphan := "3kaaaaaaaaa2o"
	if _, err := l.Apply(ctx, "", []store.Write{{Op: store.Create, Collection: "app.bulleted.node", RKey: orphan, Value: map[string]any{
		"$type": "app.bulleted.node", "text": "orphan", "sortKey": "a", "createdAt": "2026-01-01T00:00:00Z",
		"parent": "at://" + l.DID().String() + "/app.bulleted.node/3kaaaaaaaaa2x"}}}); err != nil {
		t.Fatal(err)
	}
	tr, _ := e.Tree(ctx)
	if tr.Detached.Len() != 1 || tr.Detached.At(0).Key() != orphan {
		t.Fatalf("detached: %v", tr.Detached)
	}
	_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Move{Nodes: []string{orphan}, Pos: outline.Position{}}.Plan(p)
	})
	if !errors.Is(err, outline.ErrParentMissing) {
		t.Fatalf("move without parent: %v", err)
	}
	out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Move{Nodes: []string{orphan}, Pos: outline.Position{Parent: home}}.Plan(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(out.Plan.Diagnostics, " "), "re-attached") {
		t.Fatalf("diagnostics: %v", out.Plan.Diagnostics)
	}
	tr, _ = e.Tree(ctx)
	if tr.Detached.Len() != 0 || !reflect.DeepEqual(Texts(t, e, home), []string{"orphan"}) {
		t.Fatalf("after re-attach: detached %d, children %v", tr.Detached.Len(), Texts(t, e, home))
	}
}

// firstDiff shows where two descriptions part.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}
