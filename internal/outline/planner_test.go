package outline_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// The fold table: several changes of one record in one plan become the one
// write that takes the record from its state before the plan to its state
// after it. Each case commits and then reads the repository back.
func TestFoldTable(t *testing.T) {
	type setup struct {
		e    *outline.Engine
		l    *store.Local
		keys []string
	}
	cases := []struct {
		name  string
		steps func(s setup) []outline.Step
		// want: the single write per record (collection/rkey-less: op per
		// collection in order) and a check of the result
		wantOps []store.Op
		check   func(t *testing.T, s setup)
	}{
		{
			name: "delete then create = update (remove the policy, set it again)",
			steps: func(s setup) []outline.Step {
				return []outline.Step{
					{Tool: "set_comment_policy", Intent: outline.PlanFunc(func(p *outline.Planner) error { return intent.Policy{Root: "", Allow: nil, Remove: true}.Plan(p) })},
					{Tool: "set_comment_policy", Intent: outline.PlanFunc(func(p *outline.Planner) error {
						return intent.Policy{Root: "", Allow: []string{"mentioned"}, Remove: false}.Plan(p)
					})},
				}
			},
			wantOps: []store.Op{store.Update},
			check: func(t *testing.T, s setup) {
				tr, _ := s.e.Tree(context.Background())
				pol, ok := tr.Policies.Lookup("self")
				if !ok {
					t.Fatal("the policy is gone")
				}
				if a, _ := pol.Value.Get("allow").([]any); len(a) != 1 || a[0] != "mentioned" {
					t.Fatalf("allow = %v", pol.Value.Get("allow"))
				}
			},
		},
		{
			name: "create then delete = nothing",
			steps: func(s setup) []outline.Step {
				var key string
				return []outline.Step{
					{Tool: "insert_after", Intent: outline.PlanFunc(func(p *outline.Planner) error {
						if err := (intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "temp", Note: "n"}}}).Plan(p); err != nil {
							return err
						}
						for k, it := range p.Tree().Nodes.All() {
							_ = it
							_ = k
						}
						return nil
					})},
					{Tool: "delete_node", Intent: outline.PlanFunc(func(p *outline.Planner) error {
						for k, it := range p.Tree().Nodes.All() {
							if it.Str("text") == "temp" {
								key = k
							}
						}
						return intent.Delete{Node: key, Children: ""}.Plan(p)
					})},
				}
			},
			wantOps: nil,
		},
		{
			name: "update then update = one update with the last value",
			steps: func(s setup) []outline.Step {
				a, b := "first", "second"
				return []outline.Step{
					{Tool: "update_node", Intent: outline.PlanFunc(func(p *outline.Planner) error { return intent.Edit{Node: s.keys[0], Text: &a}.Plan(p) })},
					{Tool: "update_node", Intent: outline.PlanFunc(func(p *outline.Planner) error { return intent.Edit{Node: s.keys[0], Text: &b}.Plan(p) })},
				}
			},
			wantOps: []store.Op{store.Update},
			check: func(t *testing.T, s setup) {
				if got := enginetest.Texts(t, s.e, ""); got[0] != "second" {
					t.Fatalf("text %q", got[0])
				}
			},
		},
		{
			name: "update then delete = delete",
			steps: func(s setup) []outline.Step {
				a := "changed"
				return []outline.Step{
					{Tool: "update_node", Intent: outline.PlanFunc(func(p *outline.Planner) error { return intent.Edit{Node: s.keys[1], Text: &a}.Plan(p) })},
					{Tool: "delete_node", Intent: outline.PlanFunc(func(p *outline.Planner) error { return intent.Delete{Node: s.keys[1], Children: ""}.Plan(p) })},
				}
			},
			wantOps: []store.Op{store.Delete},
			check: func(t *testing.T, s setup) {
				if got := enginetest.Texts(t, s.e, ""); len(got) != 1 || got[0] != "one" {
					t.Fatalf("texts %v", got)
				}
			},
		},
		{
			name: "update back to the original = nothing",
			steps: func(s setup) []outline.Step {
				a, b := "other", "one"
				return []outline.Step{
					{Tool: "update_node", Intent: outline.PlanFunc(func(p *outline.Planner) error { return intent.Edit{Node: s.keys[0], Text: &a}.Plan(p) })},
					{Tool: "update_node", Intent: outline.PlanFunc(func(p *outline.Planner) error { return intent.Edit{Node: s.keys[0], Text: &b}.Plan(p) })},
				}
			},
			wantOps: nil,
		},
		{
			name: "create then update = create with the last value",
			steps: func(s setup) []outline.Step {
				var key string
				b := "edited"
				return []outline.Step{
					{Tool: "insert_after", Intent: outline.PlanFunc(func(p *outline.Planner) error {
						return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "new"}}}.Plan(p)
					})},
					{Tool: "update_node", Intent: outline.PlanFunc(func(p *outline.Planner) error {
						for k, it := range p.Tree().Nodes.All() {
							if it.Str("text") == "new" {
								key = k
							}
						}
						return intent.Edit{Node: key, Text: &b}.Plan(p)
					})},
				}
			},
			wantOps: []store.Op{store.Create},
			check: func(t *testing.T, s setup) {
				if got := enginetest.Texts(t, s.e, ""); len(got) != 3 || got[2] != "edited" {
					t.Fatalf("texts %v", got)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			l := openLocal(t, t.TempDir())
			e := outline.New(l)
			keys := enginetest.Insert(t, e, outline.Position{}, "one", "two")
			if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
				return (intent.Policy{Root: "", Allow: []string{}, Remove: false}).Plan(p)
			}); err != nil {
				t.Fatal(err)
			}
			s := setup{e, l, keys}
			before, _ := l.Snapshot(ctx)
			steps := tc.steps(s)
			out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return p.Batch(steps) })
			if err != nil {
				t.Fatal(err)
			}
			var ops []store.Op
			for _, w := range out.Plan.Writes {
				if w.Collection == lexicon.Node || w.Collection == lexicon.CommentPolicy {
					ops = append(ops, w.Op)
				}
			}
			if fmt.Sprint(ops) != fmt.Sprint(tc.wantOps) {
				t.Fatalf("writes %v, want %v", out.Plan.Writes, tc.wantOps)
			}
			after, _ := l.Snapshot(ctx)
			if len(tc.wantOps) == 0 {
				if !out.NoChange || after.Commit != before.Commit {
					t.Fatalf("a plan of no writes committed (noChange=%v)", out.NoChange)
				}
			}
			if tc.check != nil {
				tc.check(t, s)
			}
		})
	}
}

// Intents that ask for what is already there write nothing, cost nothing
// and say so.
func TestNoOpIntents(t *testing.T) {
	ctx := context.Background()
	l := openLocal(t, t.TempDir())
	e := outline.New(l)
	keys := enginetest.Insert(t, e, outline.Position{}, "same", "second", "third")
	if _, err := e.Do(ctx, intent.Complete{Node: keys[0], Done: true}, false); err != nil {
		t.Fatal(err)
	}
	same := "same"
	for name, fn := range map[string]func(p *outline.Planner) error{
		"same text again":           func(p *outline.Planner) error { return intent.Edit{Node: keys[0], Text: &same}.Plan(p) },
		"complete a completed todo": func(p *outline.Planner) error { return intent.Complete{Node: keys[0], Done: true}.Plan(p) },
		"set_outline {}":            func(p *outline.Planner) error { return intent.Outline{Root: "", Title: nil, Description: nil}.Plan(p) },
		"move to where it is": func(p *outline.Planner) error {
			return intent.Move{Nodes: []string{keys[0]}, Pos: outline.Position{Where: "first"}}.Plan(p)
		},
		"move after its own left sibling": func(p *outline.Planner) error {
			return intent.Move{Nodes: []string{keys[2]}, Pos: outline.Position{After: keys[1]}}.Plan(p)
		},
	} {
		t.Run(name, func(t *testing.T) {
			before, _ := l.Snapshot(ctx)
			out, err := e.DoFunc(ctx, false, fn)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := l.Snapshot(ctx)
			if after.Commit != before.Commit || !out.NoChange || out.Plan.Cost != 0 || len(out.Commits) != 0 {
				t.Fatalf("wrote: commit moved %v, noChange %v, cost %d", after.Commit != before.Commit, out.NoChange, out.Plan.Cost)
			}
		})
	}
}

// Batches never split a node from its note, stay within the write and
// byte bounds, and keep the plan's order.
func TestCut(t *testing.T) {
	big := make([]byte, 9000)
	for i := range big {
		big[i] = 'x'
	}
	var ws []store.Write
	for i := 0; i < 500; i++ {
		k := fmt.Sprintf("k%04d", i)
		ws = append(ws, store.Write{Op: store.Create, Collection: lexicon.Node, RKey: k, Value: map[string]any{"text": "t"}})
		if i%3 == 0 {
			ws = append(ws, store.Write{Op: store.Create, Collection: lexicon.Note, RKey: k, Value: map[string]any{"text": string(big)}})
		}
	}
	ends := outline.Cut(ws)
	start := 0
	for i, end := range ends {
		if end-start > store.MaxBatch || end <= start {
			t.Fatalf("batch %d has %d writes", i, end-start)
		}
		if end < len(ws) && ws[end].RKey == ws[end-1].RKey {
			t.Fatalf("batch %d ends between %s's node and note", i, ws[end].RKey)
		}
		size := 0
		for _, w := range ws[start:end] {
			size += len(w.Value["text"].(string))
		}
		if size > store.MaxBatchBytes {
			t.Fatalf("batch %d carries %d bytes", i, size)
		}
		start = end
	}
	if start != len(ws) {
		t.Fatalf("cut covers %d of %d writes", start, len(ws))
	}
}

// TestCutAtTheBoundary: the 200th write is a node and the 201st its note:
// the cut that would fall between them falls before the node (the count
// bound), and likewise when the bytes bound would fall there.
func TestCutAtTheBoundary(t *testing.T) {
	node := func(k string) store.Write {
		return store.Write{Op: store.Create, Collection: lexicon.Node, RKey: k, Value: map[string]any{"text": "t"}}
	}
	var ws []store.Write
	for i := 0; i < store.MaxBatch-1; i++ {
		ws = append(ws, node(fmt.Sprintf("a%04d", i)))
	}
	ws = append(ws, node("edge"), store.Write{Op: store.Create, Collection: lexicon.Note, RKey: "edge", Value: map[string]any{"text": "its note"}})
	ws = append(ws, node("after"))
	ends := outline.Cut(ws)
	if want := []int{store.MaxBatch - 1, len(ws)}; !slices.Equal(ends, want) {
		t.Fatalf("count bound: cut at %v, want %v (the node at %d and its note at %d together)", ends, want, store.MaxBatch-1, store.MaxBatch)
	}
	// the bytes bound: the node fits, its note would pass it
	big := strings.Repeat("x", store.MaxBatchBytes/2)
	ws = []store.Write{
		{Op: store.Create, Collection: lexicon.Node, RKey: "a", Value: map[string]any{"text": big}},
		node("edge"),
		{Op: store.Create, Collection: lexicon.Note, RKey: "edge", Value: map[string]any{"text": big}},
	}
	if ends := outline.Cut(ws); !slices.Equal(ends, []int{1, 3}) {
		t.Fatalf("bytes bound: cut at %v, want [1 3]", ends)
	}
}

// Planning is linear in the size of the plan.
func BenchmarkPlanInsert20k(b *testing.B) {
	ctx := context.Background()
	e := newEngine(b)
	ns := make([]intent.NewNode, 2000)
	for i := range ns {
		kids := make([]intent.NewNode, 9)
		for j := range kids {
			kids[j] = intent.NewNode{Text: fmt.Sprintf("child %d.%d", i, j)}
		}
		ns[i] = intent.NewNode{Text: fmt.Sprintf("bullet %d", i), Children: kids}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := e.DoFunc(ctx, true, func(p *outline.Planner) error { return intent.Insert{Pos: outline.Position{}, Nodes: ns}.Plan(p) })
		if err != nil || len(out.Plan.Writes) != 20000 {
			b.Fatal(err)
		}
	}
}

func BenchmarkDryRunDeleteSubtree10k(b *testing.B) {
	ctx := context.Background()
	e := newEngine(b)
	keys := enginetest.Insert(b, e, outline.Position{}, "root")
	for i := 0; i < 50; i++ {
		ns := make([]intent.NewNode, 200)
		for j := range ns {
			ns[j] = intent.NewNode{Text: "leaf"}
		}
		if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return (intent.Insert{Pos: outline.Position{Parent: keys[0]}, Nodes: ns}).Plan(p)
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := e.DoFunc(ctx, true, func(p *outline.Planner) error { return intent.Delete{Node: keys[0], Children: "subtree"}.Plan(p) })
		if err != nil || len(out.Plan.Writes) != 10001 {
			b.Fatal(err)
		}
	}
}
