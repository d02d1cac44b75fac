package intent

import "github.com/bulleted-mcp/bulleted-mcp/internal/outline"

// Complete ticks a todo (Done) or unticks it; a bullet that is not a todo
// becomes one, and the result says so.
type Complete struct {
	Node string
	Done bool
}

// Plan implements outline.Intent with the kit alone.
func (c Complete) Plan(p *outline.Planner) error {
	it, err := p.Node(c.Node)
	if err != nil {
		return err
	}
	v := it.Rec.Value.Map()
	if l, _ := v["layout"].(string); l != "todo" {
		v["layout"] = "todo"
		if l == "" {
			l = "bullet"
		}
		p.Note("%s was a %s; it is now a todo", it.Key(), l)
	}
	_, had := v["completedAt"]
	switch {
	case c.Done && had:
		p.Note("%s was already complete", it.Key())
	case c.Done:
		v["completedAt"] = p.Stamp()
	default:
		delete(v, "completedAt")
	}
	p.Update(it.Rec, v, "")
	p.Touch(it.Key())
	if c.Done {
		p.Summary("complete %s", outline.Name(it))
	} else {
		p.Summary("reopen %s", outline.Name(it))
	}
	return nil
}
