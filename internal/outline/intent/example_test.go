package intent_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

func texts(items outline.Kids) string {
	var out []string
	for it := range items.Items() {
		out = append(out, it.Str("text"))
	}
	return strings.Join(out, ", ")
}

// Sort orders a bullet's children with the fewest sortKey writes: here
// three of five top-level bullets are out of place, and only they are
// rewritten.
func ExampleSort() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	repo, err := store.OpenLocal(dir)
	if err != nil {
		panic(err)
	}
	defer repo.Close()
	ctx := context.Background()
	e := outline.New(repo)
	var nodes []intent.NewNode
	for _, t := range []string{"item 10", "item 2", "item 3", "Item 1", "item 20"} {
		nodes = append(nodes, intent.NewNode{Text: t})
	}
	if _, err := e.Do(ctx, intent.Insert{Nodes: nodes}, false); err != nil {
		panic(err)
	}
	out, err := e.Do(ctx, intent.Sort{By: intent.SortText}, false)
	if err != nil {
		panic(err)
	}
	fmt.Println(out.Plan.Summary)
	fmt.Println(len(out.Plan.Writes), "sortKeys rewritten")
	t, _ := e.Tree(ctx)
	fmt.Println(texts(t.Roots))
	// Output:
	// sort the 5 children of the top level by text
	// 2 sortKeys rewritten
	// Item 1, item 2, item 3, item 10, item 20
}

// shout is an intent written outside the engine with the kit alone: it
// upper-cases the text of a bullet's children.
type shout struct{ parent string }

func (s shout) Plan(p *outline.Planner) error {
	par, err := p.Node(s.parent)
	if err != nil {
		return err
	}
	kids := p.Children(par)
	for it := range kids.Items() {
		v := it.Rec.Value.Map()
		v["text"] = strings.ToUpper(it.Str("text"))
		p.Update(it.Rec, v, "")
	}
	p.Touch(par.Key())
	p.Summary("shout the %d children of %s", kids.Len(), outline.Name(par))
	return nil
}

// A new intent is a value with a Plan method that uses the kit (the
// Planner's exported methods); the engine runs it as one operation, with
// dry runs, budget, resume and undo, and checks its rules on the plan.
func Example_newIntent() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	repo, err := store.OpenLocal(dir)
	if err != nil {
		panic(err)
	}
	defer repo.Close()
	ctx := context.Background()
	e := outline.New(repo)
	if _, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "Groceries", Children: []intent.NewNode{{Text: "milk"}, {Text: "bread"}}}}}, false); err != nil {
		panic(err)
	}
	t, _ := e.Tree(ctx)
	key := t.Roots.At(0).Key()

	dry, err := e.Do(ctx, shout{key}, true)
	if err != nil {
		panic(err)
	}
	fmt.Println("dry run:", len(dry.Plan.Writes), "writes,", dry.Plan.Cost, "points")
	if _, err := e.Do(ctx, shout{key}, false); err != nil {
		panic(err)
	}
	t, _ = e.Tree(ctx)
	fmt.Println(texts(t.Roots.At(0).Children))
	if _, err := e.Undo(ctx, 1, "", false); err != nil {
		panic(err)
	}
	t, _ = e.Tree(ctx)
	fmt.Println("after undo:", texts(t.Roots.At(0).Children))
	// Output:
	// dry run: 2 writes, 4 points
	// MILK, BREAD
	// after undo: milk, bread
}
