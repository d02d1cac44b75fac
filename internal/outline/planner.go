package outline

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Planner accumulates the writes of one plan. Its exported methods are the
// kit (kit.go) that intents (package intent) plan with, and Batch.
//
// Several changes to one record within a plan fold into one write, decided
// by the record's state before the plan and after the last change:
//
//	before   after    write
//	absent   absent   none (create then delete)
//	absent   present  create (with the last value)
//	present  absent   delete
//	present  present  update (with the last value), none if the value is unchanged
//
// so delete+create is an update, create+delete is nothing, update+delete is
// a delete, and an update to the value already there is no write at all.
type Planner struct {
	e    *Engine
	ctx  context.Context
	t    *Tree // what the plan sees now (after Batch steps: with earlier steps applied)
	base *Tree // the snapshot the plan is made against
	now  time.Time
	keys *keyList

	plan    Plan
	writes  []store.Write // in plan order; Op "" = folded away
	labels  []string
	step    string          // the batch op being planned ("ops[1]"), for labels
	index   map[recPath]int // index in writes (a write folded away keeps its record's name, with Op "")
	priors  []priorRec      // by index in writes: the record before the plan
	created map[string]bool // paths of records this plan's key list minted
	dirty   []int           // writes changed since the tree was last advanced
	shared  map[string]bool // parents in other repositories admitted for contributions (SharedKeys)
	cross   *crossCheck     // other repositories read for mirror cycles (crosscycle.go)
}

// priorRec is a record's state in the snapshot the plan is made against
// (rec nil: absent), and its item there, for a node or a mirror (rec is
// then the item's own record, which is never modified).
type priorRec struct {
	rec  *store.Record
	item *Item
}

func (pr priorRec) exists() bool { return pr.rec != nil }

// keyList hands out record keys: the keys an earlier attempt of the same
// operation minted first (so that a re-plan creates the same records), then
// new TIDs.
type keyList struct {
	clock *syntax.TIDClock
	keys  []string
	next  int
}

func (k *keyList) get() string {
	if k.next < len(k.keys) {
		s := k.keys[k.next]
		k.next++
		return s
	}
	s := k.clock.Next().String()
	for refusedKey(s) { // the PDS would refuse the whole batch for it
		s = k.clock.Next().String()
	}
	k.keys = append(k.keys, s)
	k.next++
	return s
}

func (e *Engine) newPlanner(ctx context.Context, t *Tree, now time.Time, keys *keyList) *Planner {
	keys.next = 0
	return &Planner{e: e, ctx: ctx, t: t, base: t, now: now, keys: keys,
		index: map[recPath]int{}, created: map[string]bool{}}
}

// now is the timestamp used for createdAt and completedAt: one per
// operation, so that a re-plan writes the same values.
func (p *Planner) stamp() string {
	return p.now.UTC().Format("2006-01-02T15:04:05.000Z")
}

// newKey returns the next record key of the operation.
func (p *Planner) newKey() string { return p.keys.get() }

// note adds a diagnostic.
func (p *Planner) note(format string, args ...any) {
	p.plan.Diagnostics = append(p.plan.Diagnostics, fmt.Sprintf(format, args...))
}

// review adds a note only a dry run shows.
func (p *Planner) review(format string, args ...any) {
	p.plan.Review = append(p.plan.Review, fmt.Sprintf(format, args...))
}

// summary sets the plan's one-line summary.
func (p *Planner) summary(format string, args ...any) {
	p.plan.Summary = fmt.Sprintf(format, args...)
}

// touch marks a record key whose neighbourhood the result should show.
func (p *Planner) touch(rkey string) { p.plan.Touched = append(p.plan.Touched, rkey) }

// record returns the record at coll/rkey in the plan's base snapshot.
func (p *Planner) record(coll, rkey string) (store.Record, bool) {
	return p.base.Record(coll, rkey)
}

// add records one change of a record, folding it with earlier changes of
// the same record in this plan (see Planner).
func (p *Planner) add(w store.Write, prior priorRec, label string) {
	path := recPath{w.Collection, w.RKey}
	if p.step != "" { // within a batch: which op ("ops[1].nodes[0]")
		label = strings.TrimSuffix(p.step+"."+label, ".")
	}
	i, seen := p.index[path]
	if !seen {
		i = len(p.writes)
		p.index[path] = i
		p.writes = append(p.writes, store.Write{})
		p.labels = append(p.labels, label)
		p.priors = append(p.priors, prior)
	} else {
		prior = p.priors[i]
		if label != "" {
			p.labels[i] = label
		}
	}
	p.dirty = append(p.dirty, i)
	present := w.Op != store.Delete
	var out store.Write
	switch {
	case !prior.exists() && !present:
	case !prior.exists() && present:
		out = store.Write{Op: store.Create, Collection: w.Collection, RKey: w.RKey, Value: w.Value}
	case prior.exists() && !present:
		out = store.Write{Op: store.Delete, Collection: w.Collection, RKey: w.RKey}
	default:
		if !prior.rec.Value.Equal(store.PlannedValue(w.Value)) { // DAG-CBOR is canonical
			out = store.Write{Op: store.Update, Collection: w.Collection, RKey: w.RKey, Value: w.Value}
		}
	}
	if out.Op == "" {
		out.Collection, out.RKey = w.Collection, w.RKey // folded away: still named
	}
	p.writes[i] = out
}

// priorOf is the state of coll/rkey before the plan (as far as the plan's
// base snapshot knows).
func (p *Planner) priorOf(coll, rkey string) priorRec {
	if i, ok := p.index[recPath{coll, rkey}]; ok {
		return p.priors[i]
	}
	if coll == lexicon.Node || coll == lexicon.Mirror {
		m := &p.base.Nodes
		if coll == lexicon.Mirror {
			m = &p.base.Mirrors
		}
		if it := m.Get(rkey); it != nil {
			return priorRec{rec: &it.Rec, item: it}
		}
		return priorRec{}
	}
	rec, ok := p.record(coll, rkey)
	if !ok {
		return priorRec{}
	}
	return priorRec{rec: &rec}
}

// create adds a create; label names the input it came from ("nodes[1]"). A
// record this operation already created in an earlier attempt (same key) is
// left as it is and counted as done.
func (p *Planner) create(coll, rkey string, value map[string]any, label string) {
	pr := p.priorOf(coll, rkey)
	if pr.exists() && p.keys.minted(rkey) && !p.written(coll, rkey) {
		p.note("%s %s was already created by an earlier attempt of this operation", shortColl(coll), rkey)
		p.createdEntry(coll, rkey, pr.rec.Value.Map(), label)
		return
	}
	p.add(store.Write{Op: store.Create, Collection: coll, RKey: rkey, Value: value}, pr, label)
	p.createdEntry(coll, rkey, value, label)
}

func (p *Planner) createdEntry(coll, rkey string, value map[string]any, label string) {
	if coll == lexicon.Node || coll == lexicon.Mirror || coll == lexicon.Comment {
		sk, _ := value["sortKey"].(string)
		txt, _ := value["text"].(string)
		p.plan.Created = append(p.plan.Created, Created{URI: p.t.uri(coll, rkey), RKey: rkey, SortKey: sk, Input: label, Text: txt})
	}
}

func (p *Planner) written(coll, rkey string) bool {
	_, ok := p.index[recPath{coll, rkey}]
	return ok
}

func (k *keyList) minted(rkey string) bool {
	for _, s := range k.keys[:k.next] {
		if s == rkey {
			return true
		}
	}
	return false
}

func shortColl(coll string) string { return strings.TrimPrefix(coll, "app.bulleted.") }

// update replaces rec's value with value (callers start from a copy of the
// old value, so unknown fields survive).
func (p *Planner) update(rec store.Record, value map[string]any, label string) {
	p.add(store.Write{Op: store.Update, Collection: rec.Collection, RKey: rec.RKey, Value: value},
		p.priorOf(rec.Collection, rec.RKey), label)
}

// delete removes rec.
func (p *Planner) delete(rec store.Record, label string) {
	p.add(store.Write{Op: store.Delete, Collection: rec.Collection, RKey: rec.RKey},
		p.priorOf(rec.Collection, rec.RKey), label)
}

// Step is one intent of a Batch and the tool it came from.
type Step struct {
	Tool   string
	Intent Intent
}

// Batch plans several intents in order against one snapshot; each sees the
// ones before it. An error names the step ("ops[2] (move_node): …").
func (p *Planner) Batch(steps []Step) error {
	if len(steps) == 0 {
		return fail(ErrInvalidInput, "pass ops: [{tool, args}, …]", "no operations")
	}
	var sums []string
	defer func() { p.step = "" }()
	for i, s := range steps {
		p.step = fmt.Sprintf("ops[%d]", i)
		if err := s.Intent.Plan(p); err != nil {
			var oe *Error
			if errors.As(err, &oe) {
				return &Error{Kind: oe.Kind, Msg: fmt.Sprintf("ops[%d] (%s): %s", i, s.Tool, oe.Msg), Next: oe.Next, Data: oe.Data}
			}
			return fmt.Errorf("ops[%d] (%s): %w", i, s.Tool, err)
		}
		sums = append(sums, p.plan.Summary)
		p.advance()
		if err := p.mirrorCycle(); err != nil {
			oe := err.(*Error)
			return &Error{Kind: oe.Kind, Msg: fmt.Sprintf("ops[%d] (%s): %s", i, s.Tool, oe.Msg), Next: oe.Next, Data: oe.Data}
		}
	}
	p.summary("%d operation(s): %s", len(steps), strings.Join(sums, "; "))
	return nil
}

// advance brings the planner's tree up to the writes planned so far, so the
// next step of a batch sees them: the records the last step changed are
// applied to the tree (Tree.Next), at the cost of what changed.
func (p *Planner) advance() {
	if len(p.dirty) == 0 {
		return
	}
	changes := make([]store.Record, 0, len(p.dirty))
	for _, i := range p.dirty {
		w := p.writes[i]
		switch w.Op {
		case store.Create, store.Update:
			changes = append(changes, store.Record{Collection: w.Collection, RKey: w.RKey, Value: store.PlannedValue(w.Value)})
		case store.Delete:
			changes = append(changes, store.Record{Collection: w.Collection, RKey: w.RKey})
		default: // folded away: the record as it was before the plan
			if pr := p.priors[i]; pr.exists() {
				changes = append(changes, *pr.rec)
			} else {
				changes = append(changes, store.Record{Collection: w.Collection, RKey: w.RKey})
			}
		}
	}
	p.dirty = p.dirty[:0]
	p.t = p.t.Next(p.base.Commit, p.base.Rev, changes)
}

// finish prices the plan and names what each write replaces (Plan.Prev,
// which undo reads; no inverse writes are built: they were never read, and
// made every dry-run delete decode each deleted record). The rules are
// checked by the gate (gate.go), on this plan as on every other.
func (p *Planner) finish() (*Plan, error) {
	if err := p.mirrorCycle(); err != nil {
		return nil, err
	}
	ws := make([]store.Write, 0, len(p.writes))
	labels := make([]string, 0, len(p.writes))
	prev := make([]*store.Record, 0, len(p.writes))
	items := make([]*Item, 0, len(p.writes))
	for i, w := range p.writes {
		if w.Op == "" {
			continue
		}
		ws = append(ws, w)
		labels = append(labels, p.labels[i])
		pr := p.priors[i]
		items = append(items, pr.item)
		prev = append(prev, pr.rec) // shared, never modified
	}
	p.plan.Writes = ws
	p.plan.Prev = prev
	p.plan.items, p.plan.base = items, p.base
	p.plan.Labels = labels
	p.plan.Shared = p.shared
	p.plan.Cost = store.Cost(ws)
	p.plan.Batches = cutBatches(ws)
	return &p.plan, nil
}

// atInts returns v with Go ints as int64, the integer type of AT Protocol
// data (values built by the planner, such as facet indexes, hold ints).
func atInts(v any) any {
	switch x := v.(type) {
	case int:
		return int64(x)
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			if n := atInts(e); !sameScalar(n, e) {
				if out == nil {
					out = maps.Clone(x)
				}
				out[k] = n
			}
		}
		if out != nil {
			return out
		}
	case []any:
		var out []any
		for i, e := range x {
			if n := atInts(e); !sameScalar(n, e) {
				if out == nil {
					out = append([]any(nil), x...)
				}
				out[i] = n
			}
		}
		if out != nil {
			return out
		}
	}
	return v
}

// sameScalar reports whether atInts left e as it was.
func sameScalar(n, e any) bool {
	switch e.(type) {
	case int:
		return false
	case map[string]any, []any:
		return reflect.ValueOf(n).UnsafePointer() == reflect.ValueOf(e).UnsafePointer()
	}
	return true
}
