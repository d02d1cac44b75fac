package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Move moves Nodes (a run of siblings, kept in display order) to Pos. A
// bullet contributed to another identity's shared outline is only
// reordered there, or moved under another shared parent that admits it.
type Move struct {
	Nodes []string
	Pos   outline.Position
}

// Plan implements outline.Intent with the engine's structural move
// (Planner.Move: cycles, contributions and re-placement rules).
func (m Move) Plan(p *outline.Planner) error { return p.Move(m.Nodes, m.Pos) }
