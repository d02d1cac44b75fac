package intent

import (
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Mirror shows Original (any identity's bullet) and its subtree live at Pos.
type Mirror struct {
	Original string
	Pos      outline.Position
}

// Plan implements outline.Intent with the kit alone: a mirror under its
// own original's subtree is refused (it would render forever).
func (m Mirror) Plan(p *outline.Planner) error {
	t := p.Tree()
	u, err := syntax.ParseATURI(m.Original)
	if err != nil || u.Collection().String() != lexicon.Node || u.RecordKey() == "" {
		if !strings.HasPrefix(m.Original, "at://") {
			if it, err2 := t.Resolve(m.Original); err2 == nil && !it.Mirror {
				u, _ = syntax.ParseATURI(p.NodeURI(it.Key()))
				err = nil
			}
		}
		if err != nil || u.Collection().String() != lexicon.Node {
			return outline.Fail(outline.ErrInvalidInput, "pass at://DID/app.bulleted.node/RKEY or a record key of your own", "%q is not a node reference", m.Original)
		}
	}
	parent, sibs, at, err := p.Target(m.Pos, nil, nil)
	if err != nil {
		return err
	}
	if u.Authority().String() == t.DID.String() {
		orig := t.Nodes.Get(u.RecordKey().String())
		if orig == nil {
			return outline.Fail(outline.ErrNodeNotFound, "", "original %s does not exist", u.RecordKey())
		}
		if parent != nil && t.IsAncestor(orig, parent) {
			return outline.Fail(outline.ErrCycle, "mirror it somewhere outside its own subtree", "mirroring %s under its own descendant %s would render forever", orig.Key(), parent.Key())
		}
	}
	keys, err := p.Place(sibs, at, 1)
	if err != nil {
		return err
	}
	v := map[string]any{"$type": lexicon.Mirror, "original": u.String(), "sortKey": keys[0], "createdAt": p.Stamp()}
	if parent != nil {
		v["parent"] = p.ParentURI(parent)
	}
	p.Touch(p.Create(lexicon.Mirror, v, ""))
	p.Summary("mirror %s under %s", u, outline.Name(parent))
	return nil
}
