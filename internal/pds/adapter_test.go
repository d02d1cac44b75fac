package pds_test

import (
	"context"
	"errors"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// ---- engine adapter: the tests call the engine through these ----
//
// internal/pds/faults (the fault matrix, a test binary of its own) keeps a
// copy of them in its adapter_test.go: change both together.

// opReport is what the matrix needs to know of an operation.
type opReport struct {
	ID                   string
	State                string
	Batches, Landed      int
	Writes, LandedWrites int
	UnknownWrites        int
	Reason               string
}

func reportOf(out *outline.Outcome, err error) *opReport {
	var r *outline.OpReport
	if out != nil && out.Op != nil {
		r = out.Op
	}
	var oe *outline.Error
	if r == nil && errors.As(err, &oe) {
		switch d := oe.Data.(type) {
		case outline.OpReport:
			r = &d
		case *outline.OpReport:
			r = d
		}
	}
	if r == nil {
		return nil
	}
	return &opReport{ID: r.ID, State: r.State, Batches: r.Batches, Landed: r.Landed, Writes: r.Writes, LandedWrites: r.LandedWrites, UnknownWrites: r.UnknownWrites, Reason: r.Reason}
}

// newEngine is the engine as the server opens it: operations recorded in
// dir.
func newEngine(repo store.Repository, dir string) (*outline.Engine, error) {
	e := outline.New(repo)
	return e, e.KeepOperations(dir)
}

// insertOp inserts nodes as the last children of parent ("" = top level).
func insertOp(ctx context.Context, eng *outline.Engine, parent string, nodes []intent.NewNode) (*opReport, error) {
	out, err := eng.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{Parent: parent}, Nodes: nodes}.Plan(p)
	})
	return reportOf(out, err), err
}

// undoOp rolls back operation id ("" = the newest one).
func undoOp(ctx context.Context, eng *outline.Engine, id string) (*opReport, error) {
	out, err := eng.Undo(ctx, 1, id, false)
	return reportOf(out, err), err
}

// incompleteOps lists the operations left incomplete.
func incompleteOps(eng *outline.Engine) []opReport {
	var out []opReport
	for _, r := range eng.Incomplete() {
		out = append(out, opReport{ID: r.ID, State: r.State, Batches: r.Batches, Landed: r.Landed, Writes: r.Writes, LandedWrites: r.LandedWrites, Reason: r.Reason})
	}
	return out
}

// errorKind names the engine's sentinel an error wraps.
func errorKind(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{
		{outline.ErrIncomplete, "incomplete"}, {outline.ErrBudget, "budget"}, {outline.ErrUnavailable, "unavailable"},
		{outline.ErrTimeout, "timeout"}, {outline.ErrConflict, "conflict"}, {outline.ErrCancelled, "cancelled"},
	} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	return "unclassified"
}

// ---- reading the repository back ----

// readBack reads did's records straight from the reference PDS (the
// oracle) and makes the outline of them.
func readBack(t *testing.T, ctx context.Context, did string) *pdstest.Tree {
	t.Helper()
	d := mustDID(t, did)
	recs, err := pdstest.ReadRecords(ctx, srv.URL, d)
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	return pdstest.Outline(d, recs)
}

// recordCount is how many records tr holds.
func recordCount(tr *pdstest.Tree) int {
	n := 0
	for _, c := range tr.Counts {
		n += c
	}
	return n
}

func mustDID(t *testing.T, s string) syntax.DID {
	t.Helper()
	d, err := syntax.ParseDID(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
