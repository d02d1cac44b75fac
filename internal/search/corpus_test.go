package search

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

func note(rkey, text string) store.Record {
	return store.Record{Collection: "app.bulleted.note", RKey: rkey, CID: "n-" + rkey + fmt.Sprint(len(text)), Value: store.MustValue(map[string]any{"$type": "app.bulleted.note",
		"text": text, "subject": "at://" + did + "/app.bulleted.node/" + rkey, "createdAt": "2026-03-10T09:00:00.000Z"})}
}

// Case folding is Unicode's, not only ASCII's: an upper-case query finds
// lower-case text and the other way round, in text and in notes, and the
// hit text keeps the original spelling.
func TestNonASCIICaseFolding(t *testing.T) {
	t.Parallel()
	tr := outline.Build(&store.Snapshot{DID: did, Commit: "c1", Records: []store.Record{
		node("a", "", "a", "Grüne äpfel kaufen", nil),
		node("b", "", "b", "ΣΟΦΙΑ und Straße", nil),
		node("c", "", "c", "nothing here", nil),
		note("c", "Notiz: ÄPFEL für den Kuchen"),
	}})
	x := New()
	for _, c := range []struct {
		q    string
		want []string
		note []bool
	}{
		{"ÄPFEL", []string{"a", "c"}, []bool{false, true}},
		{"äpfel", []string{"a", "c"}, []bool{false, true}},
		{"GRÜNE Ä", []string{"a"}, []bool{false}},
		{"σοφια", []string{"b"}, []bool{false}},
		{"STRASSE", nil, nil}, // ToLower does not expand ß
		{"straße", []string{"b"}, []bool{false}},
	} {
		r, err := x.Search(tr, Query{Text: c.q})
		if err != nil {
			t.Fatal(err)
		}
		var notes []bool
		for _, h := range r.Hits {
			notes = append(notes, h.InNote)
		}
		if got := keys(r); !slices.Equal(got, c.want) || !slices.Equal(notes, c.note) {
			t.Fatalf("%q: got %v (in note %v), want %v (%v)", c.q, got, notes, c.want, c.note)
		}
	}
	r, _ := x.Search(tr, Query{Text: "ÄPFEL"})
	if r.Hits[0].Text != "Grüne äpfel kaufen" || r.Hits[1].Note != "Notiz: ÄPFEL für den Kuchen" {
		t.Fatalf("hit texts %q, note %q", r.Hits[0].Text, r.Hits[1].Note)
	}
}

// The corpus holds every text and note one after the other; a match must
// lie inside one of them. Each query below would be found across a
// boundary (text|note of one bullet, note|text and text|text of neighbours
// in pre-order) if the corpus were scanned as plain concatenated text.
func TestNoMatchAcrossBoundaries(t *testing.T) {
	t.Parallel()
	recs := []store.Record{
		node("p", "", "a", "alpha", nil), note("p", "beta"),
		node("q", "p", "a", "gamma", nil),
		node("r", "", "b", "delta", nil),
		node("s", "", "c", "epsilon", nil),
	}
	tr := outline.Build(&store.Snapshot{DID: did, Commit: "c1", Records: recs})
	x := New()
	for _, q := range []string{"alphabeta", "habe", "betagamma", "agam", "gammadelta", "deltaepsilon", "ae", "ad"} {
		r, err := x.Search(tr, Query{Text: q})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Hits) != 0 {
			t.Fatalf("%q found %v", q, keys(r))
		}
	}
	// a separator-shaped byte in the query matches no separator
	if r, _ := x.Search(tr, Query{Text: "a\xffb"}); len(r.Hits) != 0 {
		t.Fatalf("invalid UTF-8 query found %v", keys(r))
	}
	// and what is inside one field is found, at the right offset
	r, _ := x.Search(tr, Query{Text: "ETA"})
	if !slices.Equal(keys(r), []string{"p"}) || !r.Hits[0].InNote || r.Hits[0].Text != "alpha" || r.Hits[0].Note != "beta" {
		t.Fatalf("beta: %+v", r.Hits)
	}
}

// The corpus scan (parallel chunks over one buffer) returns exactly what the
// walk over the tree with a match per entry returns: the same hits in the
// same order, the same texts around the match, the same cursors, page after
// page, with filters and subtrees, on an outline large enough to be cut in
// chunks.
func TestScanAgreesWithWalk(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 60,000-bullet outline")
	}
	recs := outlinegen.Generate(60_000, 7)
	t1 := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Records: recs})
	t2 := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Records: recs}) // same commit, another object: the walk
	x := New()
	x.Update(t1)
	if x.rows() < 2*parallelMin {
		t.Fatalf("only %d bullets", x.rows())
	}
	big := t1.Roots.At(3) // a section with a subtree worth scanning in chunks
	queries := []Query{
		{Text: "budget review"},
		{Text: "budget review", State: "open"},
		{Text: "no such words here"},
		{Text: "GARDEN HEALTH", Limit: 50},
		{Text: "health\nmusic"},    // only in notes (two lines)
		{Text: "ic"},               // everywhere
		{Text: " ", Limit: 25_000}, // in every bullet: pages of several chunks
		{Text: "section"},
		{Text: "@friend.example.com", Layout: "todo"},
		{Text: "roadmap", Tags: []string{"release"}},
		{Text: "quarterly", Mentions: []string{"did:plc:friend"}},
		{Text: "read", CreatedFrom: "2026-11-01"},
		{Text: "e", Under: big, Limit: 100},
		{Text: "fix up", Under: big},
		{Text: "^call", Regex: true},
		{Tags: []string{"music"}},
		{State: "done", Limit: 7},
	}
	for _, q := range queries {
		name := fmt.Sprintf("%q regex=%t state=%s under=%t", q.Text, q.Regex, q.State, q.Under != nil)
		q1, q2 := q, q
		if q.Under != nil {
			q2.Under = t2.Nodes.Get(q.Under.Key())
		}
		total := 0
		for page := 0; page < 20; page++ {
			r1, err := x.Search(t1, q1)
			if err != nil {
				t.Fatal(err)
			}
			if x.tree != t1 {
				t.Fatal("the first tree is not the one laid out")
			}
			r2, err := x.Search(t2, q2)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r1.Hits, r2.Hits) || r1.Cursor != r2.Cursor {
				t.Fatalf("%s page %d: scan %d hits, walk %d; %s", name, page, len(r1.Hits), len(r2.Hits), firstDiff(r1, r2))
			}
			total += len(r1.Hits)
			if r1.Cursor == "" {
				break
			}
			q1.Cursor, q2.Cursor = r1.Cursor, r2.Cursor
		}
		t.Logf("%s: %d hits", name, total)
	}
}

// After an update the corpus holds the new texts: a changed bullet is
// found by its new text and not by its old one, also in a large outline
// (the parallel scan), and a deleted bullet is not found.
func TestCorpusFollowsUpdates(t *testing.T) {
	t.Parallel()
	recs := outlinegen.Generate(30_000, 3)
	t1 := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Records: recs})
	x := New()
	x.Update(t1)
	var changed, gone string
	for i, r := range recs {
		if r.Collection != "app.bulleted.node" {
			continue
		}
		if changed == "" && i > len(recs)/2 {
			changed = r.RKey
			v := map[string]any{}
			for k, val := range r.Value.Map() {
				v[k] = val
			}
			v["text"] = "Zebra crossing"
			recs[i] = store.Record{Collection: r.Collection, RKey: r.RKey, CID: "changed", Value: store.MustValue(v)}
		}
	}
	for i := len(recs) - 1; gone == ""; i-- {
		if it := t1.Nodes.Get(recs[i].RKey); recs[i].Collection == "app.bulleted.node" && recs[i].RKey != changed && it.Note == nil && it.Children.Len() == 0 {
			gone = recs[i].RKey
			recs = slices.Delete(recs, i, i+1)
		}
	}
	old := t1.Nodes.Get(changed).Str("text")
	t2 := outline.Rebuild(&store.Snapshot{DID: outlinegen.DID, Commit: "c2", Records: recs}, t1)
	before, _ := x.Search(t1, Query{Text: old, Limit: 1000})
	r, err := x.Search(t2, Query{Text: "zebra CROSSING"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys(r), []string{changed}) {
		t.Fatalf("new text: %v", keys(r))
	}
	after, _ := x.Search(t2, Query{Text: old, Limit: 1000})
	if !slices.Contains(keys(before), changed) || slices.Contains(keys(after), changed) || len(after.Hits) != len(before.Hits)-1 {
		t.Fatalf("old text %q: before %d hits (with it: %t), after %d", old, len(before.Hits), slices.Contains(keys(before), changed), len(after.Hits))
	}
	if x.Derived != 1 {
		t.Fatalf("re-derived %d entries for one changed record", x.Derived)
	}
	if x.relaid > 2 || x.read > 4*blockRows {
		t.Fatalf("the update laid out %d blocks (%d rows) again, want those of the changed and the deleted bullet", x.relaid, x.read)
	}
	checkCorpus(t, x)
	if r, _ := x.Search(t2, Query{Text: t1.Nodes.Get(gone).Str("text"), Limit: 1000}); slices.Contains(keys(r), gone) {
		t.Fatalf("deleted bullet %s still found", gone)
	}
}

func firstDiff(a, b *Result) string {
	for i := range min(len(a.Hits), len(b.Hits)) {
		if !reflect.DeepEqual(a.Hits[i], b.Hits[i]) {
			return fmt.Sprintf("hit %d: scan %+v, walk %+v", i, a.Hits[i], b.Hits[i])
		}
	}
	if len(a.Hits) != len(b.Hits) {
		return "one is a prefix of the other"
	}
	return fmt.Sprintf("cursor %q, walk %q", a.Cursor, b.Cursor)
}

// checkCorpus verifies the corpus against the entries it was laid out
// from: entry i's region is its text, sep, its note, sep (nothing for a
// mirror), in pre-order, and each entry is the index's entry of its bullet.
func checkCorpus(t *testing.T, x *Index) {
	t.Helper()
	if len(x.starts) != len(x.blocks)+1 || x.starts[0] != 0 {
		t.Fatalf("%d block starts for %d blocks", len(x.starts), len(x.blocks))
	}
	for k, bl := range x.blocks {
		if x.starts[k+1]-x.starts[k] != len(bl.rows) || len(bl.rows) == 0 || len(bl.rows) > 2*blockRows || bl.dirty {
			t.Fatalf("block %d: starts %d..%d, %d rows, dirty %t", k, x.starts[k], x.starts[k+1], len(bl.rows), bl.dirty)
		}
		checkBlock(t, x, bl)
	}
}

func checkBlock(t *testing.T, x *Index, bl *block) {
	t.Helper()
	c := &bl.text
	if len(c.off) != len(bl.rows)+1 || len(c.note) != len(bl.rows) || int(c.off[len(bl.rows)]) != len(c.buf) {
		t.Fatalf("corpus of %d offsets, %d note offsets, end %d of %d bytes, for %d bullets", len(c.off), len(c.note), c.off[len(c.off)-1], len(c.buf), len(bl.rows))
	}
	for i, r := range bl.rows {
		it, e := r.it, r.e
		want := ""
		if it.Mirror {
			if e != nil {
				t.Fatalf("mirror %s has an entry", it.Key())
			}
		} else {
			if e == nil || e != x.entries.get(it.Key()) {
				t.Fatalf("bullet %d (%s): entry %p, index has %p", i, it.Key(), e, x.entries.get(it.Key()))
			}
			note := ""
			if it.Note != nil {
				note, _ = it.Note.Value.Text("text")
			}
			want = strings.ToLower(it.Str("text")) + "\xff" + strings.ToLower(note) + "\xff"
		}
		if got := string(c.buf[c.off[i]:c.off[i+1]]); got != want {
			t.Fatalf("bullet %d (%s): region %q, want %q", i, it.Key(), got, want)
		}
		if lower := strings.ToLower(it.Str("text")); e != nil && int(c.note[i]) != int(c.off[i])+len(lower)+1 {
			t.Fatalf("bullet %d (%s): note at %d, want %d", i, it.Key(), c.note[i], int(c.off[i])+len(lower)+1)
		}
	}
}

// The corpus is built from the previous one (entries found where they
// were are copied in runs); across random commits — texts and notes
// changed, leaves deleted, bullets inserted, subtrees of every size moved,
// mirrors added — it stays exactly the texts and notes of the entries in
// pre-order, and a search still agrees with the walk.
func TestCorpusAcrossCommits(t *testing.T) {
	t.Parallel()
	recs := outlinegen.Generate(20_000, 5)
	r := rand.New(rand.NewPCG(1, 2))
	x := New()
	var prev *outline.Tree
	nodeURI := func(rkey string) string { return "at://" + outlinegen.DID + "/app.bulleted.node/" + rkey }
	for commit := 0; commit < 40; commit++ {
		tr := outline.Rebuild(&store.Snapshot{DID: outlinegen.DID, Commit: fmt.Sprint("c", commit), Records: recs}, prev)
		x.Update(tr)
		fresh := New()
		fresh.Update(tr)
		sameScan(t, x, fresh)
		twin := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: fmt.Sprint("c", commit), Records: recs})
		for _, q := range []string{"zebra", "budget review", "note " + fmt.Sprint(commit-1)} {
			r1, _ := x.Search(tr, Query{Text: q, Limit: 50})
			r2, _ := x.Search(twin, Query{Text: q, Limit: 50})
			if !reflect.DeepEqual(r1.Hits, r2.Hits) {
				t.Fatalf("commit %d, %q: scan and walk differ: %s", commit, q, firstDiff(r1, r2))
			}
		}
		prev = tr
		// the next commit
		next := append([]store.Record(nil), recs...)
		nodes := []int{}
		for i, rec := range next {
			if rec.Collection == "app.bulleted.node" {
				nodes = append(nodes, i)
			}
		}
		with := func(i int, k string, v any) {
			val := map[string]any{}
			for kk, vv := range next[i].Value.Map() {
				val[kk] = vv
			}
			if v == nil {
				delete(val, k)
			} else {
				val[k] = v
			}
			next[i] = store.Record{Collection: next[i].Collection, RKey: next[i].RKey, CID: fmt.Sprintf("%s-%d-%d", next[i].RKey, commit, r.IntN(1e9)), Value: store.MustValue(val)}
		}
		for range 1 + r.IntN(5) { // edit texts
			with(nodes[r.IntN(len(nodes))], "text", fmt.Sprintf("Zebra %d", r.IntN(1000)))
		}
		for range r.IntN(3) { // a note, new or changed
			i := nodes[r.IntN(len(nodes))]
			next = append(next, store.Record{Collection: "app.bulleted.note", RKey: next[i].RKey, CID: fmt.Sprintf("note-%d-%d", commit, r.IntN(1e9)), Value: store.MustValue(map[string]any{
				"$type": "app.bulleted.note", "subject": nodeURI(next[i].RKey), "text": fmt.Sprintf("note %d", commit), "createdAt": "2026-03-10T09:00:00.000Z"})})
		}
		for range 1 + r.IntN(3) { // move a bullet and its subtree (of any size) under another, or to the top
			i := nodes[r.IntN(len(nodes))]
			if r.IntN(3) == 0 {
				with(i, "parent", nil)
			} else {
				p := tr.Nodes.Get(next[nodes[r.IntN(len(nodes))]].RKey)
				if p == nil || tr.IsAncestor(tr.Nodes.Get(next[i].RKey), p) {
					continue
				}
				with(i, "parent", nodeURI(p.Key()))
			}
			with(i, "sortKey", fmt.Sprintf("m%d", r.IntN(1000)))
		}
		for range r.IntN(4) { // delete a leaf
			i := nodes[r.IntN(len(nodes))]
			if it := tr.Nodes.Get(next[i].RKey); it != nil && it.Children.Len() == 0 && it.Note == nil {
				next[i] = store.Record{} // dropped below
			}
		}
		for range r.IntN(4) { // insert
			p := next[nodes[r.IntN(len(nodes))]].RKey
			k := fmt.Sprintf("3kins%04d%04d", commit, r.IntN(10000))
			next = append(next, store.Record{Collection: "app.bulleted.node", RKey: k, CID: "c" + k, Value: store.MustValue(map[string]any{"$type": "app.bulleted.node",
				"text": "Zebra inserted " + k, "parent": nodeURI(p), "sortKey": fmt.Sprintf("n%d", r.IntN(1000)), "createdAt": "2026-03-10T09:00:00.000Z"})})
		}
		if r.IntN(4) == 0 { // a mirror
			k := fmt.Sprintf("3kmir%04d%04d", commit, r.IntN(10000))
			next = append(next, store.Record{Collection: "app.bulleted.mirror", RKey: k, CID: "c" + k, Value: store.MustValue(map[string]any{"$type": "app.bulleted.mirror",
				"original": nodeURI(next[nodes[0]].RKey), "parent": nodeURI(next[nodes[r.IntN(len(nodes))]].RKey), "sortKey": "a", "createdAt": "2026-03-10T09:00:00.000Z"})})
		}
		recs = slices.DeleteFunc(next, func(rec store.Record) bool { return rec.Collection == "" })
		// notes of one key: keep the last
		seen := map[string]bool{}
		for i := len(recs) - 1; i >= 0; i-- {
			if recs[i].Collection == "app.bulleted.note" {
				if seen[recs[i].RKey] {
					recs[i] = store.Record{}
					continue
				}
				seen[recs[i].RKey] = true
			}
		}
		recs = slices.DeleteFunc(recs, func(rec store.Record) bool { return rec.Collection == "" })
	}
}
