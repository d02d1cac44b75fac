package tools_test

import (
	"context"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// nodeRecords reads the repository back: every node's value by text.
func nodeRecords(t *testing.T, l *store.Local) map[string]map[string]any {
	t.Helper()
	s, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, r := range s.Records {
		if r.Collection == "app.bulleted.node" {
			out[r.Value["text"].(string)] = r.Value
		}
	}
	return out
}

// TestInsertBetweenForeignKeys: another client wrote siblings with keys
// "a", "a!", "a0"; no key of the alphabet 0-9A-Za-z fits between "a" and
// "a!" or between "a!" and "a0", but printable ones do ("a " + …). Inserting
// there writes one new record and rewrites none of that client's keys (it
// used to respace two of them); the repository as read back has the new
// bullet strictly between its neighbours.
func TestInsertBetweenForeignKeys(t *testing.T) {
	l := openLocal(t)
	ctx := context.Background()
	node := func(rkey, sortKey, text string) store.Write {
		return store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: rkey, Value: map[string]any{"$type": "app.bulleted.node",
			"text": text, "sortKey": sortKey, "createdAt": "2026-03-10T09:00:00.000Z"}}
	}
	if _, err := l.Apply(ctx, "", []store.Write{
		node("3kforeign1111", "a", "first"),
		node("3kforeign2222", "a!", "second"),
		node("3kforeign3333", "a0", "third"),
	}); err != nil {
		t.Fatal(err)
	}
	c := inProcess(t, &tools.Env{Engine: outline.New(l)})
	for _, tc := range []struct{ after, text, lo, hi string }{
		{"3kforeign1111", "between first and second", "a", "a!"},
		{"3kforeign2222", "between second and third", "a!", "a0"},
	} {
		res, sc := call(t, c, "insert_after", map[string]any{"after": tc.after, "text": tc.text})
		if res.IsError {
			t.Fatalf("insert_after %s: %s", tc.after, text(res))
		}
		r := nodeRecords(t, l)
		for name, want := range map[string]string{"first": "a", "second": "a!", "third": "a0"} {
			if got := r[name]["sortKey"]; got != want {
				t.Fatalf("%s: the other client's key %q was rewritten to %v (%s)", tc.text, want, got, text(res))
			}
		}
		k, _ := r[tc.text]["sortKey"].(string)
		if !(tc.lo < k && k < tc.hi) {
			t.Fatalf("%s: sortKey %q is not strictly between %q and %q", tc.text, k, tc.lo, tc.hi)
		}
		if n := len(sc["created"].([]any)); n != 1 {
			t.Fatalf("%s: %d records created", tc.text, n)
		}
	}
}
