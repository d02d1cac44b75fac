package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Edit changes a bullet's text, layout, display or note (nil: unchanged;
// "": removed).
type Edit struct {
	Node string
	outline.Edit
}

// Plan implements outline.Intent (Planner.Edit: facets and the note record).
func (e Edit) Plan(p *outline.Planner) error { return p.Edit(e.Node, e.Edit) }
