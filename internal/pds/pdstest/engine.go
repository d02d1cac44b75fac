package pdstest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// The engine over the PDS backend, as the tests of internal/pds and of its
// fault matrix (internal/pds/faults, a test binary of its own) drive it:
// accounts, logins, operations and their reports, the repository read
// back.

var accounts atomic.Int64

// NewAccount creates a fresh account on s.
func NewAccount(t testing.TB, s *Server) *Account {
	t.Helper()
	a, err := s.CreateAccount(context.Background(), fmt.Sprintf("user%d", accounts.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Login opens a Repo for a as the server would: app password, session kept
// in dir.
func Login(t testing.TB, s *Server, a *Account, dir string, hc *http.Client) *pds.Repo {
	t.Helper()
	c, did, err := pds.Login{PDS: s.URL, Identifier: a.Handle, Password: a.AppPassword, Dir: dir, HTTP: hc}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if did != a.DID {
		t.Fatalf("logged in as %s, want %s", did, a.DID)
	}
	return pds.New(c, did)
}

// OpReport is what the tests need to know of an operation.
type OpReport struct {
	ID                   string
	State                string
	Batches, Landed      int
	Writes, LandedWrites int
	UnknownWrites        int
	Reason               string
}

// ReportOf is the report of the operation out or err tells of (nil: none).
func ReportOf(out *outline.Outcome, err error) *OpReport {
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
	return &OpReport{ID: r.ID, State: r.State, Batches: r.Batches, Landed: r.Landed, Writes: r.Writes, LandedWrites: r.LandedWrites, UnknownWrites: r.UnknownWrites, Reason: r.Reason}
}

// NewEngine is the engine as the server opens it: operations recorded in
// dir.
func NewEngine(repo store.Repository, dir string) (*outline.Engine, error) {
	e := outline.New(repo)
	return e, e.KeepOperations(dir)
}

// InsertOp inserts nodes as the last children of parent ("" = top level).
func InsertOp(ctx context.Context, eng *outline.Engine, parent string, nodes []intent.NewNode) (*OpReport, error) {
	out, err := eng.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{Parent: parent}, Nodes: nodes}.Plan(p)
	})
	return ReportOf(out, err), err
}

// DeleteSubtreeOp deletes key and everything under it.
func DeleteSubtreeOp(ctx context.Context, eng *outline.Engine, key string) (*OpReport, error) {
	out, err := eng.DoFunc(ctx, false, func(p *outline.Planner) error { return intent.Delete{Node: key, Children: "subtree"}.Plan(p) })
	return ReportOf(out, err), err
}

// ResumeOp finishes the incomplete operation id.
func ResumeOp(ctx context.Context, eng *outline.Engine, id string) (*OpReport, error) {
	out, err := eng.Resume(ctx, id, false)
	return ReportOf(out, err), err
}

// UndoOp rolls back operation id ("" = the newest one).
func UndoOp(ctx context.Context, eng *outline.Engine, id string) (*OpReport, error) {
	out, err := eng.Undo(ctx, 1, id, false)
	return ReportOf(out, err), err
}

// IncompleteOps lists the operations left incomplete.
func IncompleteOps(eng *outline.Engine) []OpReport {
	var out []OpReport
	for _, r := range eng.Incomplete() {
		out = append(out, OpReport{ID: r.ID, State: r.State, Batches: r.Batches, Landed: r.Landed, Writes: r.Writes, LandedWrites: r.LandedWrites, Reason: r.Reason})
	}
	return out
}

// ErrorKind names the engine's sentinel an error wraps.
func ErrorKind(err error) string {
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

// ReadBack reads did's records straight from s (the oracle) and makes the
// outline of them.
func ReadBack(t testing.TB, ctx context.Context, s *Server, did string) *Tree {
	t.Helper()
	d := MustDID(t, did)
	recs, err := ReadRecords(ctx, s.URL, d)
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	return Outline(d, recs)
}

// RecordCount is how many records tr holds.
func RecordCount(tr *Tree) int {
	n := 0
	for _, c := range tr.Counts {
		n += c
	}
	return n
}

// MustDID parses s, failing t if it is not a DID.
func MustDID(t testing.TB, s string) syntax.DID {
	t.Helper()
	d, err := syntax.ParseDID(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
