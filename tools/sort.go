package tools

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

func sortTool() Tool {
	return writeTool(Tool{Name: "sort_children", Title: "Sort children",
		Description: "Sort a bullet's children (node; omit for the top level) by text, state (open todos first), created, or reverse. Only keys that must change are written.",
		Schema: obj(map[string]any{"node": pRef,
			"by":         enum("", outline.SortText, outline.SortState, outline.SortCreated, outline.SortReverse),
			"descending": boolean("")}, "by"),
		Ann: Annotations{Idempotent: true}}, func(p *outline.Planner, a Args) error {
		desc, err := a.Bool("descending", false)
		if err != nil {
			return argErr("%v", err)
		}
		return p.SortChildren(a.Str("node"), a.Str("by"), desc)
	})
}
