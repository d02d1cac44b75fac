package outline

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// retries is how many times a plan is re-made after a swapCommit conflict
// before its first batch landed, and (four times it) how many conflicts a
// later batch rides out. The first attempts follow at once: a refusal for
// the swapCommit means another commit landed, the PDS takes one commit at a
// time, so some writer always gets through and nobody can be starved by
// waiting less; what a pause buys is only a quieter moment, and against a
// repository another client keeps busy (a commit every few milliseconds) a
// pause only lets its next commit in first. Later attempts wait a short
// jittered pause (1-10 ms), so that a retry does not keep the same phase as
// another writer's ticking commits.
const retries = 24

// eager is how many attempts follow a conflict without a pause.
const eager = 4

// refusalPoints bounds the points one call's refused attempts may spend:
// the PDS counts a refused applyWrites against its rate limits (5,000
// points an hour, shared with the person's own apps). A one-bullet insert
// (3 points) is tried 25 times, a full batch of 200 creates (600 points)
// 4 times (eager).
const refusalPoints = 600

// attemptsFor is how many times a write whose first batch costs cost
// points is tried before its refusal is answered.
func attemptsFor(cost int) int {
	if cost <= 0 {
		return retries + 1
	}
	return min(retries+1, max(eager, refusalPoints/cost))
}

// BatchTimeout bounds one batch's commit, which runs to completion even
// when the call is cancelled (cancellation stops between batches).
const BatchTimeout = 2 * time.Minute

// Created names a record a plan creates.
type Created struct {
	URI     string `json:"uri"`
	RKey    string `json:"rkey"`
	SortKey string `json:"sortKey,omitempty"`
	// Input is the input position the record came from ("nodes[0].children[2]").
	Input string `json:"input,omitempty"`
	// Text is the created bullet's text (for readable results).
	Text string `json:"text,omitempty"`
}

// Plan is the outcome of planning one intent against one snapshot.
type Plan struct {
	Writes      []store.Write `json:"writes"`
	Cost        int           `json:"cost"`
	Diagnostics []string      `json:"diagnostics,omitempty"`
	// Review are notes a dry run shows and a landed write leaves out:
	// examples, bullet by bullet, of what the plan changes.
	Review  []string        `json:"review,omitempty"`
	Created []Created       `json:"created,omitempty"`
	Summary string          `json:"summary"`
	Touched []string        `json:"-"` // record keys whose neighbourhood to show
	Prev    []*store.Record `json:"-"` // the record each write replaces (nil: none)
	Batches []int           `json:"-"` // end (exclusive) of each commit's writes
	// Labels name the input each write came from ("nodes[0]"), for the
	// gate's errors; Shared are the parents in other repositories the plan
	// was admitted to write under (contributions to shared outlines).
	Labels []string        `json:"-"`
	Shared map[string]bool `json:"-"`
	// Verdict is what the gate counted (set when the plan passed it).
	Verdict Verdict `json:"-"`
	// Undoes are the operations an undo's plan rolls back.
	Undoes []string `json:"-"`
	// items are the items of base (the tree the plan was made on) each
	// node or mirror write replaces (nil: none, or not known): the gate and
	// the tree after the plan take them rather than looking each key up
	// again, when they work on base.
	items []*Item
	base  *Tree
	// held: for each write, the CID of the record the repository held
	// that the write puts back as it was (an undo's restores; "": none).
	// The gate does not validate again a write whose value still encodes
	// to that CID (the repository held those very bytes); it validates
	// every other.
	held []string
}

// itemsOn are the plan's items when t is the tree they are from (nil
// otherwise).
func (p *Plan) itemsOn(t *Tree) []*Item {
	if p.base != t || len(p.items) != len(p.Writes) {
		return nil
	}
	return p.items
}

// Outcome is a plan and, unless dry run, the commits it made.
type Outcome struct {
	Plan    *Plan          `json:"plan"`
	Commits []store.Result `json:"commits,omitempty"`
	DryRun  bool           `json:"dryRun"`
	Before  *Tree          `json:"-"`
	// Op is the recorded operation (absent for dry runs and no-ops).
	Op *OpReport `json:"operation,omitempty"`
	// NoChange: the intent asked for what is already there; nothing written.
	NoChange bool `json:"noChange,omitempty"`
	// BudgetLeft is the write budget left after the outcome (-1: the
	// repository has no budget).
	BudgetLeft int `json:"budgetLeft"`
	// PlanID names a dry run's plan, which Apply commits exactly as shown
	// ("": not kept).
	PlanID string `json:"planId,omitempty"`

	after *Tree
}

// After is the tree as it would be after the plan (Before with the plan's
// writes, not committed: a preview, to look at and drop), built once; nil
// without Before.
func (o *Outcome) After() *Tree {
	if o.after == nil && o.Before != nil && o.Plan != nil {
		o.after = o.Before.nextWith(o.Before.Commit, o.Before.Rev, WriteChanges(o.Plan.Writes), o.Plan.itemsOn(o.Before))
	}
	return o.after
}

// Resolver turns a handle into a DID for mention facets.
type Resolver interface {
	ResolveHandle(ctx context.Context, handle string) (syntax.DID, error)
}

// Engine plans intents and applies them to one repository as operations.
// Reads never wait for a write in flight: the engine's lock guards only its
// cached tree, never network I/O; writes of one process go one at a time.
type Engine struct {
	Repo     store.Repository
	Resolver Resolver // may be nil (offline): mentions get no facet
	Now      func() time.Time

	// others reads other identities' repositories for the contributor
	// rules (contrib.go); nil: a parent in another repository is refused.
	others Others

	mu    sync.Mutex // guards cache and clock
	wmu   sync.Mutex // one write operation at a time in this process
	clock *syntax.TIDClock
	cache *Tree
	fwd   *forwarding // the tree being brought forward (forward)
	ops   *lifecycle
	plans planCache // dry runs' plans (plans.go)
	// changes logs who changed what at each advance of the kept tree
	// (changelog.go)
	changes changeLog
}

// Options are what an engine is built with (Open).
type Options struct {
	// Resolver turns mentioned handles into DIDs; nil (offline): mentions
	// get no facet, and the result says so.
	Resolver Resolver
	// Others reads other identities' repositories: inserts and moves under
	// another identity's bullet whose outline admits this identity as a
	// contributor, and the guard that keeps contributions in their shared
	// outline. nil: a parent in another repository is refused.
	Others Others
	// Operations is the data directory whose ops/ folder keeps the
	// operations journal (shared with other processes using it); "": in
	// memory only, unless Journal is set.
	Operations string
	// Journal keeps the operations journal elsewhere (hosted mode: in
	// Postgres, shared by every instance); it wins over Operations.
	Journal Journal
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// New returns an engine over repo with no options: operations kept in
// memory, offline (see Open).
func New(repo store.Repository) *Engine {
	e := &Engine{Repo: repo, Now: time.Now, clock: syntax.NewTIDClock(uint(rand.IntN(1024))),
		ops: &lifecycle{j: newMemJournal()}}
	e.ops.repo = e.repo
	return e
}

// repo is the engine's repository as it is now (the lifecycle's view).
func (e *Engine) repo() store.Repository { return e.Repo }

// Open returns an engine over repo built with o. It fails when the
// operations journal cannot be read.
func Open(repo store.Repository, o Options) (*Engine, error) {
	e := New(repo)
	e.Resolver, e.others = o.Resolver, o.Others
	if o.Now != nil {
		e.Now = o.Now
	}
	switch {
	case o.Journal != nil:
		if err := e.useJournal(o.Journal); err != nil {
			return nil, err
		}
		e.ops.repo = e.repo
	case o.Operations != "":
		if err := e.KeepOperations(o.Operations); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Others is how the engine reads other identities' repositories (nil:
// offline).
func (e *Engine) Others() Others { return e.others }

// KeepOperations records operations (and so the undo journal) in dir/ops,
// shared with other processes using the same data directory.
func (e *Engine) KeepOperations(dir string) error {
	err := e.useJournal(newFileJournal(e.Repo.DID().String(), filepath.Join(dir, "ops")))
	e.ops.repo = e.repo
	return err
}

// TakeNotices implements store.Noticer: what the operations journal found
// and set aside (a record cut short by a crash of the machine) that was
// not told yet, once.
func (e *Engine) TakeNotices() []string {
	if fj, ok := e.journal().(*fileJournal); ok {
		return fj.notes.TakeNotices()
	}
	return nil
}

// Notices is everything the operations journal found and set aside, told
// or not (the CLI prints them on stderr).
func (e *Engine) Notices() []string {
	if fj, ok := e.journal().(*fileJournal); ok {
		return fj.notes.All()
	}
	return nil
}

// journal is the operations journal (set when the engine is opened).
func (e *Engine) journal() Journal { return e.ops.j }

// Tree returns the tree of the current commit. A repository that can tell
// what a commit changed (store.Deltas) brings the kept tree forward by those
// changes, at the cost of what changed; otherwise, and when it cannot tell,
// the tree is rebuilt from a snapshot when the commit changed. No lock is
// held while the repository is read.
func (e *Engine) Tree(ctx context.Context) (*Tree, error) {
	e.mu.Lock()
	prev := e.cache
	e.mu.Unlock()
	if d, ok := e.Repo.(store.Deltas); ok && prev != nil {
		commit, rev, changes, ok, err := d.Changes(ctx, prev.Commit)
		if err != nil {
			return nil, err
		}
		if ok {
			return e.forward(prev, commit, rev, changes), nil
		}
	}
	s, err := e.Repo.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if prev != nil && prev.Commit == s.Commit {
		return prev, nil
	}
	return e.keep(Rebuild(s, prev)), nil
}

// TrustPoints bounds what a wrong guess of writeTree may cost: a write
// planned on the commit known without asking whose first batch costs more
// points is planned again after asking (a batch the PDS refuses for its
// swapCommit still counts against its rate limits).
const TrustPoints = 30

// writeTree is the tree a write is planned on. With trust, a repository
// that knows its latest commit without asking (store.Known: its own last
// commit, made moments ago) answers without a request; trusted says so.
// The write is swapped onto that commit like any other: if the repository
// moved on, it is refused whole, nothing is written, and the caller plans
// again on Tree, which asks. Reads always ask (Tree).
func (e *Engine) writeTree(ctx context.Context, trust bool) (t *Tree, trusted bool, err error) {
	e.mu.Lock()
	prev := e.cache
	e.mu.Unlock()
	if w, ok := e.Repo.(store.WriteKnown); ok && trust && prev != nil {
		commit, rev, changes, ok, guess, err := w.WriteChanges(ctx, prev.Commit)
		if err != nil {
			return nil, false, err
		}
		if ok {
			return e.forward(prev, commit, rev, changes), guess, nil
		}
	} else if k, ok := e.Repo.(store.Known); ok && trust && prev != nil {
		if commit, rev, changes, ok := k.KnownChanges(prev.Commit); ok {
			return e.forward(prev, commit, rev, changes), true, nil
		}
	}
	t, err = e.Tree(ctx)
	return t, false, err
}

// forward is prev brought to commit by what changed since (store.Deltas),
// kept as the cached tree.
// A commit brought forward by two callers at once (our own commit, asked
// for by the next write and arriving on the followed stream) is done once:
// the second waits for the first's tree.
func (e *Engine) forward(prev *Tree, commit, rev string, changes []store.Record) *Tree {
	if commit == prev.Commit {
		return prev
	}
	e.mu.Lock()
	if e.cache != nil && e.cache.Commit == commit && e.cache.DID == prev.DID {
		t := e.cache
		e.mu.Unlock()
		return t
	}
	if f := e.fwd; f != nil && f.from == prev && f.commit == commit {
		e.mu.Unlock()
		<-f.done
		return f.t
	}
	f := &forwarding{from: prev, commit: commit, done: make(chan struct{})}
	e.fwd = f
	e.mu.Unlock()
	f.t = e.keepFrom(prev.Next(commit, rev, changes), changes, false)
	close(f.done)
	e.mu.Lock()
	if e.fwd == f {
		e.fwd = nil
	}
	e.mu.Unlock()
	return f.t
}

// forwarding is a tree being brought forward from one commit to another.
type forwarding struct {
	from   *Tree
	commit string
	done   chan struct{}
	t      *Tree
}

// keep makes t the cached tree unless a newer one is there already (the
// change log compares it with the tree it replaces: keepFrom).
func (e *Engine) keep(t *Tree) *Tree { return e.keepFrom(t, nil, true) }

func (e *Engine) nextKeys() *keyList {
	e.mu.Lock()
	defer e.mu.Unlock()
	return &keyList{clock: e.clock}
}

// Do plans intent against the current snapshot and, unless dryRun, commits
// it as one operation: recorded before the first batch, its budget
// reserved, conflicts re-planned (before anything landed) or ridden out
// (after), and left incomplete — resumable and undoable — if it must stop
// part-way.
func (e *Engine) Do(ctx context.Context, intent Intent, dryRun bool) (*Outcome, error) {
	if !dryRun {
		e.wmu.Lock()
		defer e.wmu.Unlock()
	}
	keys := e.nextKeys()
	now := e.Now()
	trust := !dryRun // the first plan of a write may trust the commit known (writeTree)
	// refusedOn: the tree of the last plan refused for its swapCommit
	var refusedOn *Tree
	began := time.Now()
	for attempt := 0; ; attempt++ {
		t, trusted, err := e.writeTree(ctx, trust)
		trust = false
		if err != nil {
			return nil, unavailable(err)
		}
		p := e.newPlanner(ctx, t, now, keys)
		err = intent.Plan(p)
		var plan *Plan
		if err == nil {
			plan, err = p.finish()
		}
		if err == nil {
			plan.Verdict, err = gate(t, plan)
		}
		if trusted && (err != nil || len(plan.Writes) == 0 || store.Cost(plan.Writes[:cutBatches(plan.Writes)[0]]) > TrustPoints) {
			// only a write that would be sent is planned on a guess: a
			// refusal or "nothing to change" may be the commit known being
			// behind, and a dear first batch is not worth the risk; ask
			attempt--
			continue
		}
		if err != nil {
			return nil, changedSince(err, refusedOn, t)
		}
		out := &Outcome{Plan: plan, DryRun: dryRun, Before: t, BudgetLeft: e.budgetLeft(ctx)}
		if len(plan.Writes) == 0 {
			out.NoChange = true
			plan.Diagnostics = append(plan.Diagnostics, "nothing to change: nothing written, no points spent")
			return out, nil
		}
		if dryRun {
			if err := e.checkBudget(ctx, plan.Cost); err != nil {
				plan.Diagnostics = append(plan.Diagnostics, err.Error())
			}
			id, err := e.keepPlan(intent, t, plan, keys, now)
			if err != nil {
				// never silent: the dry run is whole, its plan not kept
				plan.Diagnostics = append(plan.Diagnostics, "no plan id: this plan could not be kept ("+err.Error()+"); the same call without dry_run plans it again and applies it")
			}
			out.PlanID = id
			return out, nil
		}
		if needsConfirm(ctx, plan.Verdict, "", out.BudgetLeft) {
			// held for the person: kept as a plan they can see and accept
			id, _ := e.keepPlan(intent, t, plan, keys, now) // "": cannot be confirmed, and the caller says so
			return nil, &ConfirmNeeded{PlanID: id, Verdict: plan.Verdict, Summary: plan.Summary, Left: out.BudgetLeft}
		}
		op, err := e.commit(ctx, t, plan, keys.keys, now, out)
		if errors.Is(err, errReplan) {
			refusedOn = t
		}
		if errors.Is(err, errReplan) && trusted {
			attempt-- // the guess was wrong: plan again at once on what the PDS has
			continue
		}
		if errors.Is(err, errReplan) {
			if err := replanWait(ctx, attempt, began, store.Cost(plan.Writes[:plan.Batches[0]])); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		e.dropSuperseded(intent)
		rep := op.report()
		out.Op = &rep
		return out, nil
	}
}

// commit records plan, made against t, as a new operation (keys: the
// record keys it minted; started: its timestamp) and commits it, filling
// out's commits and budget. errReplan: nothing of it landed.
func (e *Engine) commit(ctx context.Context, t *Tree, plan *Plan, keys []string, started time.Time, out *Outcome) (*Operation, error) {
	op := &Operation{ID: e.clock.Next().String(), DID: e.Repo.DID().String(), Summary: plan.Summary, Started: started,
		State: opPlanned, Writes: plan.Writes, Prev: plan.Prev, Batches: plan.Batches, Keys: keys,
		Around: aroundOf(t, plan.Writes), Undoes: plan.Undoes}
	commits, err := e.execute(ctx, op, t.Commit)
	out.Commits = commits
	out.BudgetLeft = e.budgetLeft(ctx)
	return op, err
}

// replanWait is what follows a commit that met a conflict before anything
// landed: a growing, jittered pause before the next attempt, or, when the
// attempts ran out or the caller cancelled, the error to answer with.
func replanWait(ctx context.Context, attempt int, began time.Time, cost int) error {
	if attempt+1 >= attemptsFor(cost) {
		return fail(ErrConflict, "retry when the repository is quieter; if another client keeps committing, pause it",
			"the repository kept changing: another client committed before this write could land, %d times in %v "+
				"(each time it was planned again on what had changed, and still held); every write is sent guarded by swapCommit "+
				"(the commit it was planned on), so it cannot land while another client commits faster than one round trip, "+
				"and a call's refused attempts stop at %d points of the rate limits; nothing was written",
			attempt+1, time.Since(began).Round(time.Millisecond), refusalPoints)
	}
	if sleepCtx(ctx, backoff(attempt)) != nil {
		return fail(ErrCancelled, "nothing was written; call again when ready", "cancelled before the first batch")
	}
	return nil
}

// changedSince is err, a refusal of a write planned again after its
// commit was refused for its swapCommit (before: the tree of the refused
// plan, nil: none was; after: the tree of the refusing plan), saying what
// another client changed meanwhile to the bullets it names: deleted, or
// moved under another parent. Other errors are returned as they are.
func changedSince(err error, before, after *Tree) error {
	var oe *Error
	if before == nil || !errors.As(err, &oe) ||
		!errors.Is(err, ErrParentMissing) && !errors.Is(err, ErrAnchorMissing) && !errors.Is(err, ErrNodeNotFound) {
		return err
	}
	var changed []string
	for key, it := range before.Nodes.All() {
		if !strings.Contains(oe.Msg, key) {
			continue
		}
		now, ok := after.Nodes.Lookup(key)
		switch {
		case !ok:
			changed = append(changed, fmt.Sprintf("another client deleted %s", named(it)))
		case it.ParentKey() != now.ParentKey():
			changed = append(changed, fmt.Sprintf("another client moved %s from under %s to under %s", named(it), named(before.Parent(it)), named(after.Parent(now))))
		}
	}
	if len(changed) == 0 {
		return err
	}
	re := *oe
	re.Msg = fmt.Sprintf("%s: since this write was first planned (on commit %s), %s; nothing was written", oe.Msg, before.Commit, strings.Join(changed, "; "))
	if re.Data == nil {
		re.Data = map[string]any{"changed": changed}
	}
	return &re
}

// DoFunc is Do with a function as the intent.
func (e *Engine) DoFunc(ctx context.Context, dryRun bool, fn func(p *Planner) error) (*Outcome, error) {
	return e.Do(ctx, planFunc(fn), dryRun)
}

// errReplan: the first batch met a conflict and nothing of the operation
// is in the repository: plan again on the new snapshot.
var errReplan = errors.New("re-plan")

// backoff is the pause before attempt+1 after a conflict (see retries).
func backoff(attempt int) time.Duration {
	if attempt < eager {
		return 0
	}
	return time.Duration(1+rand.IntN(10)) * time.Millisecond
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// budgetLeft is the points left in the repository's budget, or -1.
func (e *Engine) budgetLeft(ctx context.Context) int {
	b, ok := e.Repo.(store.Budgeted)
	if !ok {
		return -1
	}
	left, err := b.CheckBudget(ctx, 0)
	if err != nil {
		return -1
	}
	return left
}

// checkBudget tells whether cost fits now (dry runs).
func (e *Engine) checkBudget(ctx context.Context, cost int) error {
	b, ok := e.Repo.(store.Budgeted)
	if !ok {
		return nil
	}
	_, err := b.CheckBudget(ctx, cost)
	var oe *Error
	if errors.As(err, &oe) {
		return err
	}
	return budgetError(err)
}

// reserve holds cost points for an operation before its first batch; the
// returned context carries the reservation to the repository's Apply, which
// settles each committed batch against it; release gives back the rest.
func (e *Engine) reserve(ctx context.Context, cost int) (context.Context, func(), error) {
	b, ok := e.Repo.(store.Budgeted)
	if !ok {
		return ctx, func() {}, nil
	}
	return b.ReservePlan(ctx, cost)
}

// budgetError turns a budget refusal into an *Error the model can act on.
func budgetError(err error) error {
	if err == nil {
		return nil
	}
	var ex *budget.Exceeded
	if errors.As(err, &ex) {
		next := "split the work into smaller operations"
		if !ex.FreeAt.IsZero() {
			next = "wait until then, or do less now (dry_run shows an operation's cost)"
		}
		return &Error{Kind: ErrBudget, Msg: ex.Error(), Next: next, Data: ex}
	}
	if errors.Is(err, budget.ErrBudget) {
		return &Error{Kind: ErrBudget, Msg: err.Error(), Next: "wait a minute and retry"}
	}
	return err
}

// unavailable wraps a repository failure as an *Error the model can act on.
func unavailable(err error) error {
	var oe *Error
	if errors.As(err, &oe) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Kind: ErrTimeout, Msg: "the repository did not answer in time: " + err.Error(), Next: "retry in a moment"}
	}
	if errors.Is(err, context.Canceled) {
		return &Error{Kind: ErrCancelled, Msg: "cancelled", Next: "call again when ready"}
	}
	return &Error{Kind: ErrUnavailable, Msg: "the repository could not be read: " + err.Error(), Next: "retry in a moment"}
}

// Progress is told before each batch of a multi-batch plan is sent: how
// many batches of total are committed so far, and writes likewise. (Before,
// not after: a report after the last batch could reach the client after the
// result, when it is no longer listening.)
type Progress func(commitsDone, commitsTotal, writesDone, writesTotal int)

type progressKey struct{}

// WithProgress returns a context whose multi-batch plans report progress.
func WithProgress(ctx context.Context, fn Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}
