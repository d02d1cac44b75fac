package outline_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// gatedRepo is an embedded store whose Apply waits for the send gate as the
// PDS backend's does (store.SendGated), and notes, for each batch it sends,
// whether the journal held its operation then.
type gatedRepo struct {
	*store.Local
	j        outline.Journal
	opsDir   string // with no j: the engine's file journal
	mu       sync.Mutex
	sent     int
	unlisted int // batches sent while the journal had no running operation
}

func (r *gatedRepo) GatesSend() {}

func (r *gatedRepo) Apply(ctx context.Context, swap string, ws []store.Write) (*store.Result, error) {
	if err := store.SendGate(ctx); err != nil {
		return nil, err
	}
	if r.j == nil { // a file journal: its records in opsDir
		files, _ := filepath.Glob(filepath.Join(r.opsDir, "*.json"))
		r.mu.Lock()
		r.sent++
		if len(files) != r.sent {
			r.unlisted++
		}
		r.mu.Unlock()
		return r.Local.Apply(ctx, swap, ws)
	}
	ops, err := r.j.List(ctx)
	running := false
	for _, op := range ops {
		running = running || op.State == outline.OpRunning
	}
	r.mu.Lock()
	r.sent++
	if err != nil || !running {
		r.unlisted++
	}
	r.mu.Unlock()
	return r.Local.Apply(ctx, swap, ws)
}

// A write on a repository that gates its sends (the PDS backend) records
// its operation while the repository prepares the first batch (its points
// charged): the batch leaves only once the record is written, and not at
// all when it cannot be (the call fails, nothing written, as before).
func TestSendGateWaitsForTheRecord(t *testing.T) {
	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	j := &flakyJournal{Journal: outline.NewFileJournal(l.DID().String(), t.TempDir())}
	repo := &gatedRepo{Local: l, j: j}
	e, err := outline.Open(repo, outline.Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "one"}}}, false); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	if repo.sent != 3 || repo.unlisted != 0 {
		t.Fatalf("%d batches sent, %d of them before their operation was recorded", repo.sent, repo.unlisted)
	}
	// the journal refuses the plan's record: nothing is sent
	j.mu.Lock()
	j.down = true
	j.mu.Unlock()
	_, err = e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "two"}}}, false)
	if err == nil || !strings.Contains(err.Error(), "the journal's database is restarting") {
		t.Fatalf("want the journal's error, got %v", err)
	}
	if repo.sent != 3 {
		t.Fatalf("a batch was sent whose operation could not be recorded (%d sent)", repo.sent)
	}
	s, err := l.Snapshot(ctx)
	if err != nil || len(s.Records) != 3 {
		t.Fatalf("%v: %d records, want 3", err, len(s.Records))
	}
}

// The same with the engine's own file journal, whose record of a new
// operation is written up to its rename before the batch leaves (its
// directory synced meanwhile): the file is there when the batch is sent.
func TestSendGateFileJournal(t *testing.T) {
	ctx := context.Background()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	repo := &gatedRepo{Local: l, opsDir: filepath.Join(dir, "ops")}
	e, err := outline.Open(repo, outline.Options{Operations: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "one"}}}, false); err != nil {
			t.Fatalf("insert %d: %v", i, err)
		}
	}
	if repo.sent != 3 || repo.unlisted != 0 {
		t.Fatalf("%d batches sent, %d of them before their operation's file was there", repo.sent, repo.unlisted)
	}
	ops, err := e.Operations()
	if err != nil || len(ops) != 3 || ops[0].State != outline.OpDone {
		t.Fatalf("%v: %+v", err, ops)
	}
}
