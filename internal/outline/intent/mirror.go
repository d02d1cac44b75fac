package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Mirror shows Original (any identity's bullet) and its subtree live at Pos.
type Mirror struct {
	Original string
	Pos      outline.Position
}

// Plan implements outline.Intent (Planner.Mirror: mirror cycles refused).
func (m Mirror) Plan(p *outline.Planner) error { return p.Mirror(m.Original, m.Pos) }
