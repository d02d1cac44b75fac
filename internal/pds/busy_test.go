package pds_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// busyWriter is another client of the same account committing an edit of
// one bullet (elsewhere in the repository) every interval, without
// swapCommit, as a person's app or a sync tool does. It is bounded: it
// stops after max commits, after limit, or when ctx ends, whichever comes
// first. ready is closed after its third commit.
type busyWriter struct {
	commits atomic.Int64
	errs    atomic.Int64
	ready   chan struct{}
	done    chan struct{}
}

func startBusyWriter(t *testing.T, ctx context.Context, r *pds.Repo, key string, interval time.Duration, max int, limit time.Duration) *busyWriter {
	t.Helper()
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var value map[string]any
	for _, rec := range s.Records {
		if rec.Collection == lexicon.Node && rec.RKey == key {
			value = rec.Value.Map()
		}
	}
	if value == nil {
		t.Fatalf("busy writer: bullet %s not found", key)
	}
	w := &busyWriter{ready: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, limit)
	go func() {
		defer close(w.done)
		defer cancel()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for i := 0; i < max; i++ {
			value["text"] = fmt.Sprintf("elsewhere, edit %d", i)
			cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := r.Apply(cctx, "", []store.Write{{Op: store.Update, Collection: lexicon.Node, RKey: key, Value: value}})
			ccancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				w.errs.Add(1)
			} else if w.commits.Add(1) == 3 {
				close(w.ready)
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// TestBusyWriterWritesGetThrough: while another client of the account
// commits elsewhere in the repository every 50, 15 and 5 ms (the last two
// as fast as the reference PDS allows on a small machine: its commit takes
// longer), the agent inserts bullets one after another (insert_after), with
// its repository read by requests (polled) and with the commit stream
// followed. Read back, every insert that landed is there once, in the order
// written, with strictly increasing sortKeys (as bytes); one that did not
// land was refused with a typed conflict that says why, and wrote nothing.
// That every insert lands against the 50 and 15 ms writers is checked with
// BULLETED_BUSY_GOAL=1 (below). Latency and attempts
// (applyWrites sent) per insert are logged (the busy-writer table); only a
// generous bound on latency is asserted.
//
// In the suite (a busy machine's too) it runs 20 inserts per rate, each rate
// in one of the two modes, and checks what must hold however slow the
// machine is: the read-back, the typed refusal that says why. The table (60
// inserts, both modes at every rate) and the goal (every insert lands
// against the 50 and 15 ms writers) with BULLETED_BUSY_GOAL=1, on a quiet
// machine: on a loaded one the PDS's commit and this server's round trip
// slow down while the writer keeps its pace.
func TestBusyWriterWritesGetThrough(t *testing.T) {
	goal := os.Getenv("BULLETED_BUSY_GOAL") != ""
	inserts, maxFailures := 20, 3
	if goal {
		inserts = 60
	}
	for _, mode := range []string{"polled", "followed"} {
		for i, interval := range []time.Duration{50 * time.Millisecond, 15 * time.Millisecond, 5 * time.Millisecond} {
			if !goal && (i%2 == 0) != (mode == "polled") {
				continue // polled at 50 and 5 ms, followed at 15 ms
			}
			t.Run(mode+"/"+interval.String(), func(t *testing.T) {
				busyRun(t, mode == "followed", interval, inserts, maxFailures, goal)
			})
		}
	}
}

func busyRun(t *testing.T, follow bool, interval time.Duration, inserts, maxFailures int, goal bool) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	r := pdstest.Login(t, srv, a, dir, nil)
	ledger, err := budget.New(filepath.Join(dir, "budget.json"))
	if err != nil {
		t.Fatal(err)
	}
	r.Budget = ledger
	e, err := pdstest.NewEngine(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	top := enginetest.Insert(t, e, outline.Position{}, "Agent's list")[0]
	elsewhere := enginetest.Insert(t, e, outline.Position{}, "Elsewhere")[0]
	if follow {
		r.Directory = pds.Directory(srv.PLCURL)
		fctx, fstop := context.WithCancel(ctx)
		followed := make(chan struct{})
		defer func() { fstop(); <-followed }()
		go func() {
			defer close(followed)
			r.Follow(fctx, func() {}, func(err error) { t.Logf("follow: %v", err) })
		}()
		// wait for the stream to be live (it settles a while after catching up)
		deadline := time.After(time.Minute) // a bound for a stuck stream, not a speed check
		tick := time.NewTicker(20 * time.Millisecond)
		for !r.Live() {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatal("the stream did not go live")
			}
		}
		tick.Stop()
	}

	other := pdstest.Login(t, srv, a, t.TempDir(), nil)
	wctx, stop := context.WithCancel(ctx)
	w := startBusyWriter(t, wctx, other, elsewhere, interval, 20000, 3*time.Minute)
	defer func() { stop(); <-w.done }()
	select {
	case <-w.ready:
	case <-w.done:
		t.Fatalf("the busy writer stopped before its third commit (%d errors)", w.errs.Load())
	}

	var keys []string
	var lat []time.Duration
	var attempts []int
	failures, tried := 0, 0
	spent := budget.Limit - ledger.Left()
	prev := ""
	began := w.commits.Load()
	start := time.Now()
	for i := 0; i < inserts && failures < maxFailures; i++ {
		tried++
		pos := outline.Position{Parent: top, Where: "last"}
		if prev != "" {
			pos = outline.Position{Parent: top, After: prev}
		}
		sent := r.Stats.Writes.Load()
		t0 := time.Now()
		ictx, cancel := context.WithTimeout(ctx, time.Minute)
		out, err := e.DoFunc(ictx, false, func(p *outline.Planner) error {
			return intent.Insert{Pos: pos, Nodes: []intent.NewNode{{Text: fmt.Sprintf("item %02d", i)}}}.Plan(p)
		})
		cancel()
		d := time.Since(t0)
		if err != nil {
			if k := pdstest.ErrorKind(err); k != "conflict" {
				t.Fatalf("insert %d: refused with kind %q, want a typed conflict: %v", i+1, k, err)
			}
			// never silent about why: the refusal says it is another
			// client's commits and what guards every write
			if msg := err.Error(); !strings.Contains(msg, "another client committed") || !strings.Contains(msg, "swapCommit") {
				t.Errorf("insert %d: the refusal does not say why: %v", i+1, err)
			}
			failures++
			t.Logf("insert %d of %d not written (after %v, %d applyWrites): %v", i+1, inserts, d.Round(time.Millisecond), r.Stats.Writes.Load()-sent, err)
			continue
		}
		prev = out.Plan.Created[0].RKey
		keys = append(keys, prev)
		lat = append(lat, d)
		if d > 300*time.Millisecond {
			t.Logf("insert %d took %v (%d applyWrites; stream waits timed out so far: %d)", i+1, d.Round(time.Millisecond), r.Stats.Writes.Load()-sent, r.Stats.StreamTimeouts.Load())
		}
		attempts = append(attempts, int(r.Stats.Writes.Load()-sent))
	}
	elapsed := time.Since(start)
	others := w.commits.Load() - began
	stop()
	<-w.done

	// read back: every write that landed present once, in order, no tie;
	// nothing of a refused one
	tr := pdstest.ReadBack(t, ctx, srv, a.DID.String())
	if p := tr.CheckConsistent(false); len(p) > 0 {
		t.Fatalf("read back: %v", p)
	}
	var got, sortKeys []string
	for _, n := range tr.Nodes[top].Children {
		got = append(got, n.Rec.RKey)
		sortKeys = append(sortKeys, n.SortKey())
	}
	if !slices.Equal(got, keys) {
		t.Fatalf("the agent's list read back: %d bullets %v, want the %d that landed, in order: %v", len(got), got, len(keys), keys)
	}
	for i := 1; i < len(sortKeys); i++ {
		if sortKeys[i-1] >= sortKeys[i] {
			t.Fatalf("sortKeys not strictly increasing (as bytes) at %d: %q, %q", i, sortKeys[i-1], sortKeys[i])
		}
	}

	figures := "none landed"
	if len(lat) > 0 {
		sorted := slices.Clone(lat)
		slices.Sort(sorted)
		pct := func(p float64) time.Duration { return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))] }
		total, most := 0, 0
		for _, n := range attempts {
			total += n
			most = max(most, n)
		}
		figures = fmt.Sprintf("latency p50 %v p99 %v max %v; applyWrites per landed insert mean %.2f max %d",
			pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), sorted[len(sorted)-1].Round(time.Millisecond),
			float64(total)/float64(len(attempts)), most)
		// a generous bound, not the goal (p99 within 1 s)
		if worst := sorted[len(sorted)-1]; worst > 20*time.Second {
			t.Errorf("an insert took %v", worst)
		}
	}
	t.Logf("BUSY follow=%v writer every %v: %d of %d inserts landed in %v; %s; the other client committed %d times (%.0f/s, %d errors); points spent %d",
		follow, interval, len(keys), tried, elapsed.Round(time.Millisecond), figures,
		others, float64(others)/elapsed.Seconds(), w.errs.Load(), budget.Limit-ledger.Left()-spent)
	if others < 3 {
		t.Errorf("the other client committed only %d times while the agent wrote: the repository was not busy", others)
	}
	// the goal (BULLETED_BUSY_GOAL=1, a quiet machine): every write lands
	// against a writer every 50 or 15 ms (66 commits a second: an attempt
	// wins with a chance of about one in four; 24 attempts). A writer
	// committing back to back (5 ms: its next commit is sent the moment its
	// last one is answered, before any other client can know that commit)
	// leaves no window a write guarded by swapCommit can land in: refused,
	// said why (above), nothing written.
	if goal && interval >= 15*time.Millisecond && len(keys) < tried {
		t.Errorf("writer every %v: %d of %d inserts landed, want all", interval, len(keys), tried)
	}
}

// TestBusyRefusalSaysWhatChanged: a write planned on a state another
// client changed what it depends on since (its anchor moved under another
// parent, its parent deleted) is refused for its swapCommit, planned
// again, and refused with a typed error that says what the other client
// changed; nothing of it is written.
func TestBusyRefusalSaysWhatChanged(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	r := pdstest.Login(t, srv, a, dir, nil)
	e, err := pdstest.NewEngine(r, dir)
	if err != nil {
		t.Fatal(err)
	}
	other := outline.New(pdstest.Login(t, srv, a, t.TempDir(), nil))
	top := enginetest.Insert(t, e, outline.Position{}, "Parent")[0]
	anchor := enginetest.Insert(t, e, outline.Position{Parent: top}, "Anchor")[0]
	dest := enginetest.Insert(t, e, outline.Position{}, "Elsewhere")[0]
	insert := func(pos outline.Position, text string) error {
		_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return intent.Insert{Pos: pos, Nodes: []intent.NewNode{{Text: text}}}.Plan(p)
		})
		return err
	}

	// 1. the anchor moved: our insert after it, planned on our own last
	// commit, is refused and planned again where the anchor is not a child
	// of the parent any more
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Move{Nodes: []string{anchor}, Pos: outline.Position{Parent: dest}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	writes := r.Stats.Writes.Load()
	err = insert(outline.Position{Parent: top, After: anchor}, "after the anchor")
	if !errors.Is(err, outline.ErrAnchorMissing) {
		t.Fatalf("insert after a moved anchor: %v, want kind anchor_missing", err)
	}
	if w := r.Stats.Writes.Load() - writes; w != 1 {
		t.Errorf("insert after a moved anchor: %d applyWrites, want 1 (refused for its swapCommit)", w)
	}
	if msg := err.Error(); !strings.Contains(msg, "another client moved") || !strings.Contains(msg, anchor) || !strings.Contains(msg, dest) {
		t.Errorf("the refusal does not say that another client moved the anchor %s under %s: %v", anchor, dest, err)
	}

	// 2. the parent deleted (after a write of ours, so that the next is
	// planned on our own last commit again)
	enginetest.Insert(t, e, outline.Position{Parent: top}, "B")
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Delete{Node: top, Children: "subtree"}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	err = insert(outline.Position{Parent: top, Where: "last"}, "under the parent")
	if !errors.Is(err, outline.ErrParentMissing) {
		t.Fatalf("insert under a deleted parent: %v, want kind parent_missing", err)
	}
	t.Logf("refusal: %v", err)
	if msg := err.Error(); !strings.Contains(msg, "another client deleted") || !strings.Contains(msg, top) {
		t.Errorf("the refusal does not say that another client deleted the parent %s: %v", top, err)
	}
	var oe *outline.Error
	if !errors.As(err, &oe) || oe.Data == nil {
		t.Errorf("the refusal carries no data on what changed: %#v", err)
	}

	// nothing of either was written
	tr := pdstest.ReadBack(t, ctx, srv, a.DID.String())
	for _, n := range tr.Nodes {
		if txt := n.Text(); txt == "after the anchor" || txt == "under the parent" {
			t.Errorf("a refused insert was written: %q", txt)
		}
	}
}
