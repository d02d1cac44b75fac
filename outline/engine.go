package outline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/budget"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
	"github.com/bulleted-mcp/bulleted-mcp/store"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// Retries is how many times a plan is re-made after a swapCommit conflict;
// between attempts the engine waits a growing, jittered pause so that two
// writers racing on one repository do not keep colliding.
const Retries = 6

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
	Created     []Created     `json:"created,omitempty"`
	Summary     string        `json:"summary"`
	Touched     []string      `json:"-"` // record keys whose neighbourhood to show
	Inverse     []store.Write `json:"-"`
}

// Outcome is a plan and, unless dry run, the commits it made.
type Outcome struct {
	Plan    *Plan          `json:"plan"`
	Commits []store.Result `json:"commits,omitempty"`
	DryRun  bool           `json:"dryRun"`
	Before  *Tree          `json:"-"`
	// BudgetLeft is the write budget left after the outcome (-1: the
	// repository has no budget).
	BudgetLeft int `json:"budgetLeft"`
}

// Resolver turns a handle into a DID for mention facets.
type Resolver interface {
	ResolveHandle(ctx context.Context, handle string) (syntax.DID, error)
}

type journalEntry struct {
	summary string
	inverse []store.Write
	after   map[string]string // path → CID after apply ("" = deleted)
}

// Engine plans intents and applies them to one repository.
type Engine struct {
	Repo     store.Repository
	Resolver Resolver // may be nil (offline): mentions get no facet
	Now      func() time.Time

	mu      sync.Mutex
	clock   *syntax.TIDClock
	cache   *Tree
	journal []journalEntry

	journalPath string // where the journal is kept ("" = memory only)
	warn        string // a problem to report with the current outcome
}

// New returns an engine over repo.
func New(repo store.Repository) *Engine {
	return &Engine{Repo: repo, Now: time.Now, clock: syntax.NewTIDClock(0)}
}

// Tree returns the tree of the current snapshot, rebuilt only when the commit
// changed.
func (e *Engine) Tree(ctx context.Context) (*Tree, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tree(ctx)
}

func (e *Engine) tree(ctx context.Context) (*Tree, error) {
	// the repository revalidates its own snapshot (the PDS backend with one
	// request); an unchanged commit keeps the tree
	s, err := e.Repo.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	if e.cache != nil && e.cache.Commit == s.Commit {
		return e.cache, nil
	}
	e.cache = Rebuild(s, e.cache)
	return e.cache, nil
}

// PlanFunc plans one intent on a tree.
type PlanFunc func(ctx context.Context, t *Tree, p *Planner) error

// Run plans fn against the current snapshot and, unless dryRun, applies it,
// re-planning on conflict.
func (e *Engine) Run(ctx context.Context, fn PlanFunc, dryRun bool) (*Outcome, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for attempt := 0; ; attempt++ {
		t, err := e.tree(ctx)
		if err != nil {
			return nil, err
		}
		p := e.newPlanner(ctx, t)
		if err := fn(ctx, t, p); err != nil {
			return nil, err
		}
		plan, err := p.finish()
		if err != nil {
			return nil, err
		}
		out := &Outcome{Plan: plan, DryRun: dryRun, Before: t, BudgetLeft: e.budgetLeft()}
		if dryRun || len(plan.Writes) == 0 {
			if dryRun {
				if err := e.checkBudget(plan.Cost); err != nil {
					plan.Diagnostics = append(plan.Diagnostics, err.Error())
				}
			}
			return out, nil
		}
		if err := e.checkBudget(plan.Cost); err != nil {
			return nil, err
		}
		commits, err := e.apply(ctx, t.Commit, plan.Writes)
		out.BudgetLeft = e.budgetLeft()
		if errors.Is(err, store.ErrConflict) && len(commits) == 0 && attempt < Retries {
			backoff := time.Duration(attempt+1) * time.Duration(5+rand.IntN(20)) * time.Millisecond
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(backoff):
			}
			continue
		}
		out.Commits = commits
		if err != nil {
			if len(commits) > 0 {
				return out, fmt.Errorf("%d of %d batches committed, then: %w", len(commits), (len(plan.Writes)+store.MaxBatch-1)/store.MaxBatch, err)
			}
			if errors.Is(err, budget.ErrBudget) {
				return nil, budgetError(err)
			}
			if errors.Is(err, store.ErrConflict) {
				return nil, fail(ErrConflict, "read the outline again and retry", "the repository kept changing while planning (%d attempts)", attempt+1)
			}
			return nil, err
		}
		e.record(plan.Summary, plan, commits)
		if e.warn != "" {
			plan.Diagnostics = append(plan.Diagnostics, e.warn)
			e.warn = ""
		}
		return out, nil
	}
}

// budgetLeft is the points left in the repository's budget, or -1.
func (e *Engine) budgetLeft() int {
	if l, ok := e.Repo.(store.Limited); ok && l.Ledger() != nil {
		return l.Ledger().Left()
	}
	return -1
}

// checkBudget refuses a plan whose whole cost does not fit, before any write.
func (e *Engine) checkBudget(cost int) error {
	l, ok := e.Repo.(store.Limited)
	if !ok || l.Ledger() == nil {
		return nil
	}
	return budgetError(l.Ledger().Check(cost))
}

// budgetError turns a budget refusal into an *Error the model can act on.
func budgetError(err error) error {
	var ex *budget.Exceeded
	if errors.As(err, &ex) {
		next := "split the work into smaller plans"
		if !ex.FreeAt.IsZero() {
			next = "wait until then, or do less now (dry_run shows a plan's cost)"
		}
		return &Error{Kind: ErrBudget, Msg: ex.Error(), Next: next}
	}
	if errors.Is(err, budget.ErrBudget) {
		return &Error{Kind: ErrBudget, Msg: err.Error(), Next: "wait a minute and retry"}
	}
	return err
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

func (e *Engine) apply(ctx context.Context, swap string, writes []store.Write) ([]store.Result, error) {
	var commits []store.Result
	progress, _ := ctx.Value(progressKey{}).(Progress)
	total := (len(writes) + store.MaxBatch - 1) / store.MaxBatch
	all, done := len(writes), 0
	for len(writes) > 0 {
		n := min(len(writes), store.MaxBatch)
		if progress != nil && total > 1 {
			progress(len(commits), total, done, all)
		}
		res, err := e.Repo.Apply(ctx, swap, writes[:n])
		if err != nil {
			return commits, err
		}
		commits = append(commits, *res)
		swap = res.Commit
		writes = writes[n:]
		done += n
	}
	return commits, nil
}

func (e *Engine) record(summary string, plan *Plan, commits []store.Result) {
	after := map[string]string{}
	i := 0
	for _, c := range commits {
		for _, r := range c.Results {
			w := plan.Writes[i]
			after[w.Collection+"/"+w.RKey] = r.CID
			i++
		}
	}
	e.journal = append(e.journal, journalEntry{summary: summary, inverse: plan.Inverse, after: after})
	if len(e.journal) > JournalSize {
		e.journal = e.journal[1:]
	}
	if err := e.saveJournal(); err != nil {
		e.warn = "the undo journal could not be saved (" + err.Error() + "); undo works until the server stops"
	}
}

// Undo reverses the last steps applied plans, newest first, if the records
// they wrote are unchanged since.
func (e *Engine) Undo(ctx context.Context, steps int, dryRun bool) (*Outcome, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if steps < 1 {
		steps = 1
	}
	if steps > len(e.journal) {
		return nil, fail(ErrInvalidInput, "", "only %d operation(s) can be undone", len(e.journal))
	}
	s, err := e.Repo.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	cur := map[string]string{}
	for _, r := range s.Records {
		cur[r.Collection+"/"+r.RKey] = r.CID
	}
	plan := &Plan{}
	// combine newest first; a later entry's inverse runs first
	touched := map[string]bool{}
	var changed []string
	for i := 0; i < steps; i++ {
		ent := e.journal[len(e.journal)-1-i]
		for path, cid := range ent.after {
			if touched[path] {
				continue
			}
			if cur[path] != cid {
				changed = append(changed, path)
			}
		}
		for _, w := range ent.inverse {
			path := w.Collection + "/" + w.RKey
			if touched[path] {
				// an older inverse for the same record: replace the newer one
				for j := range plan.Writes {
					if plan.Writes[j].Collection+"/"+plan.Writes[j].RKey == path {
						plan.Writes[j] = merge(plan.Writes[j], w)
					}
				}
				continue
			}
			touched[path] = true
			plan.Writes = append(plan.Writes, w)
		}
		plan.Summary += "undid: " + strings.TrimSuffix(ent.summary, ".") + ". "
	}
	if len(changed) > 0 {
		return nil, fail(ErrConflict, "read the outline and fix it by hand with the edit tools", "cannot undo: %d record(s) changed since (%v)", len(changed), changed)
	}
	// drop no-ops (create then delete of the same record)
	var ws []store.Write
	for _, w := range plan.Writes {
		if w.Op != "" {
			ws = append(ws, w)
		}
	}
	plan.Writes = ws
	plan.Cost = store.Cost(ws)
	out := &Outcome{Plan: plan, DryRun: dryRun}
	out.BudgetLeft = e.budgetLeft()
	if dryRun {
		return out, nil
	}
	if err := e.checkBudget(plan.Cost); err != nil {
		return nil, err
	}
	commits, err := e.apply(ctx, s.Commit, ws)
	out.Commits = commits
	out.BudgetLeft = e.budgetLeft()
	if err != nil {
		return out, budgetError(err)
	}
	e.journal = e.journal[:len(e.journal)-steps]
	if err := e.saveJournal(); err != nil {
		out.Plan.Diagnostics = append(out.Plan.Diagnostics, "the undo journal could not be saved: "+err.Error())
	}
	return out, nil
}

// merge combines a newer inverse write a with an older one b for the same
// record (b restores the older state).
func merge(a, b store.Write) store.Write {
	switch {
	case a.Op == store.Delete && b.Op == store.Create: // newer undid a create of a recreated…
		return store.Write{Op: store.Update, Collection: b.Collection, RKey: b.RKey, Value: b.Value}
	case b.Op == store.Delete: // oldest op created it: remove
		if a.Op == store.Create {
			return store.Write{}
		}
		return b
	default:
		if a.Op == store.Create {
			return store.Write{Op: store.Create, Collection: b.Collection, RKey: b.RKey, Value: b.Value}
		}
		return b
	}
}

// Planner accumulates the writes of one plan.
type Planner struct {
	e       *Engine
	ctx     context.Context
	t       *Tree
	base    *Tree
	plan    Plan
	labels  []string // input path of each write, for validation messages
	written map[string]bool
}

func (e *Engine) newPlanner(ctx context.Context, t *Tree) *Planner {
	return &Planner{e: e, ctx: ctx, t: t, written: map[string]bool{}}
}

// Now is the timestamp used for createdAt and completedAt.
func (p *Planner) Now() string {
	return p.e.Now().UTC().Format("2006-01-02T15:04:05.000Z")
}

// NewKey returns a fresh TID record key.
func (p *Planner) NewKey() string { return p.e.clock.Next().String() }

// Note adds a diagnostic.
func (p *Planner) Note(format string, args ...any) {
	p.plan.Diagnostics = append(p.plan.Diagnostics, fmt.Sprintf(format, args...))
}

// Summary sets the plan's one-line summary.
func (p *Planner) Summary(format string, args ...any) { p.plan.Summary = fmt.Sprintf(format, args...) }

// Touch marks a record key whose neighbourhood the result should show.
func (p *Planner) Touch(rkey string) { p.plan.Touched = append(p.plan.Touched, rkey) }

func (p *Planner) add(w store.Write, inv store.Write, label string) {
	path := w.Collection + "/" + w.RKey
	if p.written[path] {
		// a second change to the same record in one plan: fold into the first
		for i := range p.plan.Writes {
			x := &p.plan.Writes[i]
			if x.Collection == w.Collection && x.RKey == w.RKey {
				switch {
				case w.Op == store.Delete && x.Op == store.Create:
					x.Op = "" // created then deleted: nothing
				case w.Op == store.Delete:
					*x = w
				default:
					x.Value = w.Value
				}
			}
		}
		return
	}
	p.written[path] = true
	p.plan.Writes = append(p.plan.Writes, w)
	p.plan.Inverse = append([]store.Write{inv}, p.plan.Inverse...)
	p.labels = append(p.labels, label)
}

// Create adds a create; label names the input it came from ("nodes[1]").
func (p *Planner) Create(coll, rkey string, value map[string]any, label string) {
	p.add(store.Write{Op: store.Create, Collection: coll, RKey: rkey, Value: value},
		store.Write{Op: store.Delete, Collection: coll, RKey: rkey}, label)
	if coll == lexicon.Node || coll == lexicon.Mirror || coll == lexicon.Comment {
		sk, _ := value["sortKey"].(string)
		txt, _ := value["text"].(string)
		p.plan.Created = append(p.plan.Created, Created{URI: p.t.uri(coll, rkey), RKey: rkey, SortKey: sk, Input: label, Text: txt})
	}
}

// Update replaces rec's value with value (callers start from a copy of the
// old value, so unknown fields survive).
func (p *Planner) Update(rec store.Record, value map[string]any, label string) {
	p.add(store.Write{Op: store.Update, Collection: rec.Collection, RKey: rec.RKey, Value: value},
		store.Write{Op: store.Update, Collection: rec.Collection, RKey: rec.RKey, Value: rec.Value}, label)
}

// Delete removes rec.
func (p *Planner) Delete(rec store.Record, label string) {
	p.add(store.Write{Op: store.Delete, Collection: rec.Collection, RKey: rec.RKey},
		store.Write{Op: store.Create, Collection: rec.Collection, RKey: rec.RKey, Value: rec.Value}, label)
}

// Advance rebuilds the planner's tree from the snapshot with the writes
// planned so far, so the next operation of a batch sees them.
func (p *Planner) Advance() {
	var ws []store.Write
	for _, w := range p.plan.Writes {
		if w.Op != "" {
			ws = append(ws, w)
		}
	}
	base := p.base
	if base == nil {
		base = p.t
		p.base = p.t
	}
	nt := Rebuild(Applied(base.Snap, ws), base)
	nt.Commit = base.Commit
	p.t = nt
}

// Tree is the tree the planner currently plans against.
func (p *Planner) Tree() *Tree { return p.t }

// Copy returns a shallow copy of a record value for editing.
func Copy(v map[string]any) map[string]any { return maps.Clone(v) }

func (p *Planner) finish() (*Plan, error) {
	var ws []store.Write
	var labels []string
	creates, deletes := 0, 0
	for i, w := range p.plan.Writes {
		if w.Op == "" {
			continue
		}
		ws = append(ws, w)
		labels = append(labels, p.labels[i])
		switch w.Op {
		case store.Create:
			creates++
		case store.Delete:
			deletes++
		}
	}
	p.plan.Writes = ws
	var inv []store.Write
	for _, w := range p.plan.Inverse {
		if p.written[w.Collection+"/"+w.RKey] {
			inv = append(inv, w)
		}
	}
	p.plan.Inverse = inv
	base := p.t
	if p.base != nil {
		base = p.base
	}
	if n := base.Count + creates - deletes; creates > 0 && n > lexicon.MaxRepoRecords {
		return nil, fail(ErrTooLarge, "delete records first or write fewer", "the plan would take the repository to %s records; the app view's bound is %s", validate.Count(n), validate.Count(lexicon.MaxRepoRecords))
	}
	v := validate.Default()
	for i, w := range ws {
		if w.Op == store.Delete {
			continue
		}
		u, err := syntax.ParseATURI(p.t.uri(w.Collection, w.RKey))
		if err != nil {
			return nil, err
		}
		if err := v.Record(w.Value, w.Collection, &u); err != nil {
			var ve *validate.Error
			if errors.As(err, &ve) {
				if labels[i] != "" {
					ve = ve.WithPrefix(labels[i])
				}
				return nil, &Error{Kind: ErrInvalidInput, Msg: ve.Error(), Next: "fix the named field and call again"}
			}
			return nil, err
		}
	}
	p.plan.Cost = store.Cost(ws)
	return &p.plan, nil
}

// CurrentSummary returns the summary set so far.
func (p *Planner) CurrentSummary() string { return p.plan.Summary }
