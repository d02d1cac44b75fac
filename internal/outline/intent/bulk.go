package intent

import (
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// The bulk intents: one change to every bullet a Where selects, taken on
// the tree the plan is made on. They are written with the kit and the
// single-bullet intents' planner methods (Planner.Move, Planner.DeleteNode),
// advancing the tree (Planner.Tree) where a step must see the one before.

// MoveWhere moves the bullets Where selects to Pos, in the outline's
// order: with a parent or after, they land there together, one run after
// another; without either, each parent's selected children move among
// their siblings (position first or last). A selected bullet inside
// another selected one goes with it.
type MoveWhere struct {
	Where Where
	Pos   outline.Position
}

// Plan implements outline.Intent.
func (m MoveWhere) Plan(p *outline.Planner) error {
	items, err := m.Where.pick(p, "where")
	if err != nil {
		return err
	}
	items, nested := outermost(p.Tree(), items)
	if nested > 0 {
		p.Note("%d selected bullet(s) go with a selected ancestor", nested)
	}
	if len(items) == 0 {
		p.Summary("move: where selected nothing")
		return nil
	}
	if m.Pos.Parent == "" && m.Pos.After == "" {
		// among their own siblings: one move per parent
		var order []*outline.Item
		groups := map[*outline.Item][]string{}
		t := p.Tree()
		for _, it := range items {
			par := t.Parent(it)
			if _, ok := groups[par]; !ok {
				order = append(order, par)
			}
			groups[par] = append(groups[par], it.Key())
		}
		for _, par := range order {
			p.Tree()
			if err := (Move{Nodes: groups[par], Pos: m.Pos}).Plan(p); err != nil {
				return err
			}
		}
		p.Summary("move %d bullet(s) selected by where to the %s of their %d parent(s)", len(items), orDefault(m.Pos.Where, "last"), len(order))
		return nil
	}
	// together at the destination: each run of siblings after the last
	pos := m.Pos
	var dest *outline.Item
	for i := 0; i < len(items); {
		t := p.Tree()
		j := i + 1
		for j < len(items) && t.Parent(items[j]) == t.Parent(items[i]) && items[j].Detached == items[i].Detached {
			j++
		}
		keys := make([]string, 0, j-i)
		for _, it := range items[i:j] {
			keys = append(keys, it.Key())
		}
		if err := (Move{Nodes: keys, Pos: pos}).Plan(p); err != nil {
			return err
		}
		t = p.Tree()
		last := t.Nodes.Get(keys[len(keys)-1])
		if last == nil {
			break
		}
		dest = t.Parent(last)
		pos = outline.Position{Parent: "top", After: last.Key()}
		if dest != nil {
			pos.Parent = dest.Key()
		}
		i = j
	}
	p.Summary("move %d bullet(s) selected by where under %s", len(items), outline.Name(dest))
	return nil
}

// CompleteWhere ticks (Done) or unticks every bullet Where selects; one
// that is not a todo becomes one, and the result counts them.
type CompleteWhere struct {
	Where Where
	Done  bool
}

// Plan implements outline.Intent with the kit alone.
func (c CompleteWhere) Plan(p *outline.Planner) error {
	items, err := c.Where.pick(p, "where")
	if err != nil {
		return err
	}
	made, same := 0, 0
	for _, it := range items {
		v := it.Rec.Value.Map()
		if l, _ := v["layout"].(string); l != "todo" {
			v["layout"] = "todo"
			made++
		}
		_, had := v["completedAt"]
		switch {
		case c.Done && had:
			same++
		case c.Done:
			v["completedAt"] = p.Stamp()
		case !had:
			same++
		default:
			delete(v, "completedAt")
		}
		p.Update(it.Rec, v, "")
		p.Touch(it.Key())
	}
	verb, state := "complete", "complete"
	if !c.Done {
		verb, state = "reopen", "open"
	}
	if made > 0 {
		p.Note("%d selected bullet(s) were not todos; they are now todos", made)
	}
	if same > 0 {
		p.Note("%d selected bullet(s) were already %s", same, state)
	}
	p.Summary("%s %d bullet(s) selected by where", verb, len(items))
	return nil
}

// DeleteWhere deletes every bullet Where selects, with Children as for
// one (refuse, lift or subtree): deepest first, so that a selected bullet
// under another selected one goes before it (subtree: with it).
type DeleteWhere struct {
	Where    Where
	Children string
}

// Plan implements outline.Intent (Planner.DeleteNode for each).
func (d DeleteWhere) Plan(p *outline.Planner) error {
	items, err := d.Where.pick(p, "where")
	if err != nil {
		return err
	}
	if d.Children == "subtree" {
		var nested int
		if items, nested = outermost(p.Tree(), items); nested > 0 {
			p.Note("%d selected bullet(s) go with a selected ancestor's subtree", nested)
		}
	}
	for i := len(items) - 1; i >= 0; i-- {
		it := items[i]
		if it.Children.Len() > 0 {
			p.Tree() // its children as the deletes before left them
		}
		if err := (Delete{Node: it.Key(), Children: d.Children}).Plan(p); err != nil {
			return err
		}
	}
	p.Summary("delete %d bullet(s) selected by where (children: %s)", len(items), orDefault(d.Children, "refuse"))
	return nil
}
