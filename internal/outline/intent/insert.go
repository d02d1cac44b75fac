package intent

import (
	"fmt"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Insert adds bullets (nested) at Pos: under a parent of this repository,
// or of another identity's outline that admits this identity as a
// contributor there, after a sibling or first/last.
type Insert struct {
	Pos   outline.Position
	Nodes []NewNode
}

// NewNode is one bullet to insert, with its nested children. With Mirror
// (the at:// URI of a node) it is a mirror of that node instead (package
// markup reads them from an export): Text is then only what to create if
// the original is in this repository and does not exist (a plain bullet,
// said in the diagnostics); a mirror has no layout, note or children.
type NewNode struct {
	Text      string    `json:"text"`
	Layout    string    `json:"layout,omitempty"`
	Display   string    `json:"display,omitempty"`
	Completed bool      `json:"completed,omitempty"`
	Note      string    `json:"note,omitempty"`
	Mirror    string    `json:"mirror,omitempty"`
	Children  []NewNode `json:"children,omitempty"`
}

// Plan implements outline.Intent with the kit alone: the place among the
// siblings (Target, Place; SharedParent and SharedKeys under another
// identity's bullet), then each bullet, its note right after it (so Cut
// keeps them in one commit) and its children.
func (in Insert) Plan(p *outline.Planner) error {
	if len(in.Nodes) == 0 {
		return outline.Fail(outline.ErrInvalidInput, "pass text, or nodes: [{text: …}]", "nothing to insert")
	}
	sh, err := p.SharedParent(in.Pos)
	if err != nil {
		return err
	}
	if sh != nil {
		return in.shared(p, sh)
	}
	parent, sibs, at, err := p.Target(in.Pos, nil, nil)
	if err != nil {
		return err
	}
	keys, err := p.Place(sibs, at, len(in.Nodes))
	if err != nil {
		return err
	}
	count, err := createNodes(p, p.ParentURI(parent), in.Nodes, keys)
	if err != nil {
		return err
	}
	p.Summary("insert %d bullet(s) under %s", count, outline.Name(parent))
	return nil
}

// shared plans a contribution: nodes under a bullet of another identity's
// outline that admits this one, placed among the bullets the owner's
// outline shows there. Their sortKeys fit between the neighbours as they
// are (nobody else's record is ever rewritten).
func (in Insert) shared(p *outline.Planner, sh *outline.Shared) error {
	keys, err := p.SharedKeys(sh, in.Pos, len(in.Nodes), nil)
	if err != nil {
		return err
	}
	count, err := createNodes(p, sh.Parent, in.Nodes, keys)
	if err != nil {
		return err
	}
	where := sh.Parent
	if u, err := syntax.ParseATURI(sh.Parent); err == nil {
		where = fmt.Sprintf("%s in %s's shared outline (a contribution: read it in place with read_outline repo=%s node=%s)", u.RecordKey(), u.Authority(), u.Authority(), u.RecordKey())
	}
	p.Summary("insert %d bullet(s) under %s", count, where)
	return nil
}

// createNodes creates nodes (and their notes and children) under parentURI
// with the given sortKeys, returning how many bullets it created.
func createNodes(p *outline.Planner, parentURI string, nodes []NewNode, keys []string) (int, error) {
	c := creator{p: p, t: p.Tree()}
	if err := c.walk(parentURI, nodes, keys, "nodes"); err != nil {
		return 0, err
	}
	if len(c.foreign) > 0 {
		p.Note("%d mirror(s) of bullets in other repositories created as given (first: %s); their originals were not checked here", len(c.foreign), c.foreign[0])
	}
	return c.count, nil
}

type creator struct {
	p       *outline.Planner
	t       *outline.Tree // the tree before the insert: originals are looked up there
	count   int
	foreign []string // mirrors of other repositories' bullets
}

func (c *creator) walk(parentURI string, ns []NewNode, keys []string, label string) error {
	for i, n := range ns {
		lab := fmt.Sprintf("%s[%d]", label, i)
		c.count++
		if n.Mirror != "" {
			done, err := c.mirror(parentURI, n, keys[i], lab)
			if err != nil || done {
				return err
			}
		}
		if err := c.node(parentURI, n, keys[i], lab); err != nil {
			return err
		}
	}
	return nil
}

// mirror creates n as a mirror, or reports false when its original is a
// bullet of this repository that does not exist (a plain bullet then).
func (c *creator) mirror(parentURI string, n NewNode, sortKey, lab string) (bool, error) {
	p := c.p
	u, err := syntax.ParseATURI(n.Mirror)
	if err != nil || u.Collection().String() != lexicon.Node || u.RecordKey() == "" {
		return false, outline.Fail(outline.ErrInvalidInput, "pass at://DID/app.bulleted.node/RKEY", "%s: mirror %q is not a node reference", lab, n.Mirror)
	}
	if len(n.Children) > 0 || n.Note != "" || n.Layout != "" || n.Display != "" || n.Completed {
		return false, outline.Fail(outline.ErrInvalidInput, "give a mirror only its original", "%s: a mirror has no children, note, layout, display or completion", lab)
	}
	t := c.t
	same := u.Authority().String() == t.DID.String()
	if same && t.Nodes.Get(u.RecordKey().String()) == nil {
		p.Note("%s: the original %s of a mirror does not exist in this repository; created a plain bullet with the mirror's text %q instead", lab, u, clip(n.Text, 40))
		return false, nil
	}
	if !same {
		c.foreign = append(c.foreign, u.String())
	}
	v := map[string]any{"$type": lexicon.Mirror, "original": u.String(), "sortKey": sortKey, "createdAt": p.Stamp()}
	if parentURI != "" {
		v["parent"] = parentURI
	}
	p.Touch(p.Create(lexicon.Mirror, v, lab))
	return true, nil
}

// node creates n as a bullet, its note right after it, then its children.
func (c *creator) node(parentURI string, n NewNode, sortKey, lab string) error {
	p := c.p
	v := map[string]any{"$type": lexicon.Node, "text": n.Text, "sortKey": sortKey, "createdAt": p.Stamp()}
	if parentURI != "" {
		v["parent"] = parentURI
	}
	if n.Layout != "" {
		v["layout"] = n.Layout
	}
	if n.Display != "" {
		v["display"] = n.Display
	}
	if n.Completed {
		if n.Layout == "" {
			v["layout"] = "todo"
		} else if n.Layout != "todo" {
			p.Note("%s: completed applies to todos; layout %s kept, completedAt set", lab, n.Layout)
		}
		v["completedAt"] = p.Stamp()
	}
	p.Facets(v, n.Text)
	rk := p.Create(lexicon.Node, v, lab)
	p.Touch(rk)
	if n.Note != "" {
		nv := map[string]any{"$type": lexicon.Note, "subject": p.NodeURI(rk), "text": n.Note, "createdAt": p.Stamp()}
		p.Facets(nv, n.Note)
		p.CreateAt(lexicon.Note, rk, nv, lab+".note")
	}
	if len(n.Children) == 0 {
		return nil
	}
	ck, err := order.Spread("", "", len(n.Children))
	if err != nil {
		return err
	}
	return c.walk(p.NodeURI(rk), n.Children, ck, lab+".children")
}

// clip shortens s to n runes, with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
