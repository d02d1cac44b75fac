package intent

import (
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Edit changes a bullet's text, layout, display or note (nil: unchanged;
// "": removed).
type Edit struct {
	Node    string
	Text    *string
	Layout  *string
	Display *string
	Note    *string // "" removes the note
}

// Plan implements outline.Intent with the kit alone: the text's facets are
// set again, and the note is its own record (co-keyed with the bullet).
func (e Edit) Plan(p *outline.Planner) error {
	it, err := p.Node(e.Node)
	if err != nil {
		return err
	}
	if e.Text == nil && e.Layout == nil && e.Display == nil && e.Note == nil {
		return outline.Fail(outline.ErrInvalidInput, "pass text, layout, display or note", "nothing to change")
	}
	v := it.Rec.Value.Map()
	changed := false
	if e.Text != nil {
		p.Refacet(v, *e.Text)
		changed = true
	}
	if setFields(v, map[string]*string{"layout": e.Layout, "display": e.Display}) {
		changed = true
	}
	if changed {
		p.Update(it.Rec, v, "")
	}
	if e.Note != nil {
		e.note(p, it, *e.Note)
	}
	p.Touch(it.Key())
	p.Summary("update %s", outline.Name(it))
	return nil
}

// note plans the note record: removed, changed or created.
func (e Edit) note(p *outline.Planner, it *outline.Item, text string) {
	switch {
	case text == "" && it.Note != nil:
		p.Delete(*it.Note, "note")
	case text == "":
		p.Note("%s has no note to remove", it.Key())
	case it.Note != nil:
		nv := it.Note.Value.Map()
		p.Refacet(nv, text)
		p.Update(*it.Note, nv, "note")
	default:
		nv := map[string]any{"$type": lexicon.Note, "subject": p.NodeURI(it.Key()), "text": text, "createdAt": p.Stamp()}
		p.Facets(nv, text)
		p.CreateAt(lexicon.Note, it.Key(), nv, "note")
	}
}

// setFields applies optional string fields to v: nil leaves a field as it
// is, "" removes it, anything else sets it. It reports whether any was given.
func setFields(v map[string]any, fields map[string]*string) bool {
	given := false
	for f, val := range fields {
		if val == nil {
			continue
		}
		given = true
		if *val == "" {
			delete(v, f)
		} else {
			v[f] = *val
		}
	}
	return given
}
