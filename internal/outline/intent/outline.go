package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Outline sets the title and description of the repository's outline (Root
// "") or of a subtree's (nil: unchanged; "": removed).
type Outline struct {
	Root               string
	Title, Description *string
}

// Plan implements outline.Intent (Planner.SetOutline).
func (o Outline) Plan(p *outline.Planner) error { return p.SetOutline(o.Root, o.Title, o.Description) }
