package outline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

func lightTestOp(did, id string) *Operation {
	v := map[string]any{"$type": lexicon.Node, "text": "hello", "sortKey": "a0", "createdAt": "2026-01-01T00:00:00Z"}
	prev := store.MustValue(map[string]any{"$type": lexicon.Node, "text": "before", "sortKey": "a0", "createdAt": "2026-01-01T00:00:00Z"})
	return &Operation{ID: id, DID: did, Summary: "edit", Started: time.Unix(1, 0).UTC(), State: OpRunning,
		Writes:  []store.Write{{Op: store.Update, Collection: lexicon.Node, RKey: "3kaaaaaaaaa22", Value: v}},
		Prev:    []*store.Record{{Collection: lexicon.Node, RKey: "3kaaaaaaaaa22", CID: prev.CID(), Value: prev}},
		Batches: []int{1}}
}

// A file journal keeps what it saved as it saved it, light: a listing
// right after does not read and decode the file again (another process
// does), the listed operation holds no values, and lifecycle.full reads
// them back whole.
func TestFileJournalKeepsWhatItSaved(t *testing.T) {
	ctx := context.Background()
	const did = "did:plc:journallight"
	dir := t.TempDir()
	a, b := newFileJournal(did, dir), newFileJournal(did, dir)
	if _, err := a.List(ctx); err != nil {
		t.Fatal(err)
	}
	op := lightTestOp(did, "3kbbbbbbbbb22")
	if err := a.Save(ctx, op, true); err != nil {
		t.Fatal(err)
	}
	op.State, op.Landed, op.Commits = OpDone, 1, []string{"c1"}
	if err := a.Save(ctx, op, false); err != nil { // appended
		t.Fatal(err)
	}
	parsed := a.Parsed
	ops, err := a.List(ctx)
	if err != nil || len(ops) != 1 {
		t.Fatalf("a lists %v, %v", ops, err)
	}
	if a.Parsed != parsed {
		t.Fatalf("a decoded its own file again after saving it (%d → %d)", parsed, a.Parsed)
	}
	got := ops[0]
	if got.State != OpDone || got.Landed != 1 || !got.light || got.Writes[0].Value != nil || len(got.Prev) != 1 || got.Prev[0] != op.Prev[0] || got.Writes[0].RKey != "3kaaaaaaaaa22" {
		t.Fatalf("a's kept operation (the records replaced kept as saved): %+v", got)
	}
	// read whole by a: the values from the file, the records replaced as kept
	fa, err := (&lifecycle{j: a}).full(ctx, got)
	if err != nil || fa.light || fa.Writes[0].Value["text"] != "hello" || fa.Prev[0] != op.Prev[0] || fa.State != OpDone {
		t.Fatalf("full from a: %+v, %v", fa, err)
	}
	// the caller's operation changing afterwards does not change the kept one
	op.Commits[0] = "changed"
	if ops, _ := a.List(ctx); ops[0].Commits[0] != "c1" {
		t.Fatalf("kept operation shares the caller's commits: %v", ops[0].Commits)
	}
	// another process reads it (light)
	ops, err = b.List(ctx)
	if err != nil || len(ops) != 1 || ops[0].State != OpDone || !ops[0].light || ops[0].Prev != nil || b.Parsed == 0 {
		t.Fatalf("b lists %+v, %v (parsed %d)", ops, err, b.Parsed)
	}
	l := &lifecycle{j: b}
	full, err := l.full(ctx, ops[0])
	if err != nil {
		t.Fatal(err)
	}
	if full.light || full.Writes[0].Value["text"] != "hello" || full.Prev[0] == nil || full.Prev[0].Value.Str("text") != "before" || full.State != OpDone {
		t.Fatalf("full: %+v", full)
	}
}

// A light operation written whole (by a process that did not write its
// file: it cannot append) is read whole first, so its writes' values are
// not lost.
func TestFileJournalLightSavedWhole(t *testing.T) {
	ctx := context.Background()
	const did = "did:plc:journallight"
	dir := t.TempDir()
	a, b := newFileJournal(did, dir), newFileJournal(did, dir)
	op := lightTestOp(did, "3kccccccccc22")
	op.State, op.Landed = OpDone, 1
	if err := a.Save(ctx, op, true); err != nil {
		t.Fatal(err)
	}
	l := &lifecycle{j: b}
	listed, err := l.entry(ctx, op.ID)
	if err != nil || !listed.light {
		t.Fatalf("entry: %+v, %v", listed, err)
	}
	if err := l.move(ctx, listed, phaseUndone, step{}); err != nil {
		t.Fatal(err)
	}
	back, err := a.Get(ctx, op.ID)
	if err != nil || back == nil {
		t.Fatalf("get: %v, %v", back, err)
	}
	if back.State != OpUndone || len(back.Prev) != 1 || back.Writes[0].Value["text"] != "hello" || back.Prev[0] == nil || back.Prev[0].CID != op.Prev[0].CID {
		t.Fatalf("after b recorded it undone: %+v (writes %+v)", back, back.Writes)
	}
}

// The gate skips validating a write only when its value still encodes to
// the CID the repository held (an undo's restore); a value that does not
// is validated like any other.
func TestGateHeldValidatedUnlessSame(t *testing.T) {
	tr := placeTree([]string{"a0"})
	bad := map[string]any{"$type": lexicon.Node, "sortKey": "a1", "createdAt": "2026-01-01T00:00:00Z"} // no text: invalid
	good := map[string]any{"$type": lexicon.Node, "text": "x", "sortKey": "a1", "createdAt": "2026-01-01T00:00:00Z"}
	plan := &Plan{Writes: []store.Write{{Op: store.Create, Collection: lexicon.Node, RKey: "3kddddddddd22", Value: bad}}}
	if err := validateWrites(tr, plan); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("invalid record passed: %v", err)
	}
	plan.held = []string{store.MustValue(good).CID()} // held another value
	if err := validateWrites(tr, plan); !errors.Is(err, ErrInvalidInput) {
		t.Fatalf("invalid record passed under another record's CID: %v", err)
	}
	plan.held = []string{store.MustValue(bad).CID()} // those very bytes were held
	if err := validateWrites(tr, plan); err != nil {
		t.Fatalf("record put back as held validated again: %v", err)
	}
}

// An operation of deletes only that this process saved is read whole from
// what it kept (the records the deletes replaced), and another process
// reads the same from the file.
func TestFileJournalDeletesWhole(t *testing.T) {
	ctx := context.Background()
	const did = "did:plc:journallight"
	dir := t.TempDir()
	a, b := newFileJournal(did, dir), newFileJournal(did, dir)
	op := lightTestOp(did, "3keeeeeeeee22")
	op.Writes[0] = store.Write{Op: store.Delete, Collection: lexicon.Node, RKey: op.Writes[0].RKey}
	op.State, op.Landed = OpDone, 1
	if err := a.Save(ctx, op, true); err != nil {
		t.Fatal(err)
	}
	for name, j := range map[string]*fileJournal{"a": a, "b": b} {
		l := &lifecycle{j: j}
		full, err := l.get(ctx, op.ID)
		if err != nil || full.light || len(full.Writes) != 1 || full.Writes[0].Op != store.Delete || len(full.Prev) != 1 || full.Prev[0] == nil ||
			full.Prev[0].CID != op.Prev[0].CID || !full.Prev[0].Value.Equal(op.Prev[0].Value) {
			t.Fatalf("%s reads it whole: %+v, %v", name, full, err)
		}
	}
}
