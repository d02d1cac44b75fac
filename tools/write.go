package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
)

func argErr(format string, a ...any) error {
	return &outline.Error{Kind: outline.ErrInvalidInput, Msg: fmt.Sprintf(format, a...), Next: "see the tool's input schema"}
}

func position(a Args, parentKey string) outline.Position {
	return outline.Position{Parent: a.Str(parentKey), After: a.Str("after"), Where: a.Str("position")}
}

func writeTool(name, title, desc string, props map[string]any, required []string, destructive, idempotent bool, plan func(p *outline.Planner, a Args) error) Tool {
	props["dry_run"] = pDryRun
	t := Tool{Name: name, Title: title, Description: desc, Schema: obj(props, required...),
		Destructive: destructive, Idempotent: idempotent, Plan: plan}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		out, err := env.Engine.Do(ctx, dry, func(p *outline.Planner) error { return plan(p, a) })
		if err != nil {
			return toolError(err)
		}
		return writeResult(out), nil
	}
	return t
}

var nodeSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"text":      str("The bullet's text (at most 2,000 graphemes)."),
		"layout":    str("bullet (default), todo, h1, h2, h3, codeBlock, quoteBlock; other values are kept as given."),
		"display":   enum("Fold hint for readers.", "expanded", "collapsed"),
		"completed": boolean("Create the todo already ticked (one write)."),
		"note":      str("Longer text stored as the bullet's co-keyed note."),
		"children":  map[string]any{"type": "array", "items": map[string]any{"$ref": "#/$defs/node"}},
	},
	"required":             []string{"text"},
	"additionalProperties": false,
}

func writeTools() []Tool {
	insert := writeTool("insert_after", "Insert bullets",
		"Insert one bullet (text, layout, note, completed) or many nested bullets (nodes) under parent, after a sibling or first/last. Notes are created in the same commit. Returns the created record keys.",
		map[string]any{
			"parent":    str("Parent bullet (" + refDesc + "); omitted = top level."),
			"after":     pAfter,
			"position":  pPosition,
			"text":      str("Text of a single bullet."),
			"layout":    str("Layout of a single bullet (bullet, todo, h1, h2, h3, codeBlock, quoteBlock)."),
			"display":   enum("Fold hint of a single bullet.", "expanded", "collapsed"),
			"note":      str("Note of a single bullet."),
			"completed": boolean("Create a single todo already ticked."),
			"nodes":     map[string]any{"type": "array", "description": "Many bullets, nested with children, inserted in order.", "items": map[string]any{"$ref": "#/$defs/node"}},
		}, nil, false, false,
		func(p *outline.Planner, a Args) error {
			var nodes []outline.NewNode
			has, err := a.Decode("nodes", &nodes)
			if err != nil {
				return argErr("%v", err)
			}
			if has && a.OptStr("text") != nil {
				return argErr("pass either text or nodes, not both")
			}
			if !has {
				if a.OptStr("text") == nil {
					return argErr("pass text for one bullet, or nodes for many")
				}
				done, err := a.Bool("completed", false)
				if err != nil {
					return argErr("%v", err)
				}
				nodes = []outline.NewNode{{Text: a.Str("text"), Layout: a.Str("layout"), Display: a.Str("display"), Note: a.Str("note"), Completed: done}}
			}
			return p.Insert(position(a, "parent"), nodes)
		})
	insert.Schema["$defs"] = map[string]any{"node": nodeSchema}

	move := writeTool("move_node", "Move bullets",
		"Move one bullet (node) or a run of siblings (nodes, kept in their order) to a new parent and/or position. Reorder = move with the same parent. One update per bullet; children come along.",
		map[string]any{
			"node":     str("The bullet to move (" + refDesc + ")."),
			"nodes":    map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "Several sibling bullets to move together."},
			"parent":   str("New parent (" + refDesc + "), or top for the top level; omitted = current parent."),
			"after":    pAfter,
			"position": pPosition,
		}, nil, false, false,
		func(p *outline.Planner, a Args) error {
			refs, _, err := a.Strings("nodes")
			if err != nil {
				return argErr("%v", err)
			}
			if n := a.Str("node"); n != "" {
				refs = append([]string{n}, refs...)
			}
			return p.Move(refs, position(a, "parent"))
		})

	complete := writeTool("complete_todo", "Tick a todo",
		"Mark a todo complete (completedAt set) or not (completed=false). A bullet that is not a todo becomes one, and the result says so.",
		map[string]any{"node": str("The todo (" + refDesc + ")."), "completed": boolean("true (default) ticks, false unticks.")},
		[]string{"node"}, false, true,
		func(p *outline.Planner, a Args) error {
			done, err := a.Bool("completed", true)
			if err != nil {
				return argErr("%v", err)
			}
			return p.Complete(a.Str("node"), done)
		})

	policy := writeTool("set_comment_policy", "Set who may comment",
		"Set the comment policy of the whole repository (root omitted) or of one of your bullets and its subtree. allow [\"mentioned\"] lets identities mentioned in the bullet or above comment; [] closes comments. remove=true deletes the policy (no policy anywhere = nobody may comment).",
		map[string]any{
			"root":   str("Your bullet whose subtree the policy governs (" + refDesc + "); omitted = whole repository."),
			"allow":  map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": []string{"mentioned"}}, "description": "Rules: [\"mentioned\"] or []."},
			"remove": boolean("Delete the policy instead of setting it."),
		}, nil, false, true,
		func(p *outline.Planner, a Args) error {
			allow, has, err := a.Strings("allow")
			if err != nil {
				return argErr("%v", err)
			}
			remove, err := a.Bool("remove", false)
			if err != nil {
				return argErr("%v", err)
			}
			if !has && !remove {
				return argErr("pass allow ([\"mentioned\"] or []) or remove=true")
			}
			return p.SetPolicy(a.Str("root"), allow, remove)
		})

	update := writeTool("update_node", "Edit a bullet",
		"Change a bullet's text, layout or display, or set, change or remove (note=\"\") its note. Fields not given, and fields this server does not know, are kept.",
		map[string]any{
			"node":    str("The bullet (" + refDesc + ")."),
			"text":    str("New text."),
			"layout":  str("New layout; \"\" removes it (bullet)."),
			"display": str("expanded or collapsed; \"\" removes it."),
			"note":    str("New note text; \"\" removes the note."),
		}, []string{"node"}, false, true,
		func(p *outline.Planner, a Args) error {
			return p.Edit(a.Str("node"), outline.Edit{Text: a.OptStr("text"), Layout: a.OptStr("layout"), Display: a.OptStr("display"), Note: a.OptStr("note")})
		})

	del := writeTool("delete_node", "Delete a bullet",
		"Delete a bullet and its note. children: refuse (default; fails if it has children), lift (children move up into its place, in order), or subtree (every descendant deleted too, record by record). Nothing cascades silently.",
		map[string]any{
			"node":     str("The bullet (" + refDesc + ")."),
			"children": enum("What happens to its children.", "refuse", "lift", "subtree"),
		}, []string{"node"}, true, false,
		func(p *outline.Planner, a Args) error { return p.DeleteNode(a.Str("node"), a.Str("children")) })

	mirror := writeTool("add_mirror", "Mirror a bullet",
		"Show another bullet's subtree (any identity's) live at a position in your outline. A mirror of one of its own ancestors is refused.",
		map[string]any{
			"original": str("The bullet to mirror: at://DID/app.bulleted.node/RKEY (or a record key of yours)."),
			"parent":   str("Parent (" + refDesc + "); omitted = top level."),
			"after":    pAfter,
			"position": pPosition,
		}, []string{"original"}, false, false,
		func(p *outline.Planner, a Args) error { return p.Mirror(a.Str("original"), position(a, "parent")) })

	comment := writeTool("add_comment", "Comment on a bullet",
		"Write a comment on any bullet into your own repository. It renders only where the bullet owner's comment policy allows it.",
		map[string]any{"subject": str("The bullet (" + refDesc + ")."), "text": str("The comment (at most 10,000 bytes).")},
		[]string{"subject", "text"}, false, false,
		func(p *outline.Planner, a Args) error { return p.Comment(a.Str("subject"), a.Str("text")) })

	setOutline := writeTool("set_outline", "Title an outline",
		"Set the title and description of the whole outline (root omitted) or of a subtree. \"\" removes a field.",
		map[string]any{"root": str("Subtree root (" + refDesc + "); omitted = whole outline."), "title": str("Title (at most 200 graphemes)."), "description": str("Description (at most 600 graphemes).")},
		nil, false, true,
		func(p *outline.Planner, a Args) error {
			return p.SetOutline(a.Str("root"), a.OptStr("title"), a.OptStr("description"))
		})

	batch := Tool{Name: "apply_batch", Title: "Apply several edits at once",
		Description: "Plan several write operations against one snapshot, in order (each sees the ones before it), and commit them together (in as few commits as the 200-write limit allows). ops: [{tool, args}] with tool one of the write tools.",
		Schema: obj(map[string]any{
			"ops": map[string]any{"type": "array", "items": obj(map[string]any{
				"tool": str("A write tool name, e.g. insert_after."),
				"args": map[string]any{"type": "object", "description": "That tool's arguments (without dry_run)."},
			}, "tool", "args")},
			"dry_run": pDryRun,
		}, "ops"), Destructive: true}
	batch.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		var ops []struct {
			Tool string `json:"tool"`
			Args Args   `json:"args"`
		}
		if _, err := a.Decode("ops", &ops); err != nil || len(ops) == 0 {
			return badArgs("ops must be a non-empty list of {tool, args}")
		}
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		byName := map[string]Tool{}
		for _, t := range writeToolsNoBatch() {
			byName[t.Name] = t
		}
		steps := make([]outline.Step, len(ops))
		for i, op := range ops {
			t, ok := byName[op.Tool]
			if !ok {
				return toolError(argErr("ops[%d]: %q is not a write tool (use %s)", i, op.Tool, strings.Join(keys(byName), ", ")))
			}
			args := op.Args
			steps[i] = outline.Step{Tool: op.Tool, Plan: func(p *outline.Planner) error { return t.Plan(p, args) }}
		}
		out, err := env.Engine.Do(ctx, dry, func(p *outline.Planner) error { return p.Batch(steps) })
		if err != nil {
			return toolError(err)
		}
		return writeResult(out), nil
	}

	undo := Tool{Name: "undo", Title: "Undo", Description: "Undo the last operations this server applied (default 1; the journal is kept across restarts), if the records they wrote are unchanged since; otherwise nothing is written and the result lists what changed.",
		Schema:      obj(map[string]any{"steps": map[string]any{"type": "integer", "minimum": 1, "description": "How many operations to undo (default 1)."}, "operation": str("Undo this operation (an id from list_operations), e.g. an incomplete one: exactly what landed is rolled back."), "dry_run": pDryRun}),
		Destructive: true}
	undo.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		steps, err := a.Int("steps", 1)
		if err != nil {
			return badArgs("%v", err)
		}
		dry, err := a.Bool("dry_run", false)
		if err != nil {
			return badArgs("%v", err)
		}
		out, err := env.Engine.Undo(ctx, steps, a.Str("operation"), dry)
		if err != nil {
			return toolError(err)
		}
		return writeResult(out), nil
	}
	return []Tool{insert, move, complete, policy, update, del, mirror, comment, setOutline, batch, undo}
}

func writeToolsNoBatch() []Tool {
	var out []Tool
	for _, t := range writeTools() {
		if t.Plan != nil {
			out = append(out, t)
		}
	}
	return out
}

func keys(m map[string]Tool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
