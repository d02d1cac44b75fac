package tools

import (
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

func sortTool() Tool {
	return writeTool(Tool{Name: "sort_children", Title: "Sort children",
		Description: "Sort node's children (omit: top level); by state: open todos first.",
		Schema: obj(map[string]any{"node": pRef,
			"by":         enum("", intent.SortText, intent.SortState, intent.SortCreated, intent.SortReverse),
			"descending": boolean("")}, "by"),
		Ann: Annotations{Idempotent: true}}, func(a Args) (outline.Intent, error) {
		desc, err := a.Bool("descending", false)
		if err != nil {
			return nil, argErr("%v", err)
		}
		return intent.Sort{Parent: a.Str("node"), By: a.Str("by"), Desc: desc}, nil
	})
}
