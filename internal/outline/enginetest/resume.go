package enginetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// stopAfterFirst is a repository whose second Apply fails (as a gateway
// error, the batch not sent), once.
type stopAfterFirst struct {
	store.Repository
	mu    sync.Mutex
	calls int
}

func (r *stopAfterFirst) Apply(ctx context.Context, swap string, ws []store.Write) (*store.Result, error) {
	r.mu.Lock()
	r.calls++
	n := r.calls
	r.mu.Unlock()
	if n == 2 {
		return nil, errors.New("503 service unavailable")
	}
	return r.Repository.Apply(ctx, swap, ws)
}

// resumeAfterForeignAppends: a 300-bullet insert stops after its first
// batch; another client appends 5 bullets with the keys the plan has for
// the next ones; resume places the rest after the written part (no tie,
// the operation's bullets contiguous and in order, the other client's
// after them), read back from the repository; undo takes back the 300.
func resumeAfterForeignAppends(t *testing.T, open Open) {
	ctx := context.Background()
	repo := open(t)
	dir := t.TempDir()
	e := outline.New(&stopAfterFirst{Repository: repo})
	if err := e.KeepOperations(dir); err != nil {
		t.Fatal(err)
	}
	const n = 300
	ns := make([]intent.NewNode, n)
	for i := range ns {
		ns[i] = intent.NewNode{Text: fmt.Sprintf("r%d", i)}
	}
	_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Insert{Pos: outline.Position{}, Nodes: ns}.Plan(p) })
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	id := oe.Data.(outline.OpReport).ID
	keys := PlannedSortKeys(t, dir, id)
	var ws []store.Write
	for i, k := range keys[200:205] {
		ws = append(ws, store.Write{Op: store.Create, Collection: lexicon.Node, RKey: fmt.Sprintf("3kforeign%04d", i), Value: map[string]any{
			"$type": lexicon.Node, "text": fmt.Sprintf("foreign %d", i), "sortKey": k, "createdAt": "2026-12-04T10:00:00.000Z"}})
	}
	if _, err := repo.Apply(ctx, "", ws); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(ctx, id, false); err != nil {
		t.Fatal(err)
	}
	s, err := repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tr := outline.Build(s)
	var texts []string
	seen := map[string]bool{}
	for r := range tr.Roots.Items() {
		texts = append(texts, r.Str("text"))
		if seen[r.SortKey()] {
			t.Errorf("sortKey %q tied after resume", r.SortKey())
		}
		seen[r.SortKey()] = true
	}
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("r%d", i))
	}
	for i := range 5 {
		want = append(want, fmt.Sprintf("foreign %d", i))
	}
	if fmt.Sprint(texts) != fmt.Sprint(want) {
		t.Fatalf("top level after resume (%d bullets) is not the operation's 300 in order and then the other client's 5", len(texts))
	}
	if _, err := e.Undo(ctx, 0, id, false); err != nil {
		t.Fatal(err)
	}
	s, err = repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := outline.Build(s).Roots.Len(); got != 5 {
		t.Fatalf("after undo: %d top-level bullets, want the other client's 5", got)
	}
}

// PlannedSortKeys reads, from the operations directory dir an engine keeps
// (Engine.KeepOperations), the sortKeys operation id planned for its
// app.bulleted.node writes, in the plan's order.
func PlannedSortKeys(t testing.TB, dir, id string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "ops", id+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Writes []struct {
			Collection string         `json:"collection"`
			Value      map[string]any `json:"value"`
		} `json:"writes"`
	}
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&rec); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, w := range rec.Writes {
		if k, ok := w.Value["sortKey"].(string); ok && w.Collection == lexicon.Node {
			keys = append(keys, k)
		}
	}
	return keys
}
