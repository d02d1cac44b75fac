package outline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// The transition table, as the design says it (docs/writes.md, "operation"):
// planned → running (batches sent) → landed | unknown | stopped;
// stopped/unknown → resumed (running) → …; landed → undone; and forgotten
// for an operation of which nothing landed.
var wantTransitions = map[phase][]phase{
	phasePlanned:   {phaseRunning, phaseForgotten},
	phaseRunning:   {phaseRunning, phaseLanded, phaseStopped, phaseUnknown, phaseForgotten},
	phaseStopped:   {phaseRunning, phaseStopped, phaseUndone, phaseForgotten},
	phaseUnknown:   {phaseRunning, phaseStopped, phaseUndone, phaseForgotten},
	phaseLanded:    {phaseUndone},
	phaseUndone:    nil,
	phaseForgotten: nil,
}

var allPhases = []phase{phasePlanned, phaseRunning, phaseLanded, phaseStopped, phaseUnknown, phaseUndone, phaseForgotten}

// opIn is a two-batch operation in phase p (nothing landed).
func opIn(t *testing.T, p phase) *Operation {
	t.Helper()
	w := func(k string) store.Write {
		return store.Write{Op: store.Create, Collection: lexicon.Node, RKey: k, Value: map[string]any{"$type": lexicon.Node, "text": k, "sortKey": "a", "createdAt": "2026-12-04T10:00:00.000Z"}}
	}
	op := &Operation{ID: "3lifecycle" + string(p), DID: "did:plc:lifecycle", Summary: "test", Writes: []store.Write{w("k1"), w("k2")},
		Prev: make([]*store.Record, 2), Batches: []int{1, 2}}
	switch p {
	case phasePlanned:
		op.State = opPlanned
	case phaseRunning:
		op.State = OpRunning
	case phaseLanded:
		op.State, op.Landed, op.Commits = OpDone, 2, []string{"c1", "c2"}
	case phaseStopped:
		op.State = OpIncomplete
	case phaseUnknown:
		op.State, op.Unknown = OpIncomplete, true
	case phaseUndone:
		op.State, op.Landed, op.Commits = OpUndone, 2, []string{"c1", "c2"}
	case phaseForgotten:
		op.State = opForgotten
	}
	if got, err := phaseOf(op); err != nil || got != p {
		t.Fatalf("phaseOf(%s) = %s, %v", p, got, err)
	}
	return op
}

// TestLifecycleTable: the table is the one the design gives, every allowed
// transition moves the operation and records it (read back from the
// journal), and every other one is refused with an error, the operation
// and the journal unchanged.
func TestLifecycleTable(t *testing.T) {
	ctx := context.Background()
	if !maps.EqualFunc(transitions, wantTransitions, func(a, b []phase) bool { return slices.Equal(a, b) }) || len(transitions) != len(allPhases) {
		t.Fatalf("transition table %v, want %v", transitions, wantTransitions)
	}
	for _, from := range allPhases {
		for _, to := range allPhases {
			t.Run(fmt.Sprintf("%s→%s", from, to), func(t *testing.T) {
				j := newMemJournal()
				l := &lifecycle{j: j}
				op := opIn(t, from)
				if from != phasePlanned && from != phaseForgotten {
					if err := j.Save(ctx, op, true); err != nil {
						t.Fatal(err)
					}
				}
				before := *op
				err := l.move(ctx, op, to, step{reason: "why"})
				recorded, _ := j.Get(ctx, op.ID)
				if !slices.Contains(wantTransitions[from], to) {
					if err == nil || !strings.Contains(err.Error(), "no transition from "+string(from)+" to "+string(to)) {
						t.Fatalf("forbidden transition: err %v", err)
					}
					if op.State != before.State || op.Unknown != before.Unknown || op.Reason != before.Reason {
						t.Fatalf("refused, yet the operation changed: %+v", op)
					}
					if (recorded == nil) != (from == phasePlanned || from == phaseForgotten) || (recorded != nil && recorded.State != before.State) {
						t.Fatalf("refused, yet the journal changed: %+v", recorded)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := phaseOf(op); got != to {
					t.Fatalf("moved to %s, want %s", got, to)
				}
				if to == phaseForgotten {
					if recorded != nil {
						t.Fatalf("forgotten, still in the journal: %+v", recorded)
					}
					return
				}
				if recorded == nil {
					t.Fatal("not recorded")
				}
				if got, _ := phaseOf(recorded); got != to {
					t.Fatalf("recorded as %s, want %s", got, to)
				}
			})
		}
	}
}

// TestLifecycleRefusesLosingLanded: a step that would forget an operation
// some of which landed, or count more batches landed than it has, is
// refused.
func TestLifecycleRefusesLosingLanded(t *testing.T) {
	ctx := context.Background()
	l := &lifecycle{j: newMemJournal()}
	op := opIn(t, phaseRunning)
	if err := l.move(ctx, op, phaseRunning, step{landed: []string{"c1"}}); err != nil {
		t.Fatal(err)
	}
	if err := l.move(ctx, op, phaseForgotten, step{}); err == nil || !strings.Contains(err.Error(), "cannot forget") {
		t.Fatalf("forgetting an operation with a landed batch: %v", err)
	}
	if err := l.move(ctx, op, phaseRunning, step{landed: []string{"c2", "c3"}}); err == nil {
		t.Fatal("3 batches landed of 2 accepted")
	}
	if op.Landed != 1 || op.State != OpRunning {
		t.Fatalf("after refusals: %+v", op)
	}
}
