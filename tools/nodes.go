package tools

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

func argErr(format string, a ...any) error {
	return &outline.Error{Kind: outline.ErrInvalidInput, Msg: fmt.Sprintf(format, a...), Next: "see the tool's input schema"}
}

func position(a Args, parentKey string) outline.Position {
	return outline.Position{Parent: a.Str(parentKey), After: a.Str("after"), Where: a.Str("position")}
}

// writeTool is a write tool whose plan apply_batch can combine: dry_run is
// added to its schema and its handler runs the plan as one operation.
func writeTool(t Tool, plan func(p *outline.Planner, a Args) error) Tool {
	t.Schema["properties"].(map[string]any)["dry_run"] = pDryRun
	t.Plan = plan
	t.Output = writeOutput
	if t.Family == "" {
		t.Family = FamilyEdit
	}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		if t.Guard != nil {
			if err := t.Guard(ctx, env, a); err != nil {
				return toolError(err)
			}
		}
		out, err := env.Engine.Do(ctx, dry, func(p *outline.Planner) error { return plan(p, a) })
		if err != nil {
			return toolError(err)
		}
		return writeResult(out, a), nil
	}
	return t
}

// nodeSchema is a bullet to insert, with children to depth more levels:
// written out, because many clients cannot follow $ref or recursion.
func nodeSchema(depth int) map[string]any {
	props := map[string]any{"text": pRef, "layout": pRef, "note": pRef, "completed": boolean("")}
	if depth > 0 {
		props["children"] = map[string]any{"type": "array", "items": nodeSchema(depth - 1)}
	}
	return obj(props, "text")
}

// InlineDepth is how many levels of nodes[].children the insert schema
// spells out; deeper outlines go in as markdown.
const InlineDepth = 2

func insertTool() Tool {
	return writeTool(Tool{Name: "insert_after", Title: "Insert bullets",
		Description: "Insert a bullet (text), or many: nodes (with children) or markdown (nested list, any depth).",
		Schema: obj(map[string]any{
			"parent":    str("Omit for the top level. Another identity's bullet (at:// URI) where its outline admits you as a contributor."),
			"after":     pAfter,
			"position":  pPosition,
			"text":      pRef,
			"layout":    pRef,
			"display":   enum("", "expanded", "collapsed"),
			"note":      pRef,
			"completed": boolean(""),
			"nodes":     map[string]any{"type": "array", "items": nodeSchema(InlineDepth - 1)},
			"markdown":  pRef,
		})}, func(p *outline.Planner, a Args) error {
		var nodes []outline.NewNode
		has, err := a.Decode("nodes", &nodes)
		if err != nil {
			return argErr("%v", err)
		}
		forms := 0
		for _, f := range []bool{has, a.OptStr("text") != nil, a.OptStr("markdown") != nil} {
			if f {
				forms++
			}
		}
		if forms > 1 {
			return argErr("pass one of text, nodes or markdown")
		}
		switch {
		case a.OptStr("markdown") != nil:
			d, err := markup.Markdown(a.Str("markdown"))
			if err != nil {
				return argErr("markdown: %v", err)
			}
			for _, n := range d.Notes {
				p.Note("markdown: %s", n)
			}
			nodes = d.Nodes
		case !has:
			if a.OptStr("text") == nil {
				return argErr("pass text for one bullet, or nodes or markdown for many")
			}
			done, err := a.Bool("completed", false)
			if err != nil {
				return argErr("%v", err)
			}
			nodes = []outline.NewNode{{Text: a.Str("text"), Layout: a.Str("layout"), Display: a.Str("display"), Note: a.Str("note"), Completed: done}}
		}
		return p.Insert(position(a, "parent"), nodes)
	})
}

func moveTool() Tool {
	return writeTool(Tool{Name: "move_node", Title: "Move bullets",
		Description: "Move a bullet (node) or sibling run (nodes) to a parent (top: top level) and/or position.",
		Schema: obj(map[string]any{
			"node":     pRef,
			"nodes":    strList(""),
			"parent":   str("New parent, or top; omit to keep."),
			"after":    pAfter,
			"position": pPosition,
		}), Guard: guardContributions}, func(p *outline.Planner, a Args) error {
		refs, _, err := a.Strings("nodes")
		if err != nil {
			return argErr("%v", err)
		}
		if n := a.Str("node"); n != "" {
			refs = append([]string{n}, refs...)
		}
		return p.Move(refs, position(a, "parent"))
	})
}

func completeTool() Tool {
	return writeTool(Tool{Name: "complete_todo", Title: "Tick a todo",
		Description: "Tick a todo (completed=false unticks). A non-todo becomes a todo.",
		Schema:      obj(map[string]any{"node": pRef, "completed": boolean("")}, "node"),
		Ann:         Annotations{Idempotent: true}}, func(p *outline.Planner, a Args) error {
		done, err := a.Bool("completed", true)
		if err != nil {
			return argErr("%v", err)
		}
		return p.Complete(a.Str("node"), done)
	})
}

func updateTool() Tool {
	return writeTool(Tool{Name: "update_node", Title: "Edit a bullet",
		Description: "Change a bullet's text, layout, display or note (\"\" removes a note).",
		Schema:      obj(map[string]any{"node": pRef, "text": pRef, "layout": pRef, "display": pRef, "note": pRef}, "node"),
		Ann:         Annotations{Idempotent: true}}, func(p *outline.Planner, a Args) error {
		return p.Edit(a.Str("node"), outline.Edit{Text: a.OptStr("text"), Layout: a.OptStr("layout"), Display: a.OptStr("display"), Note: a.OptStr("note")})
	})
}

func deleteTool() Tool {
	return writeTool(Tool{Name: "delete_node", Title: "Delete a bullet",
		Description: "Delete a bullet and its note. children: refuse (default), lift (into its place) or subtree.",
		Schema:      obj(map[string]any{"node": pRef, "children": enum("", "refuse", "lift", "subtree")}, "node"),
		Ann:         Annotations{Destructive: true}}, func(p *outline.Planner, a Args) error {
		return p.DeleteNode(a.Str("node"), a.Str("children"))
	})
}

func setOutlineTool() Tool {
	return writeTool(Tool{Name: "set_outline", Title: "Title an outline",
		Description: "Set the title/description of the outline or a subtree (root); \"\" removes.",
		Schema:      obj(map[string]any{"root": pRef, "title": pRef, "description": pRef}),
		Ann:         Annotations{Idempotent: true}}, func(p *outline.Planner, a Args) error {
		return p.SetOutline(a.Str("root"), a.OptStr("title"), a.OptStr("description"))
	})
}
