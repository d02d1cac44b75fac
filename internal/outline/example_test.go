package outline_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// printTree prints a tree's bullets, indented, with todos marked.
func printTree(items outline.Kids, depth int) {
	for it := range items.Items() {
		box := ""
		if it.Str("layout") == "todo" {
			box = "[ ] "
			if it.Str("completedAt") != "" {
				box = "[x] "
			}
		}
		fmt.Printf("%s- %s%s\n", strings.Repeat("  ", depth), box, it.Str("text"))
		printTree(it.Children, depth+1)
	}
}

// An engine plans an intent against one snapshot of the repository and
// commits it as one operation: here, a bullet with two children inserted
// at the top level of a fresh embedded store, then one child ticked.
func ExampleEngine_Do() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	repo, err := store.OpenLocal(dir)
	if err != nil {
		panic(err)
	}
	defer repo.Close()
	ctx := context.Background()
	e := outline.New(repo)

	out, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "Trip", Children: []intent.NewNode{
		{Text: "Book train", Layout: "todo"}, {Text: "Pack", Layout: "todo"}}}}}, false)
	if err != nil {
		panic(err)
	}
	fmt.Println(len(out.Plan.Writes), "writes,", out.Plan.Cost, "points")

	t, _ := e.Tree(ctx)
	book := t.Roots.At(0).Children.At(0).Key()
	if _, err := e.Do(ctx, intent.Complete{Node: book, Done: true}, false); err != nil {
		panic(err)
	}
	t, _ = e.Tree(ctx)
	printTree(t.Roots, 0)
	// Output:
	// 3 writes, 9 points
	// - Trip
	//   - [x] Book train
	//   - [ ] Pack
}

// A dry run plans and costs an intent and writes nothing: the plan's
// writes are there to show (or to check against a budget).
func ExampleEngine_Do_dryRun() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	repo, err := store.OpenLocal(dir)
	if err != nil {
		panic(err)
	}
	defer repo.Close()
	ctx := context.Background()
	e := outline.New(repo)

	out, err := e.DoFunc(ctx, true, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "Draft", Note: "not yet"}}}.Plan(p)
	})
	if err != nil {
		panic(err)
	}
	for _, w := range out.Plan.Writes {
		fmt.Println(w.Op, w.Collection)
	}
	t, _ := e.Tree(ctx)
	fmt.Println(t.Roots.Len(), "bullets written")
	// Output:
	// create app.bulleted.node
	// create app.bulleted.note
	// 0 bullets written
}
