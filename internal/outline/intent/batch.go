package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Batch plans several intents in order against one snapshot, as one
// operation; each sees the ones before it.
type Batch []outline.Step

// Plan implements outline.Intent (Planner.Batch).
func (b Batch) Plan(p *outline.Planner) error { return p.Batch(b) }
