package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Insert adds bullets (nested) at Pos: under a parent of this repository,
// or of another identity's outline that admits this identity as a
// contributor there, after a sibling or first/last.
type Insert struct {
	Pos   outline.Position
	Nodes []outline.NewNode
}

// Plan implements outline.Intent with the engine's structural insert
// (Planner.Insert), which carries the shared-outline placement rules.
func (in Insert) Plan(p *outline.Planner) error { return p.Insert(in.Pos, in.Nodes) }
