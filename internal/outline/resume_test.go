package outline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// stoppedInsert inserts n top-level bullets "r0".."rN-1" whose second batch
// fails (the first lands), and returns the engine, the store, the
// incomplete operation's id and the sortKeys it planned, in order.
func stoppedInsert(t *testing.T, n int) (*outline.Engine, *store.Local, string, []string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	l := openLocal(t, dir+"/repo")
	f := &faultRepo{Local: l}
	stopped := true
	f.before = func(i int) error {
		if i == 1 && stopped {
			return errors.New("503 service unavailable")
		}
		return nil
	}
	e := outline.New(f)
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	ns := make([]intent.NewNode, n)
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("r%d", i)}
	}
	_, err := insertTop(ctx, e, ns)
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	stopped = false
	rep := oe.Data.(outline.OpReport)
	if rep.Landed != 1 {
		t.Fatalf("landed %d batches, want 1", rep.Landed)
	}
	keys := enginetest.PlannedSortKeys(t, dir, rep.ID)
	if len(keys) != n {
		t.Fatalf("%d planned bullets, want %d", len(keys), n)
	}
	return e, l, rep.ID, keys
}

// foreign writes top-level bullets straight to the store, as another
// client would, with the given sortKeys.
func foreign(t *testing.T, l *store.Local, keys ...string) {
	t.Helper()
	var ws []store.Write
	for i, k := range keys {
		ws = append(ws, store.Write{Op: store.Create, Collection: lexicon.Node, RKey: fmt.Sprintf("3kforeign%04d", i), Value: map[string]any{
			"$type": lexicon.Node, "text": fmt.Sprintf("foreign %d", i), "sortKey": k, "createdAt": "2026-12-04T10:00:00.000Z"}})
	}
	if _, err := l.Apply(context.Background(), "", ws); err != nil {
		t.Fatal(err)
	}
}

// topLevel reads the top level back from the store: texts in order, and
// whether any two siblings share a sortKey.
func topLevel(t *testing.T, l *store.Local) ([]string, int) {
	t.Helper()
	s, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	tr := outline.Build(s)
	var texts []string
	seen := map[string]bool{}
	ties := 0
	for r := range tr.Roots.Items() {
		texts = append(texts, r.Str("text"))
		if seen[r.SortKey()] {
			ties++
		}
		seen[r.SortKey()] = true
	}
	return texts, ties
}

// TestResumeReplacesPositions: an insert of 600 bullets stops after its
// first batch; another client then appends 5 bullets after the last one it
// sees, with the keys the plan had for the next bullets (the reported
// case: 5 ties, the new bullets interleaved). Resume keeps the record keys
// but places the rest against the siblings as they are: no tie, the 600
// contiguous and in order, the other client's bullets after them; undo
// then takes back exactly the 600.
func TestResumeReplacesPositions(t *testing.T) {
	ctx := context.Background()
	const n = 600
	e, l, id, keys := stoppedInsert(t, n)
	foreign(t, l, keys[200:205]...)
	// a dry run says so and changes nothing
	before, _ := topLevel(t, l)
	dry, err := e.Resume(ctx, id, true)
	if err != nil {
		t.Fatal(err)
	}
	if !containsText(dry.Plan.Diagnostics, "given new sortKeys") {
		t.Errorf("the dry run does not say the bullets get new keys: %q", dry.Plan.Diagnostics)
	}
	if after, _ := topLevel(t, l); len(after) != len(before) {
		t.Fatalf("the dry run wrote: %d bullets, was %d", len(after), len(before))
	}
	if _, err := e.Resume(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	texts, ties := topLevel(t, l)
	if ties != 0 {
		t.Errorf("%d sortKey ties among the top level after resume", ties)
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("r%d", i))
	}
	for i := range 5 {
		want = append(want, fmt.Sprintf("foreign %d", i))
	}
	if fmt.Sprint(texts) != fmt.Sprint(want) {
		t.Fatalf("top level after resume: %d bullets %v … %v, want the 600 in order, then the other client's 5", len(texts), head(texts), texts[max(0, len(texts)-8):])
	}
	if _, err := e.Undo(ctx, 0, id, false); err != nil {
		t.Fatal(err)
	}
	texts, _ = topLevel(t, l)
	if fmt.Sprint(texts) != fmt.Sprint(want[n:]) {
		t.Fatalf("after undo: %v, want the other client's 5 alone", head(texts))
	}
}

// TestResumeInterleaved: the other client's bullets land among the
// planned keys of the rest (not tied): they stay where they are, and the
// rest of the operation goes on after its written part, together.
func TestResumeInterleaved(t *testing.T) {
	ctx := context.Background()
	e, l, id, keys := stoppedInsert(t, 300)
	foreign(t, l, keys[250]+"0", keys[260]+"0")
	if _, err := e.Resume(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	texts, ties := topLevel(t, l)
	if ties != 0 {
		t.Errorf("%d ties", ties)
	}
	for i := range 300 {
		if texts[i] != fmt.Sprintf("r%d", i) {
			t.Fatalf("place %d: %q; the operation's bullets are not contiguous and in order: %v", i, texts[i], texts[max(0, i-3):min(len(texts), i+3)])
		}
	}
	if len(texts) != 302 {
		t.Fatalf("%d bullets, want 302", len(texts))
	}
}

// TestResumeAnchorMissing: the bullet the rest was to follow is deleted
// meanwhile: resume is refused with anchor_missing and writes nothing.
func TestResumeAnchorMissing(t *testing.T) {
	ctx := context.Background()
	e, l, id, _ := stoppedInsert(t, 300)
	s, err := l.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := outline.Build(s)
	last := tr.Roots.At(tr.Roots.Len() - 1)
	if last.Str("text") != "r199" {
		t.Fatalf("last landed bullet %q", last.Str("text"))
	}
	if _, err := l.Apply(ctx, "", []store.Write{{Op: store.Delete, Collection: lexicon.Node, RKey: last.Key()}}); err != nil {
		t.Fatal(err)
	}
	s1, _ := l.Snapshot(ctx)
	_, err = e.Resume(ctx, id, false)
	if !errors.Is(err, outline.ErrAnchorMissing) {
		t.Fatalf("resume after its anchor was deleted: %v, want anchor_missing", err)
	}
	if s2, _ := l.Snapshot(ctx); s2.Commit != s1.Commit {
		t.Fatal("a refused resume wrote")
	}
}

func containsText(xs []string, sub string) bool {
	for _, x := range xs {
		if len(x) >= len(sub) && contains(x, sub) {
			return true
		}
	}
	return false
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestConflictBetweenBatchesReplaces: another client appends bullets
// between two batches of a running insert, with the keys the plan has for
// the next bullets: the operation, re-checked after the conflict, places
// the rest after its written part, no tie.
func TestConflictBetweenBatchesReplaces(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	l := openLocal(t, dir+"/repo")
	f := &faultRepo{Local: l}
	e := outline.New(f)
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	f.before = func(i int) error {
		if i != 1 {
			return nil
		}
		ents, _ := os.ReadDir(filepath.Join(dir, "ops"))
		for _, en := range ents {
			if id, ok := strings.CutSuffix(en.Name(), ".json"); ok {
				if keys := enginetest.PlannedSortKeys(t, dir, id); len(keys) > 205 {
					foreign(t, l, keys[200:205]...)
				}
			}
		}
		return nil
	}
	ns := make([]intent.NewNode, 400)
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("r%d", i)}
	}
	if _, err := insertTop(ctx, e, ns); err != nil {
		t.Fatal(err)
	}
	texts, ties := topLevel(t, l)
	if ties != 0 {
		t.Errorf("%d sortKey ties", ties)
	}
	if len(texts) != 405 || texts[399] != "r399" || texts[400] != "foreign 0" {
		t.Fatalf("%d bullets; around the end of the operation: %v", len(texts), texts[min(395, len(texts)):])
	}
}
