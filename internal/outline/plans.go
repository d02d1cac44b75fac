package outline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Plans. A dry run keeps its plan under an id (Outcome.PlanID) for a while;
// Apply commits exactly the writes that dry run showed, or refuses with
// ErrConflict, saying what changed, when the outline changed where the
// plan touches it since: never a silent re-plan of something the person
// did not see. A plan is used once.

// planTTL is how long a dry run's plan can be applied.
const planTTL = 15 * time.Minute

// plan cache bounds, per engine: the plans of the latest dry runs, by
// count and by the bytes of their writes.
const (
	maxPlans     = 16
	maxPlanBytes = 8 << 20
)

type keptPlan struct {
	id     string
	intent string // the intent's type and value, as JSON
	base   *Tree
	plan   *Plan
	keys   []string
	now    time.Time
	made   time.Time
	size   int
	err    error // the PlanStore failed (planstore.go)
}

type planCache struct {
	mu    sync.Mutex
	plans []*keptPlan // oldest first
	bytes int
	rows  PlanStore // nil: plans kept here (planstore.go)
}

// fingerprint is intent's type and value as JSON; "" when it cannot be
// told (a function): such a dry run gets no plan id.
func fingerprint(in Intent) string {
	b, err := json.Marshal(in)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%T:%s", in, b)
}

func planSize(p *Plan) int {
	n := 256
	for _, w := range p.Writes {
		n += 128 + len(w.Collection) + len(w.RKey)
		for k, v := range w.Value {
			n += len(k) + 32
			if s, ok := v.(string); ok {
				n += len(s)
			}
		}
	}
	return n
}

// keepPlan keeps a dry run's plan and returns its id ("" when it cannot be
// kept).
func (e *Engine) keepPlan(in Intent, t *Tree, p *Plan, keys *keyList, now time.Time) (string, error) {
	fp := fingerprint(in)
	if fp == "" || len(p.Writes) == 0 {
		return "", nil // nothing to keep: no id, by design
	}
	kp := &keptPlan{id: "p" + keys.clock.Next().String(), intent: fp, base: t, plan: p,
		keys: append([]string(nil), keys.keys...), now: now, made: e.Now(), size: planSize(p)}
	if kp.size > maxPlanBytes {
		return "", fmt.Errorf("the plan is about %d bytes, over the %d a kept plan may be", kp.size, maxPlanBytes)
	}
	if ps := e.planStore(); ps != nil {
		if err := e.putRow(ps, kp); err != nil {
			return "", err
		}
		return kp.id, nil
	}
	c := &e.plans
	c.mu.Lock()
	defer c.mu.Unlock()
	c.plans = append(c.plans, kp)
	c.bytes += kp.size
	for len(c.plans) > maxPlans || c.bytes > maxPlanBytes {
		c.bytes -= c.plans[0].size
		c.plans = c.plans[1:]
	}
	return kp.id, nil
}

// takePlan removes and returns the plan id names, if it is still kept.
func (e *Engine) takePlan(id string) *keptPlan {
	if ps := e.planStore(); ps != nil {
		return e.takeRow(ps, id, true)
	}
	c := &e.plans
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, kp := range c.plans {
		if kp.id == id {
			c.plans = append(c.plans[:i:i], c.plans[i+1:]...)
			c.bytes -= kp.size
			if e.Now().Sub(kp.made) > planTTL {
				return nil
			}
			return kp
		}
	}
	return nil
}

// dropSuperseded forgets the kept plans of intent's dry runs once the same
// intent was applied without its plan id (the same call without dry_run):
// such a plan could only be refused now (what it writes was just written
// otherwise), and it holds the tree it was planned on, which the outline
// has moved away from (a dry-run delete of 10,000 bullets: megabytes).
// Plans in a PlanStore expire there.
func (e *Engine) dropSuperseded(intent Intent) {
	if e.planStore() != nil {
		return
	}
	fp := fingerprint(intent)
	if fp == "" {
		return
	}
	c := &e.plans
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.plans[:0]
	for _, kp := range c.plans {
		if kp.intent == fp {
			c.bytes -= kp.size
			continue
		}
		kept = append(kept, kp)
	}
	clear(c.plans[len(kept):])
	c.plans = kept
}

// putBack keeps a plan again after an apply that wrote nothing.
func (e *Engine) putBack(kp *keptPlan) {
	if ps := e.planStore(); ps != nil {
		_ = e.putRow(ps, kp) // if it fails, the plan is gone: a dry run makes another
		return
	}
	c := &e.plans
	c.mu.Lock()
	defer c.mu.Unlock()
	c.plans = append(c.plans, kp)
	c.bytes += kp.size
}

// Apply commits the plan a dry run of intent kept under id, exactly as that
// dry run showed it: the same records, the same values and keys. When the
// outline changed since the dry run where the plan touches it (a record it
// writes, or a bullet among the siblings it places bullets into), nothing
// is written and the *Error (ErrConflict) says what changed. intent must
// be the dry run's (the same tool and arguments).
func (e *Engine) Apply(ctx context.Context, id string, intent Intent) (*Outcome, error) {
	e.wmu.Lock()
	defer e.wmu.Unlock()
	kp := e.takePlan(id)
	if kp != nil && kp.err != nil {
		return nil, unavailable(kp.err)
	}
	if kp == nil {
		return nil, fail(ErrInvalidInput, "dry-run the change again (dry_run=true) and apply the new plan id, or call without plan",
			"plan %q is not known here: plans are kept %v after their dry run, used once, dropped once the same call lands without them, and only by the process that made them", id, planTTL)
	}
	if fingerprint(intent) != kp.intent {
		e.putBack(kp)
		return nil, fail(ErrInvalidInput, "call with the same arguments as the dry run, or dry-run these arguments for a new plan id",
			"plan %q was made for different arguments; nothing was written", id)
	}
	// the first check may trust the commit known (writeTree), if its first
	// batch is cheap
	trust := len(kp.plan.Writes) > 0 && store.Cost(kp.plan.Writes[:kp.plan.Batches[0]]) <= TrustPoints
	began := time.Now()
	for attempt := 0; ; attempt++ {
		t, trusted, err := e.writeTree(ctx, trust)
		trust = false
		if err != nil {
			e.putBack(kp)
			return nil, unavailable(err)
		}
		if changed := changedWhereTouched(kp.base, t, kp.plan); len(changed) > 0 && trusted {
			attempt-- // (refused only on what the PDS has: ask)
			continue
		} else if len(changed) > 0 {
			return nil, &Error{Kind: ErrConflict,
				Msg:  fmt.Sprintf("the outline changed where plan %s touches it since its dry run: %s; nothing was written", id, strings.Join(changed, "; ")),
				Next: "read the outline, then dry-run the change again and review the new plan",
				Data: map[string]any{"changed": changed}}
		}
		v, gerr := gate(t, kp.plan)
		if gerr != nil && trusted {
			attempt-- // (refused only on what the PDS has: ask)
			continue
		} else if gerr != nil {
			return nil, gerr // the plan no longer holds: dropped
		}
		kp.plan.Verdict = v
		if left := e.budgetLeft(ctx); needsConfirm(ctx, v, kp.id, left) {
			e.putBack(kp)
			return nil, &ConfirmNeeded{PlanID: kp.id, Verdict: v, Summary: kp.plan.Summary, Left: left}
		}
		out := &Outcome{Plan: kp.plan, Before: t}
		op, err := e.commit(ctx, t, kp.plan, kp.keys, kp.now, out)
		if errors.Is(err, errReplan) && trusted {
			attempt-- // the guess was wrong: check again at once against what the PDS has
			continue
		}
		if errors.Is(err, errReplan) {
			if err := replanWait(ctx, attempt, began, store.Cost(kp.plan.Writes[:kp.plan.Batches[0]])); err != nil {
				e.putBack(kp)
				return nil, err
			}
			continue // the repository moved: check the plan against it again
		}
		if err != nil {
			if len(out.Commits) == 0 && op.landedWrites() == 0 {
				e.putBack(kp) // nothing of it landed: it can be applied again
			}
			return nil, err
		}
		rep := op.report()
		out.Op = &rep
		return out, nil
	}
}

// PlanOf is the plan a dry run kept under id (nil: not kept, or expired),
// left in place: what a confirmation shows before Apply.
func (e *Engine) PlanOf(id string) *Plan {
	if ps := e.planStore(); ps != nil {
		if kp := e.takeRow(ps, id, false); kp != nil && kp.err == nil {
			return kp.plan
		}
		return nil
	}
	c := &e.plans
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, kp := range c.plans {
		if kp.id == id && e.Now().Sub(kp.made) <= planTTL {
			return kp.plan
		}
	}
	return nil
}

// DropPlan forgets the plan kept under id (a dry run made only to look,
// not shown to anybody), so it does not push out the plans agents hold.
func (e *Engine) DropPlan(id string) { e.takePlan(id) }

// changedWhereTouched lists what changed from base to now among the
// records plan writes and the bullets under the parents it places bullets
// into (or takes them from); empty when the plan still applies as shown.
func changedWhereTouched(base, now *Tree, plan *Plan) []string {
	if base.Commit == now.Commit {
		return nil
	}
	written := map[string]bool{}
	parents := map[string]bool{}
	addParent := func(v map[string]any) {
		if v == nil {
			return
		}
		p, _ := v["parent"].(string)
		parents[p] = true // "" is the top level
	}
	for i, w := range plan.Writes {
		written[w.Collection+"/"+w.RKey] = true
		if w.Collection == lexicon.Node || w.Collection == lexicon.Mirror {
			addParent(w.Value)
			if prev := plan.Prev[i]; prev != nil {
				addParent(prev.Value.Map())
			}
		}
		if w.Collection == lexicon.Node && w.Op == store.Delete {
			// a child added since under a bullet the plan deletes would be
			// left without its parent (no cascade)
			parents["at://"+base.DID.String()+"/"+lexicon.Node+"/"+w.RKey] = true
		}
	}
	var out []string
	noted := map[string]bool{}
	note := func(path, what string, r store.Record) {
		if noted[path] {
			return
		}
		noted[path] = true
		txt, _ := r.Value.Text("text")
		if txt != "" {
			out = append(out, fmt.Sprintf("%s %s %q", path, what, clip(txt, 40)))
		} else {
			out = append(out, path+" "+what)
		}
	}
	// what changed is looked up where the plan touches, never by
	// indexing either tree: the records it writes, then the sibling lists
	// it places into or takes from
	compare := func(path string, ra store.Record, okA bool, rb store.Record, okB bool) {
		switch {
		case okA && !okB:
			note(path, "was deleted", ra)
		case !okA && okB:
			note(path, "was added", rb)
		case okA && okB && ra.CID != rb.CID:
			note(path, "was changed", rb)
		}
	}
	for path := range written {
		coll, rkey, _ := strings.Cut(path, "/")
		ra, okA := base.Record(coll, rkey)
		rb, okB := now.Record(coll, rkey)
		compare(path, ra, okA, rb, okB)
	}
	did := base.DID.String()
	kids := func(t *Tree, parent string) Kids {
		if parent == "" {
			return t.Roots
		}
		if it := t.Nodes.Get(sameRepoParent(did, parent)); it != nil {
			return it.Children
		}
		return Kids{}
	}
	pathOf := func(it *Item) string { return it.Rec.Collection + "/" + it.Key() }
	for parent := range parents {
		if parent != "" && sameRepoParent(did, parent) == "" {
			continue // another identity's bullet: its siblings are not read here
		}
		a, b := kids(base, parent), kids(now, parent)
		inA := make(map[string]*Item, a.Len())
		for it := range a.Items() {
			inA[pathOf(it)] = it
		}
		for it := range b.Items() {
			path := pathOf(it)
			if written[path] {
				continue
			}
			if old, ok := inA[path]; ok {
				delete(inA, path)
				if old.Rec.CID != it.Rec.CID {
					note(path, "was changed", it.Rec)
				}
				continue
			}
			note(path, "was added", it.Rec)
		}
		for path, it := range inA {
			if written[path] {
				continue
			}
			rb, okB := now.Record(it.Rec.Collection, it.Key())
			compare(path, it.Rec, true, rb, okB)
		}
	}
	sort.Strings(out)
	if len(out) > 10 {
		out = append(out[:10], fmt.Sprintf("… and %d more", len(out)-10))
	}
	return out
}
