package store_test

import (
	"context"
	"fmt"
	"maps"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// reopened is a store of n nodes, opened again (as serve opens it), so
// that nothing but the snapshot is made yet.
func reopened(t *testing.T, n int) (*store.Local, string) {
	t.Helper()
	dir := t.TempDir()
	l, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ws []store.Write
	for i := range n {
		ws = append(ws, store.Write{Op: store.Create, Collection: "app.bulleted.node", RKey: fmt.Sprintf("k%04d", i),
			Value: map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprint("node ", i), "sortKey": "a", "createdAt": "2025-01-01T00:00:00Z"}})
	}
	if _, err := l.Apply(context.Background(), "", ws); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if l, err = store.OpenLocal(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// TestWritesOverTheSnapshot: writes on a store opened again (its records
// the loaded snapshot's, the changes beside them) create, update and
// delete as they should, before and after the changes are folded into the
// snapshot's list (a snapshot asked for, and more changes than a quarter
// of the records); refused writes change nothing; another process's
// commit is taken in; and every step reads back as a model of the records
// says, in this process and opened again.
func TestWritesOverTheSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l, dir := reopened(t, 200)
	model := map[string]string{} // rkey -> text
	for i := range 200 {
		model[fmt.Sprintf("k%04d", i)] = fmt.Sprint("node ", i)
	}
	val := func(text string) map[string]any {
		return map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "a", "createdAt": "2025-01-01T00:00:00Z"}
	}
	check := func(when string, l *store.Local) {
		t.Helper()
		s, err := l.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for i, r := range s.Records {
			if i > 0 && store.CompareRecords(s.Records[i-1], r) >= 0 {
				t.Fatalf("%s: the snapshot is not sorted at %s", when, r.RKey)
			}
			got[r.RKey] = r.Value.Str("text")
		}
		if !maps.Equal(got, model) {
			t.Fatalf("%s: %d records, want %d (or texts differ)", when, len(got), len(model))
		}
	}
	write := func(ws ...store.Write) {
		t.Helper()
		if _, err := l.Apply(ctx, "", ws); err != nil {
			t.Fatal(err)
		}
		for _, w := range ws {
			if w.Op == store.Delete {
				delete(model, w.RKey)
			} else {
				model[w.RKey] = w.Value["text"].(string)
			}
		}
	}
	node := func(op store.Op, rkey, text string) store.Write {
		w := store.Write{Op: op, Collection: "app.bulleted.node", RKey: rkey}
		if op != store.Delete {
			w.Value = val(text)
		}
		return w
	}
	write(node(store.Create, "new", "new"), node(store.Update, "k0001", "changed"), node(store.Delete, "k0002", ""))
	// refused: each names a record that is (not) there as the changes say
	for _, w := range []store.Write{node(store.Create, "new", "again"), node(store.Update, "k0002", "gone"), node(store.Delete, "k0002", ""),
		node(store.Create, "k0003", "there")} {
		if _, err := l.Apply(ctx, "", []store.Write{w}); err == nil {
			t.Fatalf("%s %s was not refused", w.Op, w.RKey)
		}
	}
	check("changes beside the snapshot", l)
	write(node(store.Create, "k0002", "back"), node(store.Delete, "new", ""), node(store.Update, "k0003", "changed after a snapshot"))
	check("changes after a snapshot", l)
	for b := range 7 { // 1,050 creates and 150 deletes: folded on the way
		var ws []store.Write
		for i := range 150 {
			ws = append(ws, node(store.Create, fmt.Sprintf("b%d-%03d", b, i), "batch"))
		}
		for i := range 50 {
			if b < 3 {
				ws = append(ws, node(store.Delete, fmt.Sprintf("k%04d", 10+b*50+i), ""))
			}
		}
		write(ws...)
	}
	// another process commits: taken in at the next read
	other, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Apply(ctx, "", []store.Write{node(store.Create, "other", "theirs"), node(store.Delete, "k0004", "")}); err != nil {
		t.Fatal(err)
	}
	other.Close()
	model["other"] = "theirs"
	delete(model, "k0004")
	check("another process's commit taken in", l)
	write(node(store.Update, "other", "ours"))
	check("after it", l)
	l.Close()
	again, err := store.OpenLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	check("opened again", again)
}
