package intent

import (
	"errors"
	"slices"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Policy sets who may comment on the outline (Root "") or a subtree:
// Allow ["mentioned"] or [] (nobody); Remove deletes the policy.
type Policy struct {
	Root   string
	Allow  []string
	Remove bool
}

// Plan implements outline.Intent with the kit alone: a policy's root is a
// bullet of this repository (the gate checks it again), keyed by its
// record key ("self" for the repository).
func (pol Policy) Plan(p *outline.Planner) error {
	rkey, rootURI, err := pol.root(p)
	if err != nil {
		return err
	}
	where := orDefault(pol.Root, "the repository")
	old, exists := p.Tree().Policies.Lookup(rkey)
	if pol.Remove {
		if !exists {
			return outline.Fail(outline.ErrNodeNotFound, "", "no comment policy for %s", where)
		}
		p.Delete(old, "")
		p.Summary("remove the comment policy of %s", where)
		return nil
	}
	allow := pol.Allow
	if allow == nil {
		allow = []string{}
	}
	list := make([]any, len(allow))
	for i, a := range allow {
		// the lexicon's allow list is an open set, but this server does not
		// write a rule that grants nothing in this version
		if !slices.Contains(lexicon.AllowRules, a) {
			return outline.Fail(outline.ErrInvalidInput, `use ["mentioned"], or [] to close comments`, "allow[%d]: unknown rule %q grants nothing; the defined rule is \"mentioned\"", i, a)
		}
		list[i] = a
	}
	if exists {
		v := old.Value.Map()
		v["allow"] = list
		p.Update(old, v, "")
	} else {
		v := map[string]any{"$type": lexicon.CommentPolicy, "allow": list, "createdAt": p.Stamp()}
		if rootURI != "" {
			v["root"] = rootURI
		}
		p.CreateAt(lexicon.CommentPolicy, rkey, v, "")
	}
	if len(allow) == 0 {
		p.Note("an empty allow list closes comments at this level")
	}
	p.Summary("set the comment policy of %s to %v", where, allow)
	return nil
}

// root is the policy's record key and root field ("self" and "" for the
// repository).
func (pol Policy) root(p *outline.Planner) (rkey, uri string, err error) {
	if pol.Root == "" {
		return "self", "", nil
	}
	it, err := p.Tree().Resolve(pol.Root)
	if err != nil {
		var oe *outline.Error
		if errors.As(err, &oe) && oe.Kind == outline.ErrCrossRepo {
			return "", "", outline.Fail(outline.ErrNotOwner, "a policy can only govern your own bullets", "%s is not your bullet", pol.Root)
		}
		return "", "", err
	}
	if it.Mirror {
		return "", "", outline.Fail(outline.ErrNotOwner, "set the policy on a node you own", "%s is a mirror", it.Key())
	}
	return it.Key(), p.NodeURI(it.Key()), nil
}
