package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Policy sets who may comment on the outline (Root "") or a subtree:
// Allow ["mentioned"] or [] (nobody); Remove deletes the policy.
type Policy struct {
	Root   string
	Allow  []string
	Remove bool
}

// Plan implements outline.Intent (Planner.SetPolicy: policy roots owned).
func (pol Policy) Plan(p *outline.Planner) error { return p.SetPolicy(pol.Root, pol.Allow, pol.Remove) }
