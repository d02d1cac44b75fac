package enginetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// The gate's suites: every way of committing a plan, with the world changed
// between the plan and its commit by another client of the repository, is
// refused with a kind and writes nothing (read back from the repository);
// and random plans made with the kit alone, deliberately bad ones among
// them, interleaved with another client's writes, never leave the
// repository breaking a rule, as an independent checker reads it.

func snapshot(t testing.TB, repo store.Repository) *store.Snapshot {
	t.Helper()
	s, err := repo.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// refused checks that err is an *outline.Error of kind (any kind when
// kind is nil) and that the repository is as before.
func refused(t *testing.T, what string, err error, kind error, repo store.Repository, before *store.Snapshot) {
	t.Helper()
	var oe *outline.Error
	if !errors.As(err, &oe) {
		t.Fatalf("%s: want a refusal with a kind, got %v", what, err)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Fatalf("%s: want %v, got %s: %v", what, kind, outline.KindName(err), err)
	}
	if after := snapshot(t, repo); !sameRecords(before, after) {
		t.Fatalf("%s: refused (%v) but the repository changed", what, err)
	}
	if problems := RuleProblems(snapshot(t, repo)); len(problems) > 0 {
		t.Fatalf("%s: the repository breaks the rules: %s", what, strings.Join(problems, "; "))
	}
}

func do(t *testing.T, e *outline.Engine, in outline.Intent) *outline.Outcome {
	t.Helper()
	out, err := e.Do(context.Background(), in, false)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func dry(t *testing.T, e *outline.Engine, in outline.Intent) string {
	t.Helper()
	out, err := e.Do(context.Background(), in, true)
	if err != nil {
		t.Fatal(err)
	}
	if out.PlanID == "" {
		t.Fatal("the dry run kept no plan")
	}
	return out.PlanID
}

func worldChanged(t *testing.T, open Open) {
	ctx := context.Background()
	repo := open(t)
	e := outline.New(repo)
	other := outline.New(repo) // another client of the same repository

	t.Run("plan=ID: a move under a parent deleted since", func(t *testing.T) {
		// P and X under parents of their own: the plan touches neither P's
		// record nor its siblings, only P as the place it moves X into
		top := Insert(t, e, outline.Position{}, "A", "B")
		p := Insert(t, e, outline.Position{Parent: top[0]}, "P")[0]
		x := Insert(t, e, outline.Position{Parent: top[1]}, "X")[0]
		in := intent.Move{Nodes: []string{x}, Pos: outline.Position{Parent: p}}
		id := dry(t, e, in)
		do(t, other, intent.Delete{Node: p})
		before := snapshot(t, repo)
		_, err := e.Apply(ctx, id, in)
		refused(t, "apply", err, outline.ErrParentMissing, repo, before)
	})
	t.Run("plan=ID: an insert under a parent deleted since", func(t *testing.T) {
		top := Insert(t, e, outline.Position{}, "P2")
		in := intent.Insert{Pos: outline.Position{Parent: top[0]}, Nodes: []intent.NewNode{{Text: "under P2", Note: "its note"}}}
		id := dry(t, e, in)
		do(t, other, intent.Delete{Node: top[0]})
		before := snapshot(t, repo)
		_, err := e.Apply(ctx, id, in)
		refused(t, "apply", err, outline.ErrParentMissing, repo, before)
	})
	t.Run("plan=ID: the destination moved into the moved bullet's subtree since", func(t *testing.T) {
		top := Insert(t, e, outline.Position{}, "A", "B")
		x := Insert(t, e, outline.Position{Parent: top[0]}, "X")[0]
		p := Insert(t, e, outline.Position{Parent: top[1]}, "P")[0]
		in := intent.Move{Nodes: []string{x}, Pos: outline.Position{Parent: p}}
		id := dry(t, e, in)
		do(t, other, intent.Move{Nodes: []string{p}, Pos: outline.Position{Parent: x}})
		before := snapshot(t, repo)
		_, err := e.Apply(ctx, id, in)
		refused(t, "apply", err, nil, repo, before)
	})
	t.Run("plan=ID: the anchor sibling deleted since", func(t *testing.T) {
		top := Insert(t, e, outline.Position{}, "Q")
		kids := Insert(t, e, outline.Position{Parent: top[0]}, "q1", "q2")
		in := intent.Insert{Pos: outline.Position{Parent: top[0], After: kids[0]}, Nodes: []intent.NewNode{{Text: "after q1"}}}
		id := dry(t, e, in)
		do(t, other, intent.Delete{Node: kids[0]})
		before := snapshot(t, repo)
		_, err := e.Apply(ctx, id, in)
		refused(t, "apply", err, nil, repo, before)
	})
	t.Run("an accepted confirmation after the parent was deleted", func(t *testing.T) {
		top := Insert(t, e, outline.Position{}, "C", "D")
		r := Insert(t, e, outline.Position{Parent: top[0]}, "R")[0]
		ys := Insert(t, e, outline.Position{Parent: top[1]}, "y1", "y2")
		in := intent.Move{Nodes: ys, Pos: outline.Position{Parent: r}}
		cctx := outline.WithConfirm(ctx, outline.Threshold{Moves: 1})
		_, err := e.Do(cctx, in, false)
		var need *outline.ConfirmNeeded
		if !errors.As(err, &need) || need.PlanID == "" || need.Verdict.Moved != 2 {
			t.Fatalf("want the move of 2 held for confirmation, got %v (%+v)", err, need)
		}
		do(t, other, intent.Delete{Node: r})
		before := snapshot(t, repo)
		_, err = e.Apply(outline.Confirmed(cctx, need.PlanID), need.PlanID, in)
		refused(t, "accepted", err, outline.ErrParentMissing, repo, before)
	})
	t.Run("undo after the parent was deleted", func(t *testing.T) {
		top := Insert(t, e, outline.Position{}, "S")
		x := Insert(t, e, outline.Position{Parent: top[0]}, "x")[0]
		do(t, e, intent.Delete{Node: x})
		do(t, other, intent.Delete{Node: top[0]})
		before := snapshot(t, repo)
		_, err := e.Undo(ctx, 1, "", false)
		refused(t, "undo", err, outline.ErrParentMissing, repo, before)
	})
	t.Run("undo of a move after the old parent was deleted", func(t *testing.T) {
		top := Insert(t, e, outline.Position{}, "T", "U")
		x := Insert(t, e, outline.Position{Parent: top[0]}, "x")[0]
		do(t, e, intent.Move{Nodes: []string{x}, Pos: outline.Position{Parent: top[1]}})
		do(t, other, intent.Delete{Node: top[0]})
		before := snapshot(t, repo)
		_, err := e.Undo(ctx, 1, "", false)
		refused(t, "undo", err, outline.ErrParentMissing, repo, before)
	})
	t.Run("between two batches, the destination moved into a moved bullet", func(t *testing.T) {
		// a move of 300 siblings is two commits; before the second,
		// another client moves the destination under the last of them,
		// which the second commit would move under it: a cycle
		top := Insert(t, e, outline.Position{}, "from", "to")
		kids := make([]string, 0, 300)
		for len(kids) < 300 {
			kids = append(kids, Insert(t, e, outline.Position{Parent: top[0], Where: "last"}, make([]string, 100)...)...)
		}
		last := kids[len(kids)-1]
		moved := false
		ctx := outline.WithProgress(ctx, func(done, total, _, _ int) {
			if done == 1 && !moved {
				moved = true
				do(t, other, intent.Move{Nodes: []string{top[1]}, Pos: outline.Position{Parent: last}})
			}
		})
		_, err := e.Do(ctx, intent.Move{Nodes: kids, Pos: outline.Position{Parent: top[1]}}, false)
		if !moved {
			t.Fatal("the move was one commit: no second batch to meet the other client's write")
		}
		if !errors.Is(err, outline.ErrIncomplete) {
			t.Fatalf("want the operation stopped (partial) before the cycle, got %s: %v", outline.KindName(err), err)
		}
		if problems := RuleProblems(snapshot(t, repo)); len(problems) > 0 {
			t.Fatalf("the repository breaks the rules: %s", strings.Join(problems, "; "))
		}
	})
	t.Run("the kit: a parent cycle", func(t *testing.T) {
		top := Insert(t, e, outline.Position{}, "V")
		w := Insert(t, e, outline.Position{Parent: top[0]}, "w")[0]
		before := snapshot(t, repo)
		_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			it, err := p.Node(top[0])
			if err != nil {
				return err
			}
			v := maps.Clone(it.Rec.Value.Map())
			v["parent"] = p.NodeURI(w)
			p.Update(it.Rec, v, "")
			return nil
		})
		refused(t, "cycle", err, outline.ErrCycle, repo, before)
	})
	t.Run("the kit: a delete that leaves children", func(t *testing.T) {
		top := Insert(t, e, outline.Position{}, "Z")
		Insert(t, e, outline.Position{Parent: top[0]}, "z1")
		before := snapshot(t, repo)
		for _, dryRun := range []bool{true, false} {
			_, err := e.DoFunc(ctx, dryRun, func(p *outline.Planner) error {
				it, err := p.Node(top[0])
				if err != nil {
					return err
				}
				p.Delete(it.Rec, "")
				return nil
			})
			refused(t, fmt.Sprintf("orphaning delete (dry run %v)", dryRun), err, outline.ErrHasChildren, repo, before)
		}
	})
}

// RuleProblems is an independent reading of the rules on a repository's
// records (not the engine's tree): parents that exist and are nodes of the
// repository, no parent cycle, notes with their bullet, policy and outline
// roots that are bullets of the repository, strictly ordered siblings,
// sortKeys of at most 512 bytes, records valid by the lexicons.
func RuleProblems(s *store.Snapshot) []string {
	did := s.DID.String()
	prefix := "at://" + did + "/" + lexicon.Node + "/"
	nodes := map[string]string{} // rkey → parent field
	type sib struct{ coll, rkey string }
	bySK := map[string]map[string]sib{} // parent → sortKey → sibling
	var out []string
	for _, r := range s.Records {
		if !strings.HasPrefix(r.Collection, "app.bulleted.") {
			continue
		}
		u := r.Collection + "/" + r.RKey
		if err := validate.Default().Data(r.Value.Map(), r.Collection, nil); err != nil {
			out = append(out, u+" invalid: "+err.Error())
		}
		if r.Collection == lexicon.Node {
			p, _ := r.Value.Text("parent")
			nodes[r.RKey] = p
		}
	}
	for _, r := range s.Records {
		u := r.Collection + "/" + r.RKey
		switch r.Collection {
		case lexicon.Node, lexicon.Mirror:
			p, _ := r.Value.Text("parent")
			sk, _ := r.Value.Text("sortKey")
			if len(sk) > 512 {
				out = append(out, u+" sortKey over 512 bytes")
			}
			if p != "" {
				k, ok := strings.CutPrefix(p, prefix)
				if !ok {
					out = append(out, u+" parent not a node of this repository: "+p)
					continue
				}
				if _, ok := nodes[k]; !ok {
					out = append(out, u+" parent missing: "+k)
					continue
				}
			}
			if bySK[p] == nil {
				bySK[p] = map[string]sib{}
			}
			if o, dup := bySK[p][sk]; dup {
				out = append(out, fmt.Sprintf("%s ties with %s/%s on sortKey %q", u, o.coll, o.rkey, sk))
			}
			bySK[p][sk] = sib{r.Collection, r.RKey}
		case lexicon.Note:
			if _, ok := nodes[r.RKey]; !ok {
				out = append(out, u+" without its bullet")
			}
		case lexicon.CommentPolicy, lexicon.Outline:
			if r.RKey == "self" {
				continue
			}
			root, _ := r.Value.Text("root")
			if root == "" {
				root = prefix + r.RKey
			}
			k, ok := strings.CutPrefix(root, prefix)
			if _, there := nodes[k]; !ok || !there {
				out = append(out, u+" rooted at what is not a bullet of this repository: "+root)
			}
		}
	}
	// no parent cycle: every node's chain reaches the top
	state := map[string]int{} // 1: on the walk, 2: reaches the top
	for k := range nodes {
		var path []string
		cur := k
		for cur != "" && state[cur] == 0 {
			state[cur] = 1
			path = append(path, cur)
			next, _ := strings.CutPrefix(nodes[cur], prefix)
			if _, ok := nodes[next]; !ok {
				next = ""
			}
			cur = next
		}
		if cur != "" && state[cur] == 1 {
			out = append(out, "parent cycle through "+cur)
		}
		for _, p := range path {
			state[p] = 2
		}
	}
	return out
}

// gateProperty: random plans made with the kit alone, a third of them
// deliberately bad (a parent cycle, an orphaning delete, a note split from
// its bullet's commit, a tied sortKey, a foreign policy root, a missing
// parent), random kept plans applied after another client wrote, and that
// client's own writes: after every commit the repository, read back, breaks
// no rule, and every bad plan was refused.
func gateProperty(t *testing.T, open Open, steps int) {
	ctx := context.Background()
	repo := open(t)
	e := outline.New(repo)
	other := outline.New(repo)
	rng := rand.New(rand.NewPCG(7, uint64(steps)))
	Insert(t, e, outline.Position{}, "one", "two", "three")
	pick := func(tr *outline.Tree) *outline.Item {
		all := tr.Nodes.All()
		n := rng.IntN(tr.Nodes.Len())
		for _, it := range all {
			if n == 0 {
				return it
			}
			n--
		}
		return nil
	}
	foreign := func() {
		tr, err := other.Tree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Nodes.Len() == 0 {
			return
		}
		it := pick(tr)
		var in outline.Intent
		switch rng.IntN(3) {
		case 0:
			in = intent.Insert{Pos: outline.Position{Parent: it.Key()}, Nodes: []intent.NewNode{{Text: "theirs"}}}
		case 1:
			if tr.Nodes.Len() < 4 {
				return
			}
			in = intent.Delete{Node: it.Key(), Children: "subtree"}
		default:
			to := pick(tr)
			in = intent.Move{Nodes: []string{it.Key()}, Pos: outline.Position{Parent: to.Key()}}
		}
		other.Do(ctx, in, false) // a refusal (a cycle, say) is theirs to get
	}
	bad := []string{"cycle", "orphan", "split note", "tie", "foreign root", "missing parent"}
	for step := 0; step < steps; step++ {
		tr, err := e.Tree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Nodes.Len() < 3 {
			Insert(t, e, outline.Position{}, "more", "and more", "and more still")
			if tr, err = e.Tree(ctx); err != nil {
				t.Fatal(err)
			}
		}
		kind := "good"
		if rng.IntN(3) == 0 {
			kind = bad[rng.IntN(len(bad))]
		}
		a := pick(tr)
		plan := func(p *outline.Planner) error {
			node := func(parent string, sk string) map[string]any {
				v := map[string]any{"$type": lexicon.Node, "text": "k" + fmt.Sprint(step), "sortKey": sk, "createdAt": p.Stamp()}
				if parent != "" {
					v["parent"] = parent
				}
				return v
			}
			switch kind {
			case "good":
				kids := p.Children(a)
				keys, err := p.Place(kids, rng.IntN(kids.Len()+1), 1)
				if err != nil {
					return err
				}
				k := p.Create(lexicon.Node, node(p.NodeURI(a.Key()), keys[0]), "")
				p.CreateAt(lexicon.Note, k, map[string]any{"$type": lexicon.Note, "text": "n", "subject": p.NodeURI(k), "createdAt": p.Stamp()}, "")
			case "cycle":
				sub := outline.Subtree(a)
				d := sub[rng.IntN(len(sub))]
				v := maps.Clone(a.Rec.Value.Map())
				v["parent"] = p.NodeURI(d.Key())
				p.Update(a.Rec, v, "")
			case "orphan":
				if a.Children.Len() == 0 {
					kind = "good" // nothing to orphan: a child made instead
					keys, err := p.Place(outline.Kids{}, 0, 1)
					if err != nil {
						return err
					}
					p.Create(lexicon.Node, node(p.NodeURI(a.Key()), keys[0]), "")
					return nil
				}
				p.Delete(a.Rec, "")
				if a.Note != nil {
					p.Delete(*a.Note, "")
				}
			case "split note":
				k := p.Create(lexicon.Node, node("", "~"+fmt.Sprint(step)), "")
				for i := 0; i < store.MaxBatch; i++ {
					p.Create(lexicon.Node, node(p.NodeURI(k), fmt.Sprintf("m%04d", i)), "")
				}
				p.CreateAt(lexicon.Note, k, map[string]any{"$type": lexicon.Note, "text": "n", "subject": p.NodeURI(k), "createdAt": p.Stamp()}, "")
			case "tie":
				kids := p.Children(a)
				if kids.Len() == 0 {
					kids = p.Children(nil)
					a = nil
				}
				parent := ""
				if a != nil {
					parent = p.NodeURI(a.Key())
				}
				p.Create(lexicon.Node, node(parent, kids.At(rng.IntN(kids.Len())).SortKey()), "")
			case "foreign root":
				p.Create(lexicon.CommentPolicy, map[string]any{"$type": lexicon.CommentPolicy, "allow": []any{"mentioned"}, "root": "at://did:plc:someoneelse/app.bulleted.node/3abc", "createdAt": p.Stamp()}, "")
			case "missing parent":
				p.Create(lexicon.Node, node(p.NodeURI("3gone"+fmt.Sprint(step)), "m"), "")
			}
			return nil
		}
		before := snapshot(t, repo)
		var err2 error
		if rng.IntN(4) == 0 {
			// a kept plan of a tool's intent, applied after another client
			// wrote: it lands as shown or is refused
			kind = "kept plan"
			b := pick(tr)
			var in outline.Intent = intent.Move{Nodes: []string{a.Key()}, Pos: outline.Position{Parent: b.Key()}}
			if rng.IntN(2) == 0 {
				in = intent.Insert{Pos: outline.Position{Parent: a.Key()}, Nodes: []intent.NewNode{{Text: "kept", Note: "with a note"}}}
			}
			out, derr := e.Do(ctx, in, true)
			if derr != nil || out.PlanID == "" {
				continue // refused at once (a cycle), or nothing to do
			}
			foreign()
			before = snapshot(t, repo)
			_, err2 = e.Apply(ctx, out.PlanID, in)
		} else {
			_, err2 = e.DoFunc(ctx, false, plan)
		}
		if kind != "good" && kind != "kept plan" && err2 == nil {
			t.Fatalf("step %d: a bad plan (%s) was committed", step, kind)
		}
		if err2 != nil {
			var oe *outline.Error
			if !errors.As(err2, &oe) {
				t.Fatalf("step %d (%s): an error without a kind: %v", step, kind, err2)
			}
			if after := snapshot(t, repo); !sameRecords(before, after) {
				t.Fatalf("step %d (%s): refused (%v) but the repository changed", step, kind, err2)
			}
		}
		if problems := RuleProblems(snapshot(t, repo)); len(problems) > 0 {
			t.Fatalf("step %d (%s, %v): the repository breaks the rules: %s", step, kind, err2, strings.Join(problems, "; "))
		}
		if rng.IntN(3) == 0 {
			foreign()
			if problems := RuleProblems(snapshot(t, repo)); len(problems) > 0 {
				t.Fatalf("step %d (another client): the repository breaks the rules: %s", step, strings.Join(problems, "; "))
			}
		}
	}
}
