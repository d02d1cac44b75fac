package outline_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// longList is a tree with n siblings under one parent (sort keys spread
// evenly), and a record inserted among them.
func longList(n int) (*outline.Tree, func(i int) []store.Record) {
	parent := "at://" + nextDID + "/app.bulleted.node/p"
	recs := []store.Record{{Collection: lexicon.Node, RKey: "p", CID: "cidp", Value: store.MustValue(map[string]any{
		"$type": lexicon.Node, "text": "parent", "sortKey": "a", "createdAt": "2026-01-01T00:00:00Z"})}}
	for i := range n {
		recs = append(recs, store.Record{Collection: lexicon.Node, RKey: fmt.Sprintf("k%07d", i), CID: fmt.Sprint("cid", i), Value: store.MustValue(map[string]any{
			"$type": lexicon.Node, "text": "t", "sortKey": fmt.Sprintf("s%07d", i*2), "parent": parent, "createdAt": "2026-01-01T00:00:00Z"})})
	}
	slices.SortFunc(recs, store.CompareRecords)
	tr := outline.Build(&store.Snapshot{DID: nextDID, Commit: "c0", Records: recs})
	insert := func(i int) []store.Record {
		return []store.Record{{Collection: lexicon.Node, RKey: fmt.Sprintf("n%07d", i), CID: fmt.Sprint("new", i), Value: store.MustValue(map[string]any{
			"$type": lexicon.Node, "text": "new", "sortKey": fmt.Sprintf("s%07d", (i*7919)%(2*n)+1), "parent": parent, "createdAt": "2026-01-01T00:00:00Z"})}}
	}
	return tr, insert
}

// BenchmarkNextLongList brings a tree forward by a one-bullet insert into
// a list of n siblings: the cost should be that of the siblings touched,
// not of the list (issue 41). where=end places the bullet after the last
// sibling, where=first before the first, where=middle among them: each
// copies the chunk of the list it joins (at most 512 pointers) and the
// list's directory (outline.Kids), where a middle insert copied the whole
// list (470 µs at 50,000 siblings, most of it the collector's); the
// records are made before the clock starts.
//
//	go test ./internal/outline -run '^$' -bench NextLongList -benchtime 200x -benchmem
func BenchmarkNextLongList(b *testing.B) {
	for _, where := range []string{"middle", "end", "first"} {
		for _, n := range []int{1_000, 50_000, 250_000} {
			b.Run(fmt.Sprintf("where=%s/siblings=%d", where, n), func(b *testing.B) {
				tr, insert := longList(n)
				parent := "at://" + nextDID + "/app.bulleted.node/p"
				changes := make([][]store.Record, 0, 1000)
				for i := range cap(changes) {
					if where == "middle" {
						changes = append(changes, insert(i))
						continue
					}
					sk := fmt.Sprintf("t%07d", i) // after the last
					if where == "first" {
						sk = fmt.Sprintf("r%07d", cap(changes)-i) // before the first
					}
					changes = append(changes, []store.Record{{Collection: lexicon.Node, RKey: fmt.Sprintf("n%07d", i), CID: fmt.Sprint("new", i), Value: store.MustValue(map[string]any{
						"$type": lexicon.Node, "text": "new", "sortKey": sk, "parent": parent, "createdAt": "2026-01-01T00:00:00Z"})}})
				}
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if i == len(changes) {
						b.StopTimer()
						tr, _ = longList(n)
						i = 0
						b.StartTimer()
					}
					commit := fmt.Sprint("c", i+1)
					tr = tr.Next(commit, commit, changes[i])
				}
			})
		}
	}
}

// A commit brought forward by two callers at once (our own commit, asked
// for by the next write and arriving on the followed stream) is brought
// forward once: the second gets the first's tree. Not parallel: it counts
// the package's calls of Next.
func TestForwardOnce(t *testing.T) {
	tr, insert := longList(50_000)
	e := outline.New(openLocal(t, t.TempDir()))
	e.Keep(tr)
	before := outline.Nexts()
	const rounds = 20
	for i := range rounds {
		commit := fmt.Sprintf("c%04d", i+1) // revs in order
		ch := insert(i)
		start := make(chan struct{})
		got := make(chan *outline.Tree, 2)
		for range 2 {
			go func() {
				<-start
				got <- e.Forward(tr, commit, commit, ch)
			}()
		}
		close(start)
		a, b := <-got, <-got
		if a != b || a.Commit != commit {
			t.Fatalf("round %d: two trees for one commit", i)
		}
		tr = a
	}
	if n := outline.Nexts() - before; n != rounds {
		t.Fatalf("%d commits brought forward with %d calls of Next", rounds, n)
	}
}
