package outline_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// noDeltas hides store.Deltas: the engine rebuilds its tree from a
// snapshot, and the change log compares every record.
type noDeltas struct{ store.Repository }

// seedSections writes two sections through e ("Work" with two children,
// "Home" with one) and returns their keys by text.
func seedSections(t *testing.T, e *outline.Engine) map[string]string {
	t.Helper()
	ctx := context.Background()
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{
			{Text: "Work", Children: []intent.NewNode{{Text: "Ship the beta"}, {Text: "Write the notes"}}},
			{Text: "Home", Children: []intent.NewNode{{Text: "Buy milk"}}},
		}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for _, it := range tr.Nodes.All() {
		keys[it.Str("text")] = it.Key()
	}
	return keys
}

// otherWriter writes as another writer: a second store opened on the same
// data directory (another process, as far as the first store knows).
func otherWriter(t *testing.T, dir string, ws ...store.Write) {
	t.Helper()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Apply(context.Background(), "", ws); err != nil {
		t.Fatal(err)
	}
}

func nodeValue(did syntax.DID, text, sortKey, parent string) map[string]any {
	v := map[string]any{"$type": lexicon.Node, "text": text, "sortKey": sortKey, "createdAt": "2026-07-30T09:30:00.000Z"}
	if parent != "" {
		v["parent"] = "at://" + did.String() + "/" + lexicon.Node + "/" + parent
	}
	return v
}

func TestChangedSince(t *testing.T) {
	for _, deltas := range []bool{true, false} {
		t.Run(fmt.Sprintf("deltas=%v", deltas), func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			l, err := store.OpenLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var repo store.Repository = l
			if !deltas {
				repo = noDeltas{l}
			}
			e := outline.New(repo)
			keys := seedSections(t, e)
			did := l.DID()
			rev0 := e.ChangedSince("", "A").Rev
			if rev0 == "" {
				t.Fatal("no revision kept")
			}
			// nothing changed: nothing to tell
			if c := e.ChangedSince(rev0, "A"); c.Any() {
				t.Fatalf("nothing changed, yet %+v", c)
			}
			tr, _ := e.Tree(ctx)
			home := tr.Nodes.Get(keys["Home"])
			milk := tr.Nodes.Get(keys["Buy milk"])
			notes := tr.Nodes.Get(keys["Write the notes"])
			// another writer: a bullet created under Work, Home renamed,
			// "Write the notes" moved under Home, "Buy milk" deleted
			edited := home.Rec.Value.Map()
			edited["text"] = "Home and garden"
			moved := notes.Rec.Value.Map()
			moved["parent"] = "at://" + did.String() + "/" + lexicon.Node + "/" + keys["Home"]
			newKey := syntax.NewTIDNow(7).String()
			otherWriter(t, dir,
				store.Write{Op: store.Create, Collection: lexicon.Node, RKey: newKey, Value: nodeValue(did, "Call the printer about the invoice for the spring catalogue, twice", "z", keys["Work"])},
				store.Write{Op: store.Update, Collection: lexicon.Node, RKey: keys["Home"], Value: edited},
				store.Write{Op: store.Update, Collection: lexicon.Node, RKey: keys["Write the notes"], Value: moved},
				store.Write{Op: store.Delete, Collection: lexicon.Node, RKey: milk.Key()},
			)
			if _, err := e.Tree(ctx); err != nil {
				t.Fatal(err)
			}
			c := e.ChangedSince(rev0, "A")
			if !c.Any() || !c.Complete || c.Count != 4 || c.External != 4 || c.Sessions != 0 || c.Approximate {
				t.Fatalf("after another writer's four changes: %+v", c)
			}
			got := map[string]outline.Change{}
			for _, ch := range c.Changes {
				got[ch.RKey] = ch
			}
			want := map[string][3]string{ // change, text, section
				newKey:                  {"created", "Call the printer about the invoice for the spring…", keys["Work"]},
				keys["Home"]:            {"edited", "Home and garden", keys["Home"]},
				keys["Write the notes"]: {"moved", "Write the notes", keys["Home"]},
				milk.Key():              {"deleted", "Buy milk", keys["Home"]},
			}
			for k, w := range want {
				g := got[k]
				if g.Change != w[0] || g.Text != w[1] || g.Section != w[2] {
					t.Errorf("%s: %+v, want %v", k, g, w)
				}
			}
			secs := fmt.Sprint(c.Sections)
			if secs != fmt.Sprintf("[{%s Home and garden 3} {%s Work 1}]", keys["Home"], keys["Work"]) {
				t.Errorf("sections %s", secs)
			}
			rev1 := c.Rev
			// the agent's own write (writer A) is not told to A, and is to B
			if _, err := e.DoFunc(outline.WithWriter(ctx, "A"), false, func(p *outline.Planner) error {
				return intent.Insert{Pos: outline.Position{Parent: keys["Work"]}, Nodes: []intent.NewNode{{Text: "mine"}}}.Plan(p)
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Tree(ctx); err != nil {
				t.Fatal(err)
			}
			if c := e.ChangedSince(rev1, "A"); c.Any() || c.Rev == rev1 {
				t.Fatalf("the agent's own write is told to it: %+v", c)
			}
			if c := e.ChangedSince(rev1, "B"); c.Count != 1 || c.Sessions != 1 || c.External != 0 || c.Changes[0].Text != "mine" {
				t.Fatalf("another session's write, as B sees it: %+v", c)
			}
			// once told (the caller passes the new Rev), not again
			rev2 := e.ChangedSince(rev1, "A").Rev
			if c := e.ChangedSince(rev2, "A"); c.Any() {
				t.Fatalf("told again: %+v", c)
			}
			// more advances than the log keeps: an answer that says so
			for i := range outline.LogAdvances + 1 {
				otherWriter(t, dir, store.Write{Op: store.Create, Collection: lexicon.Node, RKey: syntax.NewTIDNow(uint(i % 1000)).String(), Value: nodeValue(did, fmt.Sprint("n", i), fmt.Sprintf("b%03d", i), "")})
				if _, err := e.Tree(ctx); err != nil {
					t.Fatal(err)
				}
			}
			c = e.ChangedSince(rev2, "A")
			if !c.Any() || c.Complete {
				t.Fatalf("the log does not reach back, yet %+v", c)
			}
			if c := e.ChangedSince(c.Rev, "A"); c.Any() {
				t.Fatalf("after the newest revision: %+v", c)
			}
			if strings.Contains(fmt.Sprint(c.Changes), "\x00") {
				t.Fatal("writer tags leak")
			}
		})
	}
}
