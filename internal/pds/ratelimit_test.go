package pds_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// One 429 with Retry-After: 86400 and no RateLimit-Policy in the middle of
// a 600-bullet insert: the pause is capped at the budget's hour (not a
// day) and the result says so; after a restart, resume and undo are
// refused with the exact time they can run (UTC and seconds from now, in
// the text and the structured details); an hour on, the resume probes and
// finishes. Before, the pause held for 24 hours, across restarts, and
// neither refusal said until when in its details.
func TestHugeRetryAfterCappedAtAnHour(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	proxy := pdstest.NewFaultProxy(t, srv.URL)
	dir := t.TempDir()
	open := func(now func() time.Time) (*outline.Engine, *budget.Ledger) {
		t.Helper()
		c, _, err := pds.Login{PDS: proxy.URL, Identifier: a.Handle, Password: a.AppPassword, Dir: dir}.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := pds.New(c, a.DID)
		l, err := budget.New(filepath.Join(dir, "budget.json"))
		if err != nil {
			t.Fatal(err)
		}
		if now != nil {
			l.Now = now
		}
		r.Budget = l
		e, err := pdstest.NewEngine(r, dir)
		if err != nil {
			t.Fatal(err)
		}
		return e, l
	}
	e, l := open(nil)
	proxy.Arm(pdstest.Fault{Method: pdstest.ApplyWrites, Kind: pdstest.RateLimit, Nth: 2, RetryAfter: "86400", NoPolicy: true})
	nodes := make([]intent.NewNode, 600)
	for i := range nodes {
		nodes[i] = intent.NewNode{Text: fmt.Sprint("r", i)}
	}
	start := time.Now()
	_, err := pdstest.InsertOp(ctx, e, "", nodes)
	proxy.Disarm()
	var oe *outline.Error
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrIncomplete) {
		t.Fatalf("want an incomplete operation, got %v", err)
	}
	rep := oe.Data.(outline.OpReport)
	t.Logf("stopped: %s", oe.Msg)
	if rep.Landed != 1 || rep.Batches != 3 {
		t.Fatalf("landed %d of %d batches, want 1 of 3", rep.Landed, rep.Batches)
	}
	if got := pdstest.RecordCount(pdstest.ReadBack(t, ctx, srv, a.DID.String())); got != 200 {
		t.Fatalf("the repository holds %d records, want the first batch's 200", got)
	}
	// capped at the hour, said so
	paused := l.PausedUntil()
	if paused.Before(start.Add(59*time.Minute)) || paused.After(time.Now().Add(time.Hour+time.Second)) {
		t.Fatalf("paused until %s (%s from the start), want about an hour", paused.UTC().Format(time.RFC3339), paused.Sub(start).Round(time.Second))
	}
	for _, want := range []string{"asked to wait 86400 s without naming its limit (no RateLimit-Policy)", "capped at 1 h"} {
		if !strings.Contains(oe.Msg, want) || !strings.Contains(rep.Reason, want) {
			t.Errorf("the result does not say %q:\ntext: %s\nreason: %s", want, oe.Msg, rep.Reason)
		}
	}
	checkWhen(t, "the stop", oe.Msg, rep.RetryAt, rep.RetryInSeconds, paused)

	// a restart: a new process on the same data directory
	e2, _ := open(nil)
	_, err = e2.Resume(ctx, rep.ID, false)
	if !errors.As(err, &oe) {
		t.Fatalf("resume during the pause: want a refusal, got %v", err)
	}
	t.Logf("resume refused: %s", oe.Error())
	rrep, ok := oe.Data.(outline.OpReport)
	if !ok {
		t.Fatalf("resume refusal details %T", oe.Data)
	}
	checkWhen(t, "the resume refusal", oe.Msg, rrep.RetryAt, rrep.RetryInSeconds, paused)
	if !strings.Contains(oe.Msg, "no RateLimit-Policy") {
		t.Errorf("the resume refusal does not repeat why the pause is an hour: %s", oe.Msg)
	}
	_, err = e2.Undo(ctx, 1, rep.ID, false)
	if !errors.As(err, &oe) || !errors.Is(err, outline.ErrBudget) {
		t.Fatalf("undo during the pause: want a budget refusal, got %v", err)
	}
	t.Logf("undo refused: %s", oe.Error())
	ex, ok := oe.Data.(*budget.Exceeded)
	if !ok {
		t.Fatalf("undo refusal details %T", oe.Data)
	}
	checkWhen(t, "the undo refusal", oe.Msg, ex.FreeAt.UTC().Format(time.RFC3339), ex.WaitSeconds, paused)
	if !strings.Contains(ex.Note, "no RateLimit-Policy") || !strings.Contains(oe.Msg, ex.Note) {
		t.Errorf("the undo refusal does not say the pause was capped: note %q, text %s", ex.Note, oe.Msg)
	}

	// an hour and a minute later (the ledger's clock): the next write
	// probes, and the operation finishes
	later := time.Now().Add(time.Hour + time.Minute)
	e3, _ := open(func() time.Time { return later })
	if _, err := e3.Resume(ctx, rep.ID, false); err != nil {
		t.Fatalf("resume after the capped pause: %v", err)
	}
	if got := pdstest.RecordCount(pdstest.ReadBack(t, ctx, srv, a.DID.String())); got != 600 {
		t.Fatalf("after the resume the repository holds %d records, want 600", got)
	}
}

var whenRE = regexp.MustCompile(`at (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ), in (\d+) s`)

// checkWhen checks that a refusal names the end of the pause as an
// absolute UTC time and seconds from now, in its text and its details.
func checkWhen(t *testing.T, what, text, at string, in int64, paused time.Time) {
	t.Helper()
	want := paused.UTC().Format(time.RFC3339)
	m := whenRE.FindStringSubmatch(text)
	if m == nil || m[1] != want {
		t.Errorf("%s does not say it can run at %s (UTC, seconds from now): %s", what, want, text)
	} else if s, _ := strconv.Atoi(m[2]); s < 3000 || s > 3601 {
		t.Errorf("%s says in %d s, want about an hour", what, s)
	}
	if at != want || in < 3000 || in > 3601 {
		t.Errorf("%s details: at %q in %d s, want %s in about 3600 s", what, at, in, want)
	}
}
