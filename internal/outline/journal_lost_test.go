package outline_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// flakyJournal is a file journal whose saves fail while down is set (a
// database restarting under a write).
type flakyJournal struct {
	outline.Journal
	mu    sync.Mutex
	saves int
	from  int // the save from which it fails (0: never)
	down  bool
}

func (j *flakyJournal) Save(ctx context.Context, op *outline.Operation, whole bool) error {
	j.mu.Lock()
	j.saves++
	if j.from > 0 && j.saves >= j.from {
		j.down = true
	}
	down := j.down
	j.mu.Unlock()
	if down {
		return errors.New("connection refused (the journal's database is restarting)")
	}
	return j.Journal.Save(ctx, op, whole)
}

// TestJournalLostIsPartial: the journal fails after the first batch of a
// three-batch insert landed: the answer is kind partial with what landed
// and resume (never a retryable "unavailable": repeating the call would
// write the landed bullets twice); once the journal answers, resume finishes
// it from what the repository has, and every bullet is there once.
func TestJournalLostIsPartial(t *testing.T) {
	ctx := context.Background()
	repo, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	j := &flakyJournal{Journal: outline.NewFileJournal(repo.DID().String(), t.TempDir()), from: 3} // planned→running, batch 1, then down
	e, err := outline.Open(repo, outline.Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]intent.NewNode, 450)
	for i := range nodes {
		nodes[i] = intent.NewNode{Text: "bullet"}
	}
	_, err = e.Do(ctx, intent.Insert{Nodes: nodes}, false)
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want partial, got %s: %v", outline.KindName(err), err)
	}
	rep, ok := oe.Data.(outline.OpReport)
	if !ok || rep.Landed < 1 || !strings.Contains(oe.Next, "resume="+rep.ID) || !strings.Contains(oe.Next, "do not repeat") {
		t.Fatalf("the answer does not say what landed and how to go on: %+v %q", oe.Data, oe.Next)
	}
	count := func() int {
		s, err := repo.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range s.Records {
			if r.Collection == "app.bulleted.node" {
				n++
			}
		}
		return n
	}
	if got := count(); got != rep.LandedWrites {
		t.Fatalf("the repository has %d bullets, the answer says %d landed", got, rep.LandedWrites)
	}
	j.mu.Lock()
	j.down, j.from = false, 0
	j.mu.Unlock()
	if _, err := e.Resume(ctx, rep.ID, false); err != nil {
		t.Fatal(err)
	}
	if got := count(); got != 450 {
		t.Fatalf("after resume: %d bullets, want 450 (each once)", got)
	}
}

// downClaims is a file journal whose claims fail while down is set (its
// database restarting before the operation's first batch).
type downClaims struct {
	outline.Journal
	down bool
}

func (j *downClaims) Claim(ctx context.Context, id string) (bool, error) {
	if j.down {
		return false, errors.New("failed to connect: connection refused (the journal's database is restarting)")
	}
	return j.Journal.Claim(ctx, id)
}

// TestClaimDownIsUnavailable: the journal cannot take an operation's claim
// (its database restarting): nothing is sent, and the answer is kind
// unavailable, to retry; not a conflict telling to wait for a commit that
// nobody makes (the hosted load benchmark got "conflict: FATAL:
// terminating connection …; wait for it to finish, then call operations"
// during a Postgres restart). Sent again once the journal answers, the
// insert lands once.
func TestClaimDownIsUnavailable(t *testing.T) {
	ctx := context.Background()
	repo, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	j := &downClaims{Journal: outline.NewFileJournal(repo.DID().String(), t.TempDir()), down: true}
	e, err := outline.Open(repo, outline.Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "once"}}}, false)
	if !errors.Is(err, outline.ErrUnavailable) || !strings.Contains(err.Error(), "nothing was written") {
		t.Fatalf("want unavailable saying nothing was written, got %s: %v", outline.KindName(err), err)
	}
	s, err := repo.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s.Records); n != 0 {
		t.Fatalf("%d records written while the claim failed", n)
	}
	j.down = false
	if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "once"}}}, false); err != nil {
		t.Fatal(err)
	}
	if s, err = repo.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(s.Records); n != 1 {
		t.Fatalf("after the retry: %d records, want 1", n)
	}
}
