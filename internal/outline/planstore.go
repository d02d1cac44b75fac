package outline

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// PlanStore keeps the plans of dry runs (and the plans held for a person's
// confirmation) where every process serving the identity finds them: the
// hosted service keeps them as rows, so that a plan made on one instance
// is applied on whichever instance gets the call, once, and only for the
// identity that made it. Without one (the default) an engine keeps its
// plans in its own memory (plans.go), where only it can apply them.
//
// A plan travels encoded (EncodePlan): its writes and what they replace as
// the operations journal records them, and of the tree it was planned on
// only what Apply compares with the outline then (the records it writes
// and the sibling lists it places bullets into or takes them from).
type PlanStore interface {
	// Put keeps plan id (body) until expires, replacing one kept under id.
	Put(ctx context.Context, id string, body []byte, expires time.Time) error
	// Take removes plan id and returns it; nil when it is not kept (never
	// made, expired, taken already, or another identity's).
	Take(ctx context.Context, id string) ([]byte, error)
	// Get returns plan id left in place (nil: not kept).
	Get(ctx context.Context, id string) ([]byte, error)
}

// planStoreTimeout bounds each call of a PlanStore.
const planStoreTimeout = 15 * time.Second

// SetPlanStore makes the engine keep its plans in ps (nil: its own memory).
func (e *Engine) SetPlanStore(ps PlanStore) {
	e.plans.mu.Lock()
	e.plans.rows = ps
	e.plans.mu.Unlock()
}

func (e *Engine) planStore() PlanStore {
	e.plans.mu.Lock()
	defer e.plans.mu.Unlock()
	return e.plans.rows
}

// memoryPlans is a PlanStore in memory (tests; several engines of one
// process sharing it stand for several instances).
type memoryPlans struct {
	mu    sync.Mutex
	plans map[string]memPlan
	Now   func() time.Time // nil: time.Now
}

type memPlan struct {
	body    []byte
	expires time.Time
}

func (m *memoryPlans) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *memoryPlans) Put(_ context.Context, id string, body []byte, expires time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.plans == nil {
		m.plans = map[string]memPlan{}
	}
	now := m.now()
	for k, p := range m.plans {
		if now.After(p.expires) {
			delete(m.plans, k)
		}
	}
	m.plans[id] = memPlan{body: body, expires: expires}
	return nil
}

func (m *memoryPlans) Take(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.plans[id]
	delete(m.plans, id)
	if !ok || m.now().After(p.expires) {
		return nil, nil
	}
	return p.body, nil
}

func (m *memoryPlans) Get(_ context.Context, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.plans[id]
	if !ok || m.now().After(p.expires) {
		return nil, nil
	}
	return p.body, nil
}

// planJSON is a kept plan as a PlanStore holds it.
type planJSON struct {
	Intent      string          `json:"intent"`
	Now         time.Time       `json:"now"`
	Made        time.Time       `json:"made"`
	Op          json.RawMessage `json:"op"` // writes, prev, batches, keys, undoes, summary
	Cost        int             `json:"cost"`
	Diagnostics []string        `json:"diagnostics,omitempty"`
	Created     []Created       `json:"created,omitempty"`
	Touched     []string        `json:"touched,omitempty"`
	Labels      []string        `json:"labels,omitempty"`
	Shared      map[string]bool `json:"shared,omitempty"`
	Verdict     Verdict         `json:"verdict"`
	// the tree it was planned on: where it stood, and the records Apply
	// compares (base)
	DID    string            `json:"did"`
	Commit string            `json:"commit"`
	Rev    string            `json:"rev"`
	Base   []json.RawMessage `json:"base"`
}

// encodePlan is kp as a PlanStore keeps it.
func encodePlan(kp *keptPlan) ([]byte, error) {
	p := kp.plan
	op, err := encodeOp(&Operation{ID: kp.id, DID: kp.base.DID.String(), Summary: p.Summary, Writes: p.Writes, Prev: p.Prev,
		Batches: p.Batches, Undoes: p.Undoes, Keys: kp.keys})
	if err != nil {
		return nil, err
	}
	j := planJSON{Intent: kp.intent, Now: kp.now, Made: kp.made, Op: op, Cost: p.Cost, Diagnostics: p.Diagnostics,
		Created: p.Created, Touched: p.Touched, Labels: p.Labels, Shared: p.Shared, Verdict: p.Verdict,
		DID: kp.base.DID.String(), Commit: kp.base.Commit, Rev: kp.base.Rev}
	// (Operation encodes a record's value as AT Protocol JSON: a base
	// record the same way, one write each)
	for _, r := range baseOf(kp.base, p) {
		raw, err := encodeOp(&Operation{Writes: []store.Write{{Op: store.Update, Collection: r.Collection, RKey: r.RKey}}, Prev: []*store.Record{&r}})
		if err != nil {
			return nil, err
		}
		j.Base = append(j.Base, raw)
	}
	return json.Marshal(j)
}

// decodePlan reads what encodePlan wrote, as plan id.
func decodePlan(id string, raw []byte) (*keptPlan, error) {
	var j planJSON
	if err := json.Unmarshal(raw, &j); err != nil {
		return nil, fmt.Errorf("kept plan %s: %w", id, err)
	}
	op, err := decodeOp(j.Op)
	if err != nil {
		return nil, fmt.Errorf("kept plan %s: %w", id, err)
	}
	snap := &store.Snapshot{Commit: j.Commit, Rev: j.Rev}
	if err := snap.DID.UnmarshalText([]byte(j.DID)); err != nil {
		return nil, fmt.Errorf("kept plan %s: %w", id, err)
	}
	for _, b := range j.Base {
		r, err := decodeOp(b)
		if err != nil || len(r.Prev) != 1 || r.Prev[0] == nil {
			return nil, fmt.Errorf("kept plan %s: a base record does not read back (%v)", id, err)
		}
		snap.Records = append(snap.Records, *r.Prev[0])
	}
	plan := &Plan{Writes: op.Writes, Prev: op.Prev, Batches: op.Batches, Undoes: op.Undoes, Summary: op.Summary,
		Cost: j.Cost, Diagnostics: j.Diagnostics, Created: j.Created, Touched: j.Touched, Labels: j.Labels, Shared: j.Shared, Verdict: j.Verdict}
	kp := &keptPlan{id: id, intent: j.Intent, base: Rebuild(snap, nil), plan: plan, keys: op.Keys, now: j.Now, made: j.Made}
	kp.size = planSize(plan)
	return kp, nil
}

// baseOf is what of t changedWhereTouched reads for plan: the records it
// writes, and the parents it places bullets into or takes them from with
// their children (the sibling lists compared).
func baseOf(t *Tree, plan *Plan) []store.Record {
	did := t.DID.String()
	seen := map[string]bool{}
	var out []store.Record
	add := func(r store.Record) {
		if k := r.Collection + "/" + r.RKey; !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	parents := map[string]bool{}
	addParent := func(v map[string]any) {
		if v != nil {
			p, _ := v["parent"].(string)
			parents[p] = true
		}
	}
	for i, w := range plan.Writes {
		if r, ok := t.Record(w.Collection, w.RKey); ok {
			add(r)
		}
		if w.Collection == lexicon.Node || w.Collection == lexicon.Mirror {
			addParent(w.Value)
			if i < len(plan.Prev) && plan.Prev[i] != nil {
				addParent(plan.Prev[i].Value.Map())
			}
		}
		if w.Collection == lexicon.Node && w.Op == store.Delete {
			parents["at://"+did+"/"+lexicon.Node+"/"+w.RKey] = true
		}
	}
	for p := range parents {
		var kids Kids
		if p == "" {
			kids = t.Roots
		} else if key := sameRepoParent(did, p); key != "" {
			if it := t.Nodes.Get(key); it != nil {
				add(it.Rec)
				kids = it.Children
			}
		}
		for it := range kids.Items() {
			add(it.Rec)
		}
	}
	return out
}

func (e *Engine) putRow(ps PlanStore, kp *keptPlan) error {
	raw, err := encodePlan(kp)
	if err != nil {
		return err
	}
	if len(raw) > maxPlanBytes {
		return fmt.Errorf("plan %s is %d bytes encoded, over %d", kp.id, len(raw), maxPlanBytes)
	}
	ctx, cancel := context.WithTimeout(context.Background(), planStoreTimeout)
	defer cancel()
	return ps.Put(ctx, kp.id, raw, kp.made.Add(planTTL))
}

// takeRow takes plan id from the engine's PlanStore: nil when it is not
// kept; a store that fails answers a plan whose err says so.
func (e *Engine) takeRow(ps PlanStore, id string, take bool) *keptPlan {
	ctx, cancel := context.WithTimeout(context.Background(), planStoreTimeout)
	defer cancel()
	var raw []byte
	var err error
	if take {
		raw, err = ps.Take(ctx, id)
	} else {
		raw, err = ps.Get(ctx, id)
	}
	if err != nil {
		return &keptPlan{id: id, err: fmt.Errorf("reading the kept plans: %w", err)}
	}
	if raw == nil {
		return nil
	}
	kp, err := decodePlan(id, raw)
	if err != nil {
		return &keptPlan{id: id, err: err}
	}
	if e.Now().Sub(kp.made) > planTTL {
		return nil
	}
	return kp
}
