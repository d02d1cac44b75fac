package outline_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// rowTexts are the items' texts, comma-separated.
func rowTexts(items outline.Kids) string {
	var out []string
	for it := range items.Items() {
		out = append(out, it.Str("text"))
	}
	return strings.Join(out, ", ")
}

// outdent is an intent written with the kit alone: it moves a bullet out
// of its parent to stand right after it. Target resolves a Position (here
// "after the parent, under the grandparent") to a sibling list and an
// index; Place gives sortKeys for bullets there; Reparent writes the move.
type outdent struct{ node string }

func (o outdent) Plan(p *outline.Planner) error {
	it, err := p.Node(o.node)
	if err != nil {
		return err
	}
	t := p.Tree()
	par := t.Parent(it)
	if par == nil {
		return outline.Fail(outline.ErrInvalidInput, "pass a bullet that has a parent", "%s is at the top level", it.Key())
	}
	grand := t.Parent(par)
	where := outline.Position{Parent: "top", After: par.Key()}
	if grand != nil {
		where.Parent = grand.Key()
	}
	parent, sibs, at, err := p.Target(where, nil, nil)
	if err != nil {
		return err
	}
	keys, err := p.Place(sibs, at, 1)
	if err != nil {
		return err
	}
	p.Reparent(it, parent, keys[0], "")
	p.Summary("outdent %s", outline.Name(it))
	return nil
}

// The kit's placing primitives: a new intent that moves a bullet one level
// out, right after its former parent.
func ExamplePlanner_Target() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	repo, err := store.OpenLocal(dir)
	if err != nil {
		panic(err)
	}
	defer repo.Close()
	ctx := context.Background()
	e := outline.New(repo)
	in := intent.Insert{Nodes: []intent.NewNode{{Text: "Groceries", Children: []intent.NewNode{{Text: "milk"}, {Text: "call the baker"}}}, {Text: "Garden"}}}
	if _, err := e.Do(ctx, in, false); err != nil {
		panic(err)
	}
	t, _ := e.Tree(ctx)
	baker := t.Roots.At(0).Children.At(1).Key()
	out, err := e.Do(ctx, outdent{baker}, false)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(out.Plan.Writes), "write")
	t, _ = e.Tree(ctx)
	fmt.Println(rowTexts(t.Roots))
	fmt.Println(rowTexts(t.Roots.At(0).Children))
	// Output:
	// 1 write
	// Groceries, call the baker, Garden
	// milk
}

// adopt is a bad intent: it hangs a bullet under its own child, which
// the kit does not check (Reparent writes what it is told).
type adopt struct{ node, under string }

func (a adopt) Plan(p *outline.Planner) error {
	it, err := p.Node(a.node)
	if err != nil {
		return err
	}
	under, err := p.Node(a.under)
	if err != nil {
		return err
	}
	keys, err := p.Place(p.Children(under), 0, 1)
	if err != nil {
		return err
	}
	p.Reparent(it, under, keys[0], "")
	return nil
}

// The kit is not trusted: whatever an intent plans passes the engine's
// gate before anything is sent, and a plan that would make a parent cycle
// is refused whole.
func ExamplePlanner_Reparent() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	repo, err := store.OpenLocal(dir)
	if err != nil {
		panic(err)
	}
	defer repo.Close()
	ctx := context.Background()
	e := outline.New(repo)
	in := intent.Insert{Nodes: []intent.NewNode{{Text: "parent", Children: []intent.NewNode{{Text: "child"}}}}}
	if _, err := e.Do(ctx, in, false); err != nil {
		panic(err)
	}
	t, _ := e.Tree(ctx)
	par, child := t.Roots.At(0), t.Roots.At(0).Children.At(0)
	_, err = e.Do(ctx, adopt{par.Key(), child.Key()}, false)
	fmt.Println(errors.Is(err, outline.ErrCycle))
	t, _ = e.Tree(ctx)
	fmt.Println(t.Roots.Len(), "top-level bullet,", t.Detached.Len(), "detached")
	// Output:
	// true
	// 1 top-level bullet, 0 detached
}
