package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// displays Bulleted renders (app.bulleted.node#display knownValues).
var displays = []string{"expanded", "collapsed"}

// vocabNotices tells, once per distinct value, about a layout or display
// that Bulleted does not render: the sets are open, so the value is written
// as given, and the notice names the rendered values. layouts and
// displays are the values the call writes ("" for none).
func vocabNotices(p *outline.Planner, layouts, displayVals []string) {
	tell := func(field string, vals, known []string, shown string) {
		count := map[string]int{}
		var order []string
		for _, v := range vals {
			if v == "" || slices.Contains(known, v) {
				continue
			}
			if count[v] == 0 {
				order = append(order, v)
			}
			count[v]++
		}
		for _, v := range order {
			n := ""
			if count[v] > 1 {
				n = fmt.Sprintf(" (%d bullets)", count[v])
			}
			p.Note("%s %q%s is not one Bulleted renders (%s): written as given (an open set), shown %s", field, v, n, strings.Join(known, ", "), shown)
		}
	}
	tell("layout", layouts, lexicon.Layouts, "as a plain bullet")
	tell("display", displayVals, displays, "expanded")
}

// withVocab is in, followed by vocabNotices for the values it writes.
func withVocab(in outline.Intent, layouts, displayVals []string, notes ...string) outline.Intent {
	return annotated{Intent: in, Layouts: layouts, Displays: displayVals, Notes: notes}
}

// annotated is an intent with what the tool's input said beside it: notes
// from parsing the input, and the layouts and displays to check against
// the rendered vocabulary. A value (not a function), so that a dry run of
// it can be applied by plan id.
type annotated struct {
	Intent   outline.Intent
	Layouts  []string `json:",omitempty"`
	Displays []string `json:",omitempty"`
	Notes    []string `json:",omitempty"`
}

func (x annotated) Plan(p *outline.Planner) error {
	if err := x.Intent.Plan(p); err != nil {
		return err
	}
	for _, n := range x.Notes {
		p.Note("%s", n)
	}
	vocabNotices(p, x.Layouts, x.Displays)
	return nil
}

// nodeVocab lists the layouts and displays of nodes and their children.
func nodeVocab(nodes []intent.NewNode) (layouts, displayVals []string) {
	var walk func([]intent.NewNode)
	walk = func(ns []intent.NewNode) {
		for _, n := range ns {
			layouts, displayVals = append(layouts, n.Layout), append(displayVals, n.Display)
			walk(n.Children)
		}
	}
	walk(nodes)
	return layouts, displayVals
}

func argErr(format string, a ...any) error {
	return &outline.Error{Kind: outline.ErrInvalidInput, Msg: fmt.Sprintf(format, a...), Next: "see the tool's input schema"}
}

func position(a Args, parentKey string) outline.Position {
	return outline.Position{Parent: a.Str(parentKey), After: a.Str("after"), Where: a.Str("position")}
}

// writeTool is a write tool: mk turns its checked arguments into an
// intent value (package intent), which apply_batch can combine; dry_run is
// added to its schema and its handler runs the intent as one operation.
func writeTool(t Tool, mk func(a Args) (outline.Intent, error)) Tool {
	t.Schema["properties"].(map[string]any)["dry_run"] = pDryRun
	t.Schema["properties"].(map[string]any)["plan"] = pPlan
	t.Intent = mk
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
		in, err := mk(a)
		if err != nil {
			return toolError(err)
		}
		return runWrite(ctx, env, t.Name, in, a, dry)
	}
	return t
}

// runWrite runs a write tool's intent: a dry run; the plan a dry run kept
// (plan=ID); or the write itself. A big destructive one (a plan or not)
// asks the person first when the client can ask (confirm.go).
func runWrite(ctx context.Context, env *Env, name string, in outline.Intent, a Args, dry bool) (*mcp.CallToolResult, error) {
	id := a.Str("plan")
	if id != "" && dry {
		return badArgs("plan applies a dry run's plan: pass it without dry_run")
	}
	out, ask, err := guarded(ctx, env, name, in, id, func(ctx context.Context) (*outline.Outcome, error) {
		if id != "" {
			if err := recheckSelection(ctx, env, id, in); err != nil {
				return nil, err
			}
			return env.Engine.Apply(ctx, id, in)
		}
		return env.Engine.Do(ctx, in, dry)
	})
	if ask != nil {
		return ask, nil
	}
	if err != nil {
		return toolError(sentPaths(name, a, err))
	}
	defer env.settle(out)
	return writeResult(out, a), nil
}

// nodeSchema is a bullet to insert, with children to depth more levels:
// written out, because many clients cannot follow $ref or recursion.
func nodeSchema(depth int) map[string]any {
	props := map[string]any{"text": pRef, "layout": pRef, "note": pRef, "completed": boolean("")} // layout as at the top
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
		Description: "Insert a bullet (text), or many: nodes (with children) or markdown (any depth).",
		Schema: obj(map[string]any{
			"parent":    str("Omit: top level; another's if it admits you."),
			"after":     pAfter,
			"position":  pPosition,
			"text":      pRef,
			"layout":    pLayout,
			"display":   pDisplay,
			"note":      pRef,
			"completed": boolean(""),
			"nodes":     map[string]any{"type": "array", "items": nodeSchema(InlineDepth - 1)},
			"markdown":  pRef,
		})}, func(a Args) (outline.Intent, error) {
		var nodes []intent.NewNode
		var notes []string
		has, err := a.Decode("nodes", &nodes)
		if err != nil {
			return nil, argErr("%v", err)
		}
		forms := 0
		for _, f := range []bool{has, a.OptStr("text") != nil, a.OptStr("markdown") != nil} {
			if f {
				forms++
			}
		}
		if forms > 1 {
			return nil, argErr("pass one of text, nodes or markdown")
		}
		switch {
		case a.OptStr("markdown") != nil:
			d, err := markup.Markdown(a.Str("markdown"))
			if err != nil {
				return nil, argErr("markdown: %v", err)
			}
			for _, n := range d.Notes {
				notes = append(notes, "markdown: "+n)
			}
			nodes = d.Nodes
		case !has:
			if a.OptStr("text") == nil {
				return nil, argErr("pass text for one bullet, or nodes or markdown for many")
			}
			done, err := a.Bool("completed", false)
			if err != nil {
				return nil, argErr("%v", err)
			}
			nodes = []intent.NewNode{{Text: a.Str("text"), Layout: a.Str("layout"), Display: a.Str("display"), Note: a.Str("note"), Completed: done}}
		}
		layouts, displayVals := nodeVocab(nodes)
		return withVocab(intent.Insert{Pos: position(a, "parent"), Nodes: nodes}, layouts, displayVals, notes...), nil
	})
}

func moveTool() Tool {
	return writeTool(Tool{Name: "move_node", Title: "Move bullets",
		Description: "Move node(s), the run from…to, or where (search's filters) to parent and/or position. split: new headings, each over an equal part of them (or of node's children), in place.",
		Schema: obj(map[string]any{
			"node":     pRef,
			"nodes":    strList(""),
			"where":    pWhere,
			"from":     pRef,
			"to":       pRef,
			"split":    strList(""),
			"parent":   str("New parent, or top; omit to keep."),
			"after":    pAfter,
			"position": pPosition,
		})}, func(a Args) (outline.Intent, error) {
		refs, hasNodes, err := a.Strings("nodes")
		if err != nil {
			return nil, argErr("%v", err)
		}
		where, err := whereArg(a)
		if err != nil {
			return nil, err
		}
		split, hasSplit, err := a.Strings("split")
		if err != nil {
			return nil, argErr("%v", err)
		}
		from, to := a.Str("from"), a.Str("to")
		if (from == "") != (to == "") {
			return nil, argErr("pass from and to together: the first and the last bullet of the run")
		}
		given := map[string]bool{"node": a.Str("node") != "", "nodes": hasNodes, "where": where != nil, "from/to": from != ""}
		pos := position(a, "parent")
		if hasSplit {
			if len(split) == 0 {
				return nil, argErr("split: give the new bullets' texts, one per run")
			}
			if pos != (outline.Position{}) {
				return nil, argErr("split puts the new bullets in the run's place: drop parent, after and position (move them after)")
			}
			if err := oneSelection(given, "node", "from/to"); err != nil {
				return nil, err
			}
			if given["nodes"] || given["where"] {
				return nil, argErr("split takes the run from…to, or node's children; not nodes or where")
			}
			return intent.MoveRun{From: from, To: to, Level: a.Str("node"), Split: split}, nil
		}
		if given["node"] && given["nodes"] {
			given["node"] = false // node and nodes together name one run
		}
		if err := oneSelection(given, "node", "nodes", "where", "from/to"); err != nil {
			return nil, err
		}
		switch {
		case where != nil:
			return intent.MoveWhere{Where: *where, Pos: pos}, nil
		case from != "":
			return intent.MoveRun{From: from, To: to, Pos: pos}, nil
		}
		if n := a.Str("node"); n != "" {
			refs = append([]string{n}, refs...)
		}
		return intent.Move{Nodes: refs, Pos: pos}, nil
	})
}

func completeTool() Tool {
	return writeTool(Tool{Name: "complete_todo", Title: "Tick a todo",
		Description: "Tick a todo: node or where; completed=false unticks. A non-todo becomes a todo.",
		Schema:      obj(map[string]any{"node": pRef, "where": pWhere, "completed": boolean("")}),
		Ann:         Annotations{Idempotent: true}}, func(a Args) (outline.Intent, error) {
		done, err := a.Bool("completed", true)
		if err != nil {
			return nil, argErr("%v", err)
		}
		where, err := nodeOrWhere(a)
		if err != nil {
			return nil, err
		}
		if where != nil {
			return intent.CompleteWhere{Where: *where, Done: done}, nil
		}
		return intent.Complete{Node: a.Str("node"), Done: done}, nil
	})
}

func updateTool() Tool {
	return writeTool(Tool{Name: "update_node", Title: "Edit a bullet",
		Description: "Set text, layout, display or note (\"\" removes it) of node or where, or find→replace in text: literal, RE2 (regex), whole #tag/@mention.",
		Schema: obj(map[string]any{"node": pRef, "where": pWhere, "text": pRef, "layout": pLayout, "display": pDisplay, "note": pRef,
			"find": pRef, "replace": pRef, "regex": pDryRun}),
		Ann: Annotations{Idempotent: true}}, func(a Args) (outline.Intent, error) {
		where, err := nodeOrWhere(a)
		if err != nil {
			return nil, err
		}
		regex, err := a.Bool("regex", false)
		if err != nil {
			return nil, argErr("%v", err)
		}
		ed := intent.Edit{Node: a.Str("node"), Text: a.OptStr("text"), Layout: a.OptStr("layout"), Display: a.OptStr("display"), Note: a.OptStr("note")}
		var rep *intent.Replace
		switch find, with := a.OptStr("find"), a.OptStr("replace"); {
		case find == nil && with == nil:
			if regex {
				return nil, argErr("regex applies to find: pass find and replace")
			}
		case find == nil || with == nil:
			return nil, argErr("pass find and replace together (replace \"\" deletes what find matches)")
		case ed.Text != nil:
			return nil, argErr("pass text (the whole new text) or find and replace, not both")
		default:
			rep = &intent.Replace{Find: *find, With: *with, Regex: regex}
		}
		var in outline.Intent = ed
		if where != nil || rep != nil {
			in = intent.EditWhere{Node: a.Str("node"), Where: where, Replace: rep, Edit: ed}
		}
		return withVocab(in, []string{a.Str("layout")}, []string{a.Str("display")}), nil
	})
}

func deleteTool() Tool {
	return writeTool(Tool{Name: "delete_node", Title: "Delete a bullet",
		Description: "Delete node or where, with notes; children: refuse (default), lift or subtree.",
		Schema:      obj(map[string]any{"node": pRef, "where": pWhere, "children": enum("", "refuse", "lift", "subtree")}),
		Ann:         Annotations{Destructive: true}}, func(a Args) (outline.Intent, error) {
		where, err := nodeOrWhere(a)
		if err != nil {
			return nil, err
		}
		if where != nil {
			return intent.DeleteWhere{Where: *where, Children: a.Str("children")}, nil
		}
		return intent.Delete{Node: a.Str("node"), Children: a.Str("children")}, nil
	})
}

func setOutlineTool() Tool {
	return writeTool(Tool{Name: "set_outline", Title: "Title an outline",
		Description: "Set the title/description of the outline or a subtree (root); \"\" removes.",
		Schema:      obj(map[string]any{"root": pRef, "title": pRef, "description": pRef}),
		Ann:         Annotations{Idempotent: true}}, func(a Args) (outline.Intent, error) {
		return intent.Outline{Root: a.Str("root"), Title: a.OptStr("title"), Description: a.OptStr("description")}, nil
	})
}
