package intent

import (
	"fmt"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// MoveRun moves a run of siblings named by its first and last bullet
// (From, To: from From to To inclusive, in display order), or every child
// of Level, without naming the bullets between. With Split (heading
// texts) the run is cut into len(Split) consecutive runs as equal as can
// be (the first ones one longer when it does not divide), and each goes
// under a new bullet with its heading text, the headings standing in the
// run's place in that order; else the run moves to Pos.
type MoveRun struct {
	From  string           `json:",omitempty"`
	To    string           `json:",omitempty"`
	Level string           `json:",omitempty"`
	Split []string         `json:",omitempty"`
	Pos   outline.Position `json:",omitempty"`
}

// Plan implements outline.Intent with the kit (Place, Create, Facets)
// and Planner.Move.
func (r MoveRun) Plan(p *outline.Planner) error {
	t := p.Tree()
	var par *outline.Item
	var sibs outline.Kids
	i, j := 0, 0
	if r.Level != "" {
		lv, err := t.Resolve(r.Level)
		if err != nil {
			return err
		}
		par, sibs = lv, t.ChildrenOf(lv)
		if sibs.Len() == 0 {
			return outline.Fail(outline.ErrInvalidInput, "name a bullet that has children", "%s has no children to split", lv.Key())
		}
		i, j = 0, sibs.Len()-1
	} else {
		a, err := t.Resolve(r.From)
		if err != nil {
			return prefixed("from", err)
		}
		b, err := t.Resolve(r.To)
		if err != nil {
			return prefixed("to", err)
		}
		if a.Detached != "" || b.Detached != "" || t.Parent(a) != t.Parent(b) {
			return outline.Fail(outline.ErrInvalidInput, "name the first and last bullet of one sibling list", "from %s and to %s are not siblings", a.Key(), b.Key())
		}
		par = t.Parent(a)
		sibs = t.ChildrenOf(par)
		i, j = index(sibs, a), index(sibs, b)
		if i < 0 || j < 0 {
			return outline.Fail(outline.ErrInvalidInput, "name bullets of this outline", "from %s or to %s is not among its parent's children", a.Key(), b.Key())
		}
		if i > j {
			return outline.Fail(outline.ErrInvalidInput, "swap from and to", "from %s comes after to %s in display order", a.Key(), b.Key())
		}
	}
	run := sibs.Slice(i, j+1)
	keys := make([]string, len(run))
	for k, it := range run {
		keys[k] = it.Key()
	}
	if len(r.Split) == 0 {
		if err := (Move{Nodes: keys, Pos: r.Pos}).Plan(p); err != nil {
			return err
		}
		if len(run) > 1 {
			t = p.Tree()
			dest := par
			if last := t.Nodes.Get(keys[len(keys)-1]); last != nil {
				dest = t.Parent(last)
			}
			p.Summary("move the run of %d bullet(s) %s … %s under %s", len(run), outline.Name(run[0]), outline.Name(run[len(run)-1]), outline.Name(dest))
		}
		return nil
	}
	n := len(r.Split)
	if n > len(run) {
		return outline.Fail(outline.ErrInvalidInput, "give at most one heading per bullet", "split: %d headings for a run of %d bullet(s)", n, len(run))
	}
	// the headings take the run's place
	rest := sibs.Delete(i, j+1)
	sks, err := p.Place(rest, i, n)
	if err != nil {
		return err
	}
	heads := make([]string, n)
	for k, h := range r.Split {
		v := map[string]any{"$type": lexicon.Node, "text": h, "sortKey": sks[k], "createdAt": p.Stamp()}
		if par != nil {
			v["parent"] = p.NodeURI(par.Key())
		}
		p.Facets(v, h)
		heads[k] = p.Create(lexicon.Node, v, fmt.Sprintf("split[%d]", k))
		p.Touch(heads[k])
	}
	size, extra := len(run)/n, len(run)%n
	at := 0
	for k := range heads {
		m := size
		if k < extra {
			m++
		}
		p.Tree() // the headings, and the runs moved before
		if err := (Move{Nodes: keys[at : at+m], Pos: outline.Position{Parent: heads[k], Where: "last"}}).Plan(p); err != nil {
			return err
		}
		at += m
	}
	sizes := fmt.Sprint(size)
	if extra > 0 {
		sizes = fmt.Sprintf("%d–%d", size, size+1)
	}
	// the new headings are the result's created bullets
	if len(run) == sibs.Len() {
		p.Summary("split the %d children of %s into %d headed run(s) of %s", len(run), outline.Name(par), n, sizes)
	} else {
		p.Summary("split the %d bullet(s) %s … %s under %s into %d headed run(s) of %s", len(run), outline.Name(run[0]), outline.Name(run[len(run)-1]), outline.Name(par), n, sizes)
	}
	return nil
}

// index is it's place in sibs (-1: not there).
func index(sibs outline.Kids, it *outline.Item) int {
	for k, s := range sibs.All() {
		if s == it {
			return k
		}
	}
	return -1
}

// prefixed is err with what (the argument) before its message.
func prefixed(what string, err error) error {
	if oe, ok := err.(*outline.Error); ok {
		c := *oe
		c.Msg = what + ": " + oe.Msg
		return &c
	}
	return err
}
