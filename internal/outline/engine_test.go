package outline_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

func newEngine(t testing.TB) *outline.Engine {
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return outline.New(l)
}

// seed10k is an engine over a 10,000-bullet outline (one level, committed in
// 50 batches of 200) and its tree.
func seed10k(b *testing.B) (*outline.Engine, *outline.Tree) {
	ctx := context.Background()
	e := newEngine(b)
	for i := 0; i < 50; i++ {
		var ns []intent.NewNode
		for j := 0; j < 200; j++ {
			ns = append(ns, intent.NewNode{Text: "bullet"})
		}
		if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: ns}).Plan(p) }); err != nil {
			b.Fatal(err)
		}
	}
	tr, _ := e.Tree(ctx)
	return e, tr
}

func BenchmarkPlanInsert10k(b *testing.B) {
	ctx := context.Background()
	e, tr := seed10k(b)
	anchor := tr.Roots.At(5000).Key()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.DoFunc(ctx, true, func(p *outline.Planner) error {
			return intent.Insert{Pos: outline.Position{After: anchor}, Nodes: []intent.NewNode{{Text: "new"}}}.Plan(p)
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInsertCommit10k is an insert that commits on a 10,000-bullet
// outline: plan, validate, commit to the embedded store, and the next
// snapshot's tree (only changed records are validated again).
func BenchmarkInsertCommit10k(b *testing.B) {
	ctx := context.Background()
	e, tr := seed10k(b)
	anchor := tr.Roots.At(5000).Key()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return intent.Insert{Pos: outline.Position{After: anchor}, Nodes: []intent.NewNode{{Text: "new"}}}.Plan(p)
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRebuild10k is the tree refresh after a one-record commit on a
// 10,000-bullet outline (validation is lazy and carried over by CID).
func BenchmarkRebuild10k(b *testing.B) {
	_, tr := seed10k(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		outline.Rebuild(tr.Snapshot(), tr)
	}
}

// The undo journal survives a restart when kept on disk, and a journal of
// another repository is ignored.
func TestJournalKeptAcrossRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := dir + "/data"
	l, e := openJournaled(t, dir+"/repo", path)
	keys := enginetest.Insert(t, e, outline.Position{}, "one", "two")
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Edit{Node: keys[0], Text: ptr("ONE"), Note: ptr("a note")}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	before, _ := l.Snapshot(ctx)
	l.Close()

	l2, e2 := openJournaled(t, dir+"/repo", path)
	defer l2.Close()
	if got := enginetest.Texts(t, e2, ""); !reflect.DeepEqual(got, []string{"ONE", "two"}) {
		t.Fatalf("reopened outline: %v (snapshot had %d records)", got, len(before.Records))
	}
	if _, err := e2.Undo(ctx, 1, "", false); err != nil {
		t.Fatal(err)
	}
	if got := enginetest.Texts(t, e2, ""); !reflect.DeepEqual(got, []string{"one", "two"}) {
		t.Fatalf("after undo across restart: %v", got)
	}
	tr, _ := e2.Tree(ctx)
	if tr.Notes.Len() != 0 {
		t.Fatalf("undo left %d note(s)", tr.Notes.Len())
	}
	if _, err := e2.Undo(ctx, 1, "", false); err != nil {
		t.Fatal(err)
	}
	if got := enginetest.Texts(t, e2, ""); len(got) != 0 {
		t.Fatalf("second undo: %v", got)
	}

	// another repository's engine starts with an empty journal
	other, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	e3 := outline.New(other)
	enginetest.Insert(t, e2, outline.Position{}, "three")
	if err := e3.KeepOperations(path); err != nil {
		t.Fatal(err)
	}
	if _, err := e3.Undo(ctx, 1, "", true); !errors.Is(err, outline.ErrInvalidInput) {
		t.Fatalf("undo with another repository's journal: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func TestEngineSuite(t *testing.T) {
	t.Parallel()
	enginetest.Run(t, func(t testing.TB) store.Repository {
		l, err := store.OpenLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}, 150)
}

// A record cut short (a crash of the machine while an operation was being
// recorded, before its first batch left) is set aside, and said once in a
// result and on stderr (Notices): it does not keep the journal from
// opening, nor hide the whole records beside it.
func TestJournalSetsAsideTornRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := dir + "/data"
	l, e := openJournaled(t, dir+"/repo", path)
	enginetest.Insert(t, e, outline.Position{}, "one")
	l.Close()
	records, _ := filepath.Glob(path + "/ops/*.json")
	if len(records) != 1 {
		t.Fatalf("records: %v", records)
	}
	whole, err := os.ReadFile(records[0])
	if err != nil {
		t.Fatal(err)
	}
	torn := map[string][]byte{
		path + "/ops/3kzzzzzzzzy22.json": whole[:len(whole)/2],           // cut mid-plan
		path + "/ops/3kzzzzzzzzz22.json": nil,                            // nothing written yet
		path + "/ops/3kzzzzzzzzx22.json": append(make([]byte, 40), '\n'), // zeros where the plan was
	}
	for p, raw := range torn {
		if err := os.WriteFile(p, raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l2, e2 := openJournaled(t, dir+"/repo", path) // fails if a torn record keeps the journal from opening
	defer l2.Close()
	ops, err := e2.Operations()
	if err != nil || len(ops) != 1 {
		t.Fatalf("operations after the crash: %v, %v (want the one whole record)", ops, err)
	}
	notes := e2.TakeNotices()
	if len(notes) != len(torn) {
		t.Fatalf("notices: %q, want one per torn record", notes)
	}
	for p := range torn {
		if _, err := os.Stat(p + ".torn"); err != nil {
			t.Fatalf("%s not set aside: %v", p, err)
		}
		if !slices.ContainsFunc(notes, func(n string) bool {
			return strings.Contains(n, p) && strings.Contains(n, "sent nothing") && strings.Contains(n, "set aside")
		}) {
			t.Fatalf("no notice names %s: %q", p, notes)
		}
	}
	if again := e2.TakeNotices(); len(again) != 0 {
		t.Fatalf("told twice: %q", again)
	}
	if all := e2.Notices(); len(all) != len(torn) {
		t.Fatalf("Notices (for stderr): %q", all)
	}
	// writes go on
	enginetest.Insert(t, e2, outline.Position{}, "two")
}

// openJournaled is an engine over the embedded store in repo, its
// operations journal kept in data/ops.
func openJournaled(t *testing.T, repo, data string) (*store.Local, *outline.Engine) {
	t.Helper()
	l, err := store.OpenLocal(repo)
	if err != nil {
		t.Fatal(err)
	}
	e := outline.New(l)
	if err := e.KeepOperations(data); err != nil {
		t.Fatal(err)
	}
	return l, e
}
