package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestWarmBuildsTheIndex: after Warm the search index is built at the
// current commit (without it, the first search derives every bullet).
func TestWarmBuildsTheIndex(t *testing.T) {
	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := outline.New(l)
	if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "alpha"}, {Text: "beta"}, {Text: "gamma"}}}, false); err != nil {
		t.Fatal(err)
	}
	env := &Env{Engine: e}
	if err := env.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	tr, _ := e.Tree(ctx)
	x := env.index(tr.DID.String())
	if x.Derived != 3 {
		t.Fatalf("warm derived %d entries, want 3", x.Derived)
	}
}

// reopenedStore is an embedded store of n bullets opened again, as serve
// opens one: nothing made yet but its snapshot.
func reopenedStore(t *testing.T, n int) (*store.Local, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var nodes []intent.NewNode
	for i := range n {
		nodes = append(nodes, intent.NewNode{Text: fmt.Sprintf("bullet %d budget", i)})
	}
	if _, err := outline.New(l).Do(ctx, intent.Insert{Nodes: nodes}, false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err = store.OpenLocal(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// TestWarmPreparesTheFirstWrite: Warm also makes what the embedded store's
// first write would make (its map of records by path: 166–202 ms of the
// first write at 249,000 records).
func TestWarmPreparesTheFirstWrite(t *testing.T) {
	l, _ := reopenedStore(t, 20)
	if l.Prepared() {
		t.Fatal("prepared before Warm")
	}
	env := &Env{Engine: outline.New(l)}
	if err := env.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !l.Prepared() {
		t.Fatal("Warm left the first write's map of records by path to the first write")
	}
}

// TestWarmDuringCalls: searches and writes that arrive while the warm-up
// runs answer as they would without it (each search sees every write made
// before it), and the repository read back holds every write. Run with
// -race.
func TestWarmDuringCalls(t *testing.T) {
	ctx := context.Background()
	for round := range 4 {
		l, dir := reopenedStore(t, 300)
		env := &Env{Engine: outline.New(l)}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := env.Warm(ctx); err != nil {
				t.Error(err)
			}
		}()
		tr, err := env.Engine.Tree(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 3 {
			if round%2 == 0 || i > 0 { // half the rounds: a write first
				r, err := env.index(tr.DID.String()).Search(tr, search.Query{Text: "budget", Limit: 500})
				if err != nil {
					t.Fatal(err)
				}
				if len(r.Hits) != 300 {
					t.Fatalf("round %d: %d hits for budget, want 300", round, len(r.Hits))
				}
			}
			text := fmt.Sprintf("zebra %d.%d", round, i)
			if _, err := env.Engine.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: text}}}, false); err != nil {
				t.Fatal(err)
			}
			want = append(want, text)
			if tr, err = env.Engine.Tree(ctx); err != nil {
				t.Fatal(err)
			}
			r, err := env.index(tr.DID.String()).Search(tr, search.Query{Text: "zebra", Limit: 50})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, h := range r.Hits {
				got = append(got, h.Text)
			}
			if len(got) != len(want) {
				t.Fatalf("round %d: search for zebra found %q after writing %q", round, got, want)
			}
		}
		wg.Wait()
		// the store's own records (made from its map by path after the
		// writes) and the records read back by another opening agree
		mine, err := l.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		back, err := store.OpenLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		s, err := back.Snapshot(ctx)
		back.Close()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range s.Records {
			if txt, _ := r.Value.Text("text"); strings.HasPrefix(txt, "zebra ") {
				n++
			}
		}
		if len(mine.Records) != len(s.Records) || mine.Commit != s.Commit {
			t.Fatalf("round %d: the store holds %d records at %s, read back %d at %s", round, len(mine.Records), mine.Commit, len(s.Records), s.Commit)
		}
		if len(s.Records) != 303 || n != 3 {
			t.Fatalf("round %d: read back %d records, %d of them written during the warm-up; want 303 and 3", round, len(s.Records), n)
		}
	}
}

// broken is a repository that cannot be read.
type broken struct{}

func (broken) DID() syntax.DID { return "did:plc:broken" }
func (broken) Head(context.Context) (string, string, error) {
	return "", "", errors.New("disk on fire")
}
func (broken) Snapshot(context.Context) (*store.Snapshot, error) {
	return nil, errors.New("disk on fire")
}
func (broken) Apply(context.Context, string, []store.Write) (*store.Result, error) {
	return nil, errors.New("disk on fire")
}

// TestWarmUpSaysItsError: serve's background warm-up (WarmUp) says on
// stderr when it fails, rather than dropping the error.
func TestWarmUpSaysItsError(t *testing.T) {
	var stderr bytes.Buffer
	(&Env{Engine: outline.New(broken{})}).WarmUp(context.Background(), &stderr)
	if !strings.Contains(stderr.String(), "warming up failed") || !strings.Contains(stderr.String(), "disk on fire") {
		t.Fatalf("stderr: %q", stderr.String())
	}
}
