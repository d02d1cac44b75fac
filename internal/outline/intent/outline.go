package intent

import (
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Outline sets the title and description of the repository's outline (Root
// "") or of a subtree's (nil: unchanged; "": removed).
type Outline struct {
	Root               string
	Title, Description *string
}

// Plan implements outline.Intent with the kit alone: the outline record is
// keyed by its root's record key ("self" for the repository).
func (o Outline) Plan(p *outline.Planner) error {
	rkey, rootURI := "self", ""
	if o.Root != "" {
		it, err := p.Node(o.Root)
		if err != nil {
			return err
		}
		rkey, rootURI = it.Key(), p.NodeURI(it.Key())
	}
	p.Summary("set the outline title/description of %s", orDefault(o.Root, "the repository"))
	if o.Title == nil && o.Description == nil {
		p.Note("no title or description given")
		return nil
	}
	old, exists := p.Tree().Outlines.Lookup(rkey)
	if exists {
		v := old.Value.Map()
		setFields(v, map[string]*string{"title": o.Title, "description": o.Description})
		p.Update(old, v, "")
		return nil
	}
	v := map[string]any{"$type": lexicon.Outline, "createdAt": p.Stamp()}
	if rootURI != "" {
		v["root"] = rootURI
	}
	setFields(v, map[string]*string{"title": o.Title, "description": o.Description})
	p.CreateAt(lexicon.Outline, rkey, v, "")
	return nil
}
