package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Delete deletes a bullet. Children says what happens to its children:
// refuse (the default: a bullet with children is not deleted), lift (they
// take its place) or subtree (they go too).
type Delete struct {
	Node     string
	Children string
}

// Plan implements outline.Intent (Planner.DeleteNode: no cascade, and the
// notes, mirrors and policies that name what goes).
func (d Delete) Plan(p *outline.Planner) error { return p.DeleteNode(d.Node, d.Children) }
