package outline_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

const nextDID = "did:plc:nexttestnexttestnexttest"

// randomChanges draws a commit's changes against recs: creates, updates
// (text, sortKey, parent, including parents that do not exist, in another
// repository, and ones that make cycles), deletes (leaves, and nodes with
// children, which detaches them), notes, mirrors, comments, policies and an
// unknown collection.
//
// tame changes are the common case: parents exist, no cycles, a node is
// deleted only once its children are.
func randomChanges(rng *rand.Rand, recs []store.Record, serial *int, tame bool) []store.Record {
	var nodes []string
	parentOf := map[string]string{}
	hasKids := map[string]bool{}
	for _, r := range recs {
		if r.Collection == lexicon.Node || r.Collection == lexicon.Mirror {
			p, _ := r.Value.Text("parent")
			p = strings.TrimPrefix(p, "at://"+nextDID+"/app.bulleted.node/")
			hasKids[p] = true
			if r.Collection == lexicon.Node {
				nodes = append(nodes, r.RKey)
				parentOf[r.RKey] = p
			}
		}
	}
	under := func(a, b string) bool { // b is a or below it
		for i := 0; b != "" && i < 1000; i++ {
			if a == b {
				return true
			}
			b = parentOf[b]
		}
		return false
	}
	pickNode := func() string {
		if len(nodes) == 0 || (!tame && rng.IntN(10) == 0) {
			return fmt.Sprintf("k%03d", rng.IntN(400)) // often missing
		}
		return nodes[rng.IntN(len(nodes))]
	}
	parent := func() string {
		if tame {
			if len(nodes) == 0 || rng.IntN(8) == 0 {
				return ""
			}
			return "at://" + nextDID + "/app.bulleted.node/" + pickNode()
		}
		switch rng.IntN(12) {
		case 0:
			return ""
		case 1:
			return "at://did:plc:someoneelse/app.bulleted.node/x"
		case 2:
			return "at://" + nextDID + "/app.bulleted.note/" + pickNode()
		}
		return "at://" + nextDID + "/app.bulleted.node/" + pickNode()
	}
	cid := func() string { *serial++; return fmt.Sprintf("cid%d", *serial) }
	var out []store.Record
	for range 1 + rng.IntN(6) {
		switch rng.IntN(10) {
		case 0, 1, 2: // a node created or updated
			k := pickNode()
			if rng.IntN(3) == 0 || tame {
				k = fmt.Sprintf("k%03d", rng.IntN(400))
				if tame && parentOf[k] != "" || hasKids[k] {
					continue // tame: a new leaf, or an update in place
				}
			}
			v := map[string]any{"$type": lexicon.Node, "text": fmt.Sprint("t", *serial), "sortKey": string(rune('a' + rng.IntN(20))), "createdAt": "2026-01-01T00:00:00Z"}
			if p := parent(); p != "" {
				v["parent"] = p
			}
			out = append(out, store.Record{Collection: lexicon.Node, RKey: k, CID: cid(), Value: store.MustValue(v)})
		case 3: // a node deleted
			k := pickNode()
			if tame && hasKids[k] {
				continue
			}
			out = append(out, store.Record{Collection: lexicon.Node, RKey: k})
		case 4: // a note
			k := pickNode()
			if rng.IntN(3) == 0 {
				out = append(out, store.Record{Collection: lexicon.Note, RKey: k})
			} else {
				out = append(out, store.Record{Collection: lexicon.Note, RKey: k, CID: cid(), Value: store.MustValue(map[string]any{"$type": lexicon.Note, "text": fmt.Sprint("n", *serial),
					"subject": "at://" + nextDID + "/app.bulleted.node/" + k})})
			}
		case 5: // a mirror
			k := fmt.Sprintf("k%03d", rng.IntN(400))
			if tame && parentOf[k] != "" || hasKids[k] {
				continue // tame: mirror keys apart from node keys
			}
			if rng.IntN(3) == 0 {
				out = append(out, store.Record{Collection: lexicon.Mirror, RKey: k})
			} else {
				v := map[string]any{"$type": lexicon.Mirror, "sortKey": string(rune('a' + rng.IntN(20))), "createdAt": "2026-01-01T00:00:00Z",
					"subject": "at://" + nextDID + "/app.bulleted.node/" + pickNode()}
				if p := parent(); p != "" {
					v["parent"] = p
				}
				out = append(out, store.Record{Collection: lexicon.Mirror, RKey: k, CID: cid(), Value: store.MustValue(v)})
			}
		case 6: // a subtree deleted leaves first (what the planner sends)
			k := pickNode()
			var sub []store.Record
			var walk func(k string)
			walk = func(k string) {
				for _, r := range recs {
					if (r.Collection == lexicon.Node || r.Collection == lexicon.Mirror) && r.Value.Get("parent") == "at://"+nextDID+"/app.bulleted.node/"+k &&
						!slices.ContainsFunc(sub, func(x store.Record) bool { return x.Collection == r.Collection && x.RKey == r.RKey }) && len(sub) < 200 {
						sub = append(sub, store.Record{Collection: r.Collection, RKey: r.RKey})
						if r.Collection == lexicon.Node {
							walk(r.RKey)
						}
					}
				}
			}
			walk(k)
			if tame && len(sub) == 200 {
				continue
			}
			for i := len(sub) - 1; i >= 0; i-- {
				out = append(out, sub[i])
			}
			out = append(out, store.Record{Collection: lexicon.Node, RKey: k})
		case 7:
			k := fmt.Sprintf("c%02d", rng.IntN(30))
			if rng.IntN(3) == 0 {
				out = append(out, store.Record{Collection: lexicon.Comment, RKey: k})
			} else {
				out = append(out, store.Record{Collection: lexicon.Comment, RKey: k, CID: cid(), Value: store.MustValue(map[string]any{"$type": lexicon.Comment, "text": "c"})})
			}
		case 8:
			coll := []string{lexicon.CommentPolicy, lexicon.Outline, "app.bulleted.future"}[rng.IntN(3)]
			k := fmt.Sprintf("p%02d", rng.IntN(5))
			if rng.IntN(3) == 0 {
				out = append(out, store.Record{Collection: coll, RKey: k})
			} else {
				out = append(out, store.Record{Collection: coll, RKey: k, CID: cid(), Value: store.MustValue(map[string]any{"$type": coll, "root": "at://" + nextDID + "/app.bulleted.node/" + pickNode()})})
			}
		case 9: // a move under a random node (cycles happen)
			k, to := pickNode(), pickNode()
			if tame && under(k, to) {
				continue
			}
			for _, r := range recs {
				if r.Collection == lexicon.Node && r.RKey == k {
					v := r.Value.Map()
					v["parent"] = "at://" + nextDID + "/app.bulleted.node/" + to
					out = append(out, store.Record{Collection: lexicon.Node, RKey: k, CID: cid(), Value: store.MustValue(v)})
				}
			}
		}
	}
	return out
}

func applyAll(recs []store.Record, changes []store.Record) []store.Record {
	recs = slices.Clone(recs)
	for _, c := range changes {
		i, found := slices.BinarySearchFunc(recs, c, store.CompareRecords)
		switch {
		case c.Value.IsZero() && found:
			recs = slices.Delete(recs, i, i+1)
		case c.Value.IsZero():
		case found:
			recs[i] = c
		default:
			recs = slices.Insert(recs, i, c)
		}
	}
	return recs
}

// The tree kept current commit by commit (Next) is the tree built from the
// records (Build), for random commits of every kind, over long chains
// (so that the persistent maps re-base many times), and no earlier tree
// changes when a later one is made. Not parallel: it counts the package's
// fallbacks to a full build (FullBuilds), which other tests' commits add to.
func TestNextIsBuild(t *testing.T) {
	for seed := range uint64(12) {
		tame := seed%2 == 0
		t.Run(fmt.Sprintf("seed%d-tame=%v", seed, tame), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			serial := 0
			var recs []store.Record
			for range 30 {
				recs = applyAll(recs, randomChanges(rng, recs, &serial, tame))
			}
			tr := outline.Build(&store.Snapshot{DID: nextDID, Commit: "c0", Records: recs})
			type kept struct {
				tr   *outline.Tree
				desc string
			}
			var history []kept
			full0 := outline.FullBuilds()
			for step := range 400 {
				ch := randomChanges(rng, recs, &serial, tame)
				commit := fmt.Sprint("c", step+1)
				recs = applyAll(recs, ch)
				nt := tr.Next(commit, commit, ch)
				want := outline.Build(&store.Snapshot{DID: nextDID, Commit: commit, Rev: commit, Records: recs}).Describe()
				if got := nt.Describe(); got != want {
					t.Fatalf("step %d, changes %v:\n%s", step, ch, diffLine(got, want))
				}
				if step%50 == 0 {
					history = append(history, kept{nt, want})
				}
				tr = nt
			}
			full := outline.FullBuilds() - full0
			t.Logf("%d of 400 commits built the whole tree", full)
			if tame && full > 8 {
				t.Fatalf("%d of 400 ordinary commits built the whole tree (at most 8: when one commit deletes a parent and adds under it)", full)
			}
			for i, h := range history {
				if got := h.tr.Describe(); got != h.desc {
					t.Fatalf("tree %d changed after later commits:\n%s", i, diffLine(got, h.desc))
				}
			}
		})
	}
}

func diffLine(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n got  %s\n want %s", i, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(al), len(bl))
}

// The parent field's fast path reads every parent as the URI parser does.
func TestParentKeyFastPath(t *testing.T) {
	t.Parallel()
	tr := outline.Build(&store.Snapshot{DID: nextDID})
	base := "at://" + nextDID + "/app.bulleted.node/"
	for _, p := range []string{
		"", base + "3kaaaaaaaaa22", base + "self", base + "a.b-c_d:e~f", base + ".", base + "..", base + "a b", base + "a/b",
		base + "", base + "ä", base + strings.Repeat("k", 512), base + strings.Repeat("k", 513), base + "k?x=1", base + "k#frag",
		"at://" + nextDID + "/app.bulleted.note/k", "at://did:plc:other/app.bulleted.node/k", "at://" + nextDID + "x/app.bulleted.node/k",
		"at://" + nextDID + "/app.bulleted.node", "https://example.com/app.bulleted.node/k", "at://" + nextDID, "not a uri",
	} {
		gk, gw := tr.ParentKey(p)
		wk, ww := tr.SlowParentKey(p)
		if gk != wk || gw != ww {
			t.Errorf("%q: fast (%q, %q), parser (%q, %q)", p, gk, gw, wk, ww)
		}
	}
}

// A preview (Next to the tree's own commit: a dry run's tree after its
// plan) of a change too large for the maps' top keeps it beside the base
// (an overlay) rather than making a new base; the tree is the one Build
// makes, and trees made from it later are too. A subtree of 1,500 nodes
// (with notes) deleted leaves first, then edits and creates, each previewed
// and then committed from the preview.
func TestPreviewIsBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	var recs []store.Record
	node := func(k, parent, sk string) store.Record {
		v := map[string]any{"$type": lexicon.Node, "text": "t" + k, "sortKey": sk, "createdAt": "2026-01-01T00:00:00Z"}
		if parent != "" {
			v["parent"] = "at://" + nextDID + "/app.bulleted.node/" + parent
		}
		return store.Record{Collection: lexicon.Node, RKey: k, CID: "c" + k + sk, Value: store.MustValue(v)}
	}
	note := func(k string) store.Record {
		return store.Record{Collection: lexicon.Note, RKey: k, CID: "n" + k, Value: store.MustValue(map[string]any{"$type": lexicon.Note, "text": "n" + k,
			"subject": "at://" + nextDID + "/app.bulleted.node/" + k})}
	}
	var sub []string // the subtree of "big", parents before children
	recs = append(recs, node("big", "", "a"), node("keep", "", "b"))
	for i := range 1500 {
		k, parent := fmt.Sprintf("s%05d", i), "big"
		if i > 0 && rng.IntN(3) > 0 {
			parent = sub[rng.IntN(len(sub))]
		}
		sub = append(sub, k)
		recs = append(recs, node(k, parent, fmt.Sprintf("k%05d", i)), note(k))
	}
	for i := range 600 {
		recs = append(recs, node(fmt.Sprintf("u%05d", i), "keep", fmt.Sprintf("k%05d", i)))
	}
	slices.SortFunc(recs, store.CompareRecords)
	tr := outline.Build(&store.Snapshot{DID: nextDID, Commit: "c0", Rev: "r0", Records: recs})
	var del []store.Record
	for i := len(sub) - 1; i >= 0; i-- {
		del = append(del, store.Record{Collection: lexicon.Node, RKey: sub[i]}, store.Record{Collection: lexicon.Note, RKey: sub[i]})
	}
	del = append(del, store.Record{Collection: lexicon.Node, RKey: "big"})
	var edits []store.Record
	for i := range 600 {
		k := fmt.Sprintf("u%05d", i)
		if i%2 == 0 {
			edits = append(edits, node(k, "", fmt.Sprintf("m%05d", i))) // to the top level
		} else {
			edits = append(edits, node(fmt.Sprintf("v%05d", i), "keep", fmt.Sprintf("j%05d", i)), note(k))
		}
	}
	full0 := outline.FullBuilds()
	for step, ch := range [][]store.Record{del, edits} {
		before := tr.Describe()
		recs = applyAll(recs, ch)
		want := outline.Build(&store.Snapshot{DID: nextDID, Commit: tr.Commit, Rev: tr.Rev, Records: recs}).Describe()
		pre := tr.Next(tr.Commit, tr.Rev, ch)
		if got := pre.Describe(); got != want {
			t.Fatalf("step %d: the preview:\n%s", step, diffLine(got, want))
		}
		if pre.Describe() == before || tr.Describe() != before {
			t.Fatalf("step %d: the preview changed nothing, or its tree", step)
		}
		// a commit made from the preview tree, as a batch's next step is
		// (with makes a new base of the overlay)
		extra := []store.Record{node(fmt.Sprint("x", step), "keep", "zz"), {Collection: lexicon.Node, RKey: "u00001"}}
		want = outline.Build(&store.Snapshot{DID: nextDID, Commit: "x", Rev: "x", Records: applyAll(recs, extra)}).Describe()
		if got := pre.Next("x", "x", extra).Describe(); got != want {
			t.Fatalf("step %d: a commit made from the preview:\n%s", step, diffLine(got, want))
		}
		commit := fmt.Sprint("c", step+1)
		want = outline.Build(&store.Snapshot{DID: nextDID, Commit: commit, Rev: commit, Records: recs}).Describe()
		if tr = tr.Next(commit, commit, ch); tr.Describe() != want {
			t.Fatalf("step %d: the commit:\n%s", step, diffLine(tr.Describe(), want))
		}
	}
	if n := outline.FullBuilds() - full0; n > 0 {
		t.Fatalf("%d previews or commits built the whole tree", n)
	}
}

// An item placed after the last, or before the first, of a long list
// (issue 41) copies the chunk it joins and no other, and no tree's list
// changes for it: of two trees made from one, each gets its own list;
// each is the tree Build makes, and so is the tree they came from, after.
func TestNextExtendsLongList(t *testing.T) {
	for _, where := range []string{"last", "first", "middle"} {
		t.Run(where, func(t *testing.T) {
			tr, _ := longList(3000) // sortKeys s0000000 to s0005998
			parent := "at://" + nextDID + "/app.bulleted.node/p"
			sk := map[string]func(i int) string{
				"last":   func(i int) string { return fmt.Sprintf("t%d", i) },
				"first":  func(i int) string { return fmt.Sprintf("r%d", 9-i) },
				"middle": func(i int) string { return fmt.Sprintf("s0003001%d", i) },
			}[where]
			node := func(k string, i int) []store.Record {
				return []store.Record{{Collection: lexicon.Node, RKey: k, CID: "c" + k, Value: store.MustValue(map[string]any{
					"$type": lexicon.Node, "text": k, "sortKey": sk(i), "parent": parent, "createdAt": "2026-01-01T00:00:00Z"})}}
			}
			recs := tr.Records()
			kids := func(x *outline.Tree) outline.Kids { return x.Nodes.Get("p").Children }
			want := func(x *outline.Tree, changes ...[]store.Record) {
				t.Helper()
				rs := recs
				for _, c := range changes {
					rs = applyAll(rs, c)
				}
				if got, w := x.Describe(), outline.Build(&store.Snapshot{DID: nextDID, Commit: x.Commit, Rev: x.Rev, Records: rs}).Describe(); got != w {
					t.Fatalf("tree %s:\n%s", x.Commit, diffLine(got, w))
				}
			}
			a, b, c := node("na", 1), node("nb", 2), node("nc", 3)
			before := kids(tr).Slice(0, 3000)
			t1 := tr.Next("c1", "c1", a)
			t2 := t1.Next("c2", "c2", b)
			t3 := t1.Next("c3", "c3", c)
			t4 := t2.Next("c4", "c4", c)
			for _, p := range [][2]*outline.Tree{{tr, t1}, {t1, t2}, {t1, t3}, {t2, t4}} {
				if n := outline.Copied(kids(p[0]), kids(p[1])); n > 2*512 {
					t.Fatalf("%s from %s: %d items copied to place one", p[1].Commit, p[0].Commit, n)
				}
			}
			want(tr)
			want(t1, a)
			want(t2, a, b)
			want(t3, a, c)
			want(t4, a, b, c)
			if got := kids(tr).Slice(0, 3000); !slices.Equal(got, before) {
				t.Fatal("the first tree's list changed")
			}
			if n := kids(t1).Len(); n != 3001 {
				t.Fatalf("t1's list changed: %d items", n)
			}
		})
	}
}

// A dry run's tree after its plan (Outcome.After, which takes the items the
// planner found) is the tree Next makes from the plan's writes alone; and
// on the embedded store a write brings the kept tree to its own commit
// before it returns, so the next read brings nothing forward. Not
// parallel: it counts the package's calls of Next.
func TestAfterAndKeepOwn(t *testing.T) {
	ctx := context.Background()
	e := outline.New(openLocal(t, t.TempDir()))
	var kids []intent.NewNode
	for i := range 300 {
		kids = append(kids, intent.NewNode{Text: fmt.Sprint("kid ", i), Note: fmt.Sprint("note ", i), Children: []intent.NewNode{{Text: "grandchild"}}})
	}
	out, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "big", Children: kids}, {Text: "stays"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	before := outline.Nexts()
	if _, err := e.Tree(ctx); err != nil {
		t.Fatal(err)
	}
	if n := outline.Nexts() - before; n != 0 {
		t.Fatalf("the read after a write brought the tree forward (%d calls of Next): the write did not keep its own commit", n)
	}
	dry, err := e.Do(ctx, intent.Delete{Node: out.Plan.Created[0].RKey, Children: "subtree"}, true)
	if err != nil {
		t.Fatal(err)
	}
	want := dry.Before.Next(dry.Before.Commit, dry.Before.Rev, outline.WriteChanges(dry.Plan.Writes)).Describe()
	if got := dry.After().Describe(); got != want {
		t.Fatalf("the tree after the plan:\n%s", diffLine(got, want))
	}
	if dry.After().Nodes.Len() != 1 {
		t.Fatalf("%d bullets after deleting all but one", dry.After().Nodes.Len())
	}
}
