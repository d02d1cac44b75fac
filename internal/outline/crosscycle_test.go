package outline_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// crossRepos is this repository (an engine reading others through b) and
// another embedded store b; down makes b unreadable.
func crossRepos(t *testing.T) (e *outline.Engine, a, b *store.Local, down *bool) {
	t.Helper()
	a, b = openLocal(t, t.TempDir()), openLocal(t, t.TempDir())
	down = new(bool)
	others := func(ctx context.Context, ident string) (*outline.Tree, error) {
		if *down {
			return nil, errors.New("connection refused")
		}
		if ident != b.DID().String() {
			return nil, errors.New("unknown identity " + ident)
		}
		s, err := b.Snapshot(ctx)
		if err != nil {
			return nil, err
		}
		return outline.Build(s), nil
	}
	e, err := outline.Open(a, outline.Options{Others: others})
	if err != nil {
		t.Fatal(err)
	}
	return e, a, b, down
}

func rec(coll, rkey string, v map[string]any) store.Write {
	v["$type"] = coll
	v["createdAt"] = "2026-03-10T09:00:00.000Z"
	return store.Write{Op: store.Create, Collection: coll, RKey: rkey, Value: v}
}

func count(t *testing.T, l *store.Local) int {
	t.Helper()
	s, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(s.Records)
}

// A mirror whose original is in another repository, whose subtree mirrors
// back into the mirror's own ancestors, would render forever across the two
// repositories: the plan is refused (kind cycle, nothing written). Placed
// elsewhere it is admitted; with the other repository unreadable it is
// admitted and the result says cycles through it were not checked. A
// contribution of this identity under the other repository's bullet,
// mirroring that bullet inside itself, is refused the same way.
func TestMirrorCycleAcrossRepositories(t *testing.T) {
	ctx := context.Background()
	e, a, b, down := crossRepos(t)
	me, them := a.DID().String(), b.DID().String()
	out, err := insertTop(ctx, e, []intent.NewNode{{Text: "X"}})
	if err != nil {
		t.Fatal(err)
	}
	x := out.Plan.Writes[0].RKey
	// b: O at the top with, under it, a mirror of this repository's X;
	// P, shared with this identity
	if _, err := b.Apply(ctx, "", []store.Write{
		rec(lexicon.Node, "3kooooooooo22", map[string]any{"text": "O", "sortKey": "a"}),
		rec(lexicon.Mirror, "3kmmmmmmmmm22", map[string]any{"original": "at://" + me + "/" + lexicon.Node + "/" + x,
			"parent": "at://" + them + "/" + lexicon.Node + "/3kooooooooo22", "sortKey": "a"}),
		rec(lexicon.Node, "3kppppppppp22", map[string]any{"text": "P", "sortKey": "b"}),
		rec(lexicon.Outline, "3kppppppppp22", map[string]any{"root": "at://" + them + "/" + lexicon.Node + "/3kppppppppp22",
			"contributors": []any{map[string]any{"did": me}}}),
	}); err != nil {
		t.Fatal(err)
	}
	o := "at://" + them + "/" + lexicon.Node + "/3kooooooooo22"
	mirror := func(original, parent string) (*outline.Outcome, error) {
		return e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return intent.Mirror{Original: original, Pos: outline.Position{Parent: parent}}.Plan(p)
		})
	}
	before := count(t, a)
	_, err = mirror(o, x)
	if !errors.Is(err, outline.ErrCycle) {
		t.Fatalf("mirror of %s under X: want a cycle refusal, got %v", o, err)
	}
	if !strings.Contains(err.Error(), them) {
		t.Fatalf("the refusal does not name the other repository: %v", err)
	}
	if n := count(t, a); n != before {
		t.Fatalf("refused, but %d records now, %d before", n, before)
	}

	// unreadable: admitted, and said
	*down = true
	out, err = mirror(o, x)
	if err != nil {
		t.Fatalf("with %s unreadable: %v", them, err)
	}
	if d := strings.Join(out.Plan.Diagnostics, "\n"); !strings.Contains(d, "mirror cycles through "+them+" were not checked") {
		t.Fatalf("the unread repository is not said: %q", d)
	}
	*down = false
	if _, err := e.Undo(ctx, 1, "", false); err != nil {
		t.Fatal(err)
	}

	// at the top level it renders O, whose mirror renders X: no cycle
	if _, err := mirror(o, ""); err != nil {
		t.Fatalf("mirror of %s at the top level: %v", o, err)
	}

	// a contribution under b's P mirroring P inside itself
	c, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{Parent: "at://" + them + "/" + lexicon.Node + "/3kppppppppp22"}, Nodes: []intent.NewNode{{Text: "my idea"}}}.Plan(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	before = count(t, a)
	_, err = mirror("at://"+them+"/"+lexicon.Node+"/3kppppppppp22", c.Plan.Writes[0].RKey)
	if !errors.Is(err, outline.ErrCycle) {
		t.Fatalf("mirror of P inside my contribution under P: want a cycle refusal, got %v", err)
	}
	if n := count(t, a); n != before {
		t.Fatalf("refused, but %d records now, %d before", n, before)
	}
}

// The repositories a mirror leads to are read within a bound (3 away):
// the first past it is said, not silently skipped; offline, the result
// says that no other repository was read.
func TestMirrorCycleBoundSaid(t *testing.T) {
	ctx := context.Background()
	// did:plc:r1's O mirrors r2's O, which mirrors r3's, … up to r5
	tree := func(i int) *outline.Tree {
		did := fmt.Sprintf("did:plc:r%d", i)
		recs := []store.Record{{Collection: lexicon.Node, RKey: "3kooooooooo22", CID: "c1",
			Value: store.MustValue(map[string]any{"$type": lexicon.Node, "text": "O", "sortKey": "a", "createdAt": "2026-03-10T09:00:00.000Z"})}}
		if i < 5 {
			recs = append(recs, store.Record{Collection: lexicon.Mirror, RKey: "3kmmmmmmmmm22", CID: "c2",
				Value: store.MustValue(map[string]any{"$type": lexicon.Mirror, "original": fmt.Sprintf("at://did:plc:r%d/%s/3kooooooooo22", i+1, lexicon.Node),
					"parent": "at://" + did + "/" + lexicon.Node + "/3kooooooooo22", "sortKey": "a", "createdAt": "2026-03-10T09:00:00.000Z"})})
		}
		return outline.Build(&store.Snapshot{DID: syntax.DID(did), Commit: "c", Records: recs})
	}
	read := 0
	others := func(ctx context.Context, ident string) (*outline.Tree, error) {
		read++
		var i int
		if _, err := fmt.Sscanf(ident, "did:plc:r%d", &i); err != nil || i < 1 || i > 5 {
			return nil, errors.New("unknown identity " + ident)
		}
		return tree(i), nil
	}
	for _, online := range []bool{true, false} {
		a := openLocal(t, t.TempDir())
		o := outline.Options{}
		if online {
			o.Others = others
		}
		e, err := outline.Open(a, o)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.DoFunc(ctx, true, func(p *outline.Planner) error {
			return intent.Mirror{Original: "at://did:plc:r1/" + lexicon.Node + "/3kooooooooo22"}.Plan(p)
		})
		if err != nil {
			t.Fatal(err)
		}
		d := strings.Join(out.Plan.Diagnostics, "\n")
		want := "mirror cycles through did:plc:r4 were not checked: more than 3 repositories away"
		if !online {
			want = "mirror cycles through other repositories (did:plc:r1) were not checked: this server does not read other repositories (offline)"
		}
		if !strings.Contains(d, want) {
			t.Fatalf("online %v: the bound is not said: %q", online, d)
		}
	}
	if read != 3 {
		t.Fatalf("read %d repositories, want 3 (r1..r3)", read)
	}
}
