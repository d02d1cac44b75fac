package outline_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestPlanStoreSharedEngines: two engines over one repository keep their
// plans in one PlanStore (as two hosted instances do in Postgres): a plan
// made by one is applied by the other, once; a plan travels with what
// Apply compares (the siblings where it places bullets), so a bullet added
// there since the dry run refuses it (ErrConflict, naming the bullet),
// and a change elsewhere does not.
func TestPlanStoreSharedEngines(t *testing.T) {
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	shared := &outline.MemoryPlans{}
	e1, e2 := outline.New(l), outline.New(l)
	e1.SetPlanStore(shared)
	e2.SetPlanStore(shared)
	ctx := context.Background()
	out, err := e1.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "P", Children: []intent.NewNode{{Text: "a"}, {Text: "b"}}}, {Text: "Q"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	key := map[string]string{}
	for _, c := range out.Plan.Created {
		key[c.Text] = c.RKey
	}
	under := func(parent, text string) intent.Insert {
		return intent.Insert{Pos: outline.Position{Parent: key[parent]}, Nodes: []intent.NewNode{{Text: text}}}
	}
	dry := func(in intent.Insert) string {
		t.Helper()
		d, err := e1.Do(ctx, in, true)
		if err != nil || d.PlanID == "" {
			t.Fatalf("dry run: %v, plan %q", err, d.PlanID)
		}
		return d.PlanID
	}

	c := under("P", "c")
	id := dry(c)
	if _, err := e2.Apply(ctx, id, c); err != nil {
		t.Fatalf("applied by the other engine: %v", err)
	}
	if _, err := e1.Apply(ctx, id, c); err == nil {
		t.Fatal("a plan applied twice")
	}

	d := under("P", "d")
	id = dry(d)
	if _, err := e1.Do(ctx, under("P", "sneaky"), false); err != nil {
		t.Fatal(err)
	}
	_, err = e2.Apply(ctx, id, d)
	var oe *outline.Error
	if !errors.As(err, &oe) || oe.Kind != outline.ErrConflict || !strings.Contains(oe.Msg, "sneaky") {
		t.Fatalf("a sibling added since the dry run: want a conflict naming it, got %v", err)
	}

	e := under("P", "e")
	id = dry(e)
	if _, err := e1.Do(ctx, under("Q", "elsewhere"), false); err != nil {
		t.Fatal(err)
	}
	if _, err := e2.Apply(ctx, id, e); err != nil {
		t.Fatalf("a change elsewhere refused the plan: %v", err)
	}
	tr, err := e2.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for it := range tr.Nodes.Get(key["P"]).Children.Items() {
		s, _ := it.Rec.Value.Text("text")
		texts = append(texts, s)
	}
	if got := strings.Join(texts, ","); got != "a,b,c,sneaky,e" {
		t.Fatalf("under P: %s", got)
	}
}

// failingPlans is a PlanStore that cannot keep anything (a database down).
type failingPlans struct{}

func (failingPlans) Put(context.Context, string, []byte, time.Time) error {
	return errors.New("the plan store is down")
}
func (failingPlans) Take(context.Context, string) ([]byte, error) { return nil, nil }
func (failingPlans) Get(context.Context, string) ([]byte, error)  { return nil, nil }

// TestPlanNotKeptSaid: a dry run whose plan cannot be kept (the store
// fails) offers no plan id and says why, rather than leaving it out.
func TestPlanNotKeptSaid(t *testing.T) {
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	e := outline.New(l)
	e.SetPlanStore(failingPlans{})
	out, err := e.Do(context.Background(), intent.Insert{Nodes: []intent.NewNode{{Text: "a"}}}, true)
	if err != nil {
		t.Fatal(err)
	}
	said := strings.Join(out.Plan.Diagnostics, "\n")
	if out.PlanID != "" || !strings.Contains(said, "no plan id") || !strings.Contains(said, "the plan store is down") {
		t.Fatalf("plan id %q, diagnostics:\n%s", out.PlanID, said)
	}
}
