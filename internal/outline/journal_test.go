package outline_test

import (
	"context"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Two file journals on one directory (two processes): each lists the
// directory once, then again only when the other changed an operation's
// file (its generation file); its own changes are read by name. Whatever
// either writes, appends or removes, the other's next List has it.
func TestFileJournalKeepsListing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const did = "did:plc:journaltest"
	a, b := outline.NewFileJournal(did, dir), outline.NewFileJournal(did, dir)
	states := func(j *outline.FileJournal) map[string]string {
		ops, err := j.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, op := range ops {
			m[op.ID] = op.State
		}
		return m
	}
	op := func(id, state string) *outline.Operation {
		return &outline.Operation{ID: id, DID: did, State: state, Batches: []int{0}}
	}
	for i, id := range []string{"3kaaaaaaaaa22", "3kaaaaaaaab22", "3kaaaaaaaac22"} {
		if err := a.Save(ctx, op(id, outline.OpDone), true); err != nil {
			t.Fatal(i, err)
		}
	}
	if got := states(b); len(got) != 3 {
		t.Fatalf("b lists %v", got)
	}
	reads := func(j *outline.FileJournal) int { return j.Reads }
	ra, rb := reads(a), reads(b)
	for range 5 {
		states(a)
		states(b)
	}
	if reads(a) > ra+1 || reads(b) != rb {
		t.Fatalf("unchanged directory listed again: a %d→%d, b %d→%d", ra, reads(a), rb, reads(b))
	}
	// a's own changes: read by name, the directory not listed again
	ra = reads(a)
	running := op("3kaaaaaaaad22", outline.OpRunning)
	if err := a.Save(ctx, running, true); err != nil {
		t.Fatal(err)
	}
	running.State = outline.OpDone
	if err := a.Save(ctx, running, false); err != nil { // appended
		t.Fatal(err)
	}
	if got := states(a); got["3kaaaaaaaad22"] != outline.OpDone || len(got) != 4 {
		t.Fatalf("a after its own writes: %v", got)
	}
	if reads(a) != ra {
		t.Fatalf("a listed the directory again after its own writes")
	}
	// b sees all of it
	if got := states(b); got["3kaaaaaaaad22"] != outline.OpDone || len(got) != 4 {
		t.Fatalf("b after a's writes: %v", got)
	}
	// an append alone (no rename: the directory's time does not move)
	running.State = outline.OpUndone
	if err := a.Save(ctx, running, false); err != nil {
		t.Fatal(err)
	}
	if got := states(b); got["3kaaaaaaaad22"] != outline.OpUndone {
		t.Fatalf("b after a's append: %v", got)
	}
	if err := b.Remove(ctx, "3kaaaaaaaaa22"); err != nil {
		t.Fatal(err)
	}
	if got := states(a); len(got) != 3 || got["3kaaaaaaaaa22"] != "" {
		t.Fatalf("a after b's remove: %v", got)
	}
	if got := states(b); len(got) != 3 {
		t.Fatalf("b after its remove: %v", got)
	}
}
