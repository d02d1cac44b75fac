package outline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Contributor rules. An outline record (app.bulleted.outline) may list
// contributors: identities admitted to add bullets under the subtree it is
// for. A contributor's bullet is a record of the contributor's own
// repository whose parent is the owner's bullet; the owner's outline shows
// it in place. The engine admits an insert under another identity's bullet
// only where that outline lists this identity (a cross_repo refusal
// otherwise), places it among the bullets shown there without rewriting
// anybody else's record, and refuses a move that would pull a contribution
// out of the shared outline (it may be reordered there, or moved under
// another shared parent that admits it). The renderer shows contributions
// with the same rules (Gather, SharedChildren).

// Others reads another identity's repository (a handle or DID) as a tree;
// nil: offline, and a parent in another repository is refused.
type Others func(ctx context.Context, ident string) (*Tree, error)

// outlineRecords maps the record key of each subtree root to its outline
// record; "" is the repository-wide `self` record.
func outlineRecords(t *Tree) map[string]store.Record {
	out := map[string]store.Record{}
	for rk, r := range t.Outlines.All() {
		root, _ := r.Value.Text("root")
		if root == "" {
			if rk == "self" {
				out[""] = r
			}
			continue
		}
		if u, err := syntax.ParseATURI(root); err == nil && u.Authority().String() == t.DID.String() {
			out[u.RecordKey().String()] = r
		}
	}
	return out
}

// OutlineRecordAt is the outline record in effect at it (nil: the top
// level): the nearest one whose root is it or an ancestor, else `self`.
func OutlineRecordAt(t *Tree, it *Item) (store.Record, bool) {
	recs := outlineRecords(t)
	for p := it; p != nil; p = t.Parent(p) {
		if r, ok := recs[p.Key()]; ok {
			return r, true
		}
	}
	r, ok := recs[""]
	return r, ok
}

// ContributorsOf reads an outline record's contributors; ok is false when
// the field is absent (inherit from above).
func ContributorsOf(r store.Record) ([]string, bool) {
	xs, ok := r.Value.Get("contributors").([]any)
	if !ok {
		return nil, false
	}
	out := []string{}
	for _, x := range xs {
		if m, ok := x.(map[string]any); ok {
			if d, ok := m["did"].(string); ok {
				out = append(out, d)
			}
		}
	}
	return out, true
}

// contributorsAt returns the identities admitted at it (nil: the top
// level): the contributors of the nearest outline record at it or above
// that has the field (absent inherits from above; empty grants nobody),
// else of `self`.
func contributorsAt(t *Tree, it *Item) []string {
	recs := outlineRecords(t)
	for p := it; p != nil; p = t.Parent(p) {
		if r, ok := recs[p.Key()]; ok {
			if c, ok := ContributorsOf(r); ok {
				return c
			}
		}
	}
	if r, ok := recs[""]; ok {
		c, _ := ContributorsOf(r)
		return c
	}
	return nil
}

// allContributors lists every identity named in any outline record of t.
func allContributors(t *Tree) []string {
	var out []string
	for _, r := range t.Outlines.All() {
		c, _ := ContributorsOf(r)
		for _, d := range c {
			if d != t.DID.String() && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Contribution is a contributor's bullet hanging under a bullet of the
// owner's outline.
type Contribution struct {
	Item *Item
	Tree *Tree // the contributor's repository
}

// Contributions are the contributors' bullets of one owner's outline, by
// the record key of the owner's bullet they hang under.
type Contributions map[string][]Contribution

// Contributed reports whether it, an item of tree c whose parent field
// names a bullet of owner's tree, is admitted there: the parent exists in
// the owner's outline and c's identity is among the contributors in effect
// at the parent.
func Contributed(owner *Tree, c *Tree, it *Item) bool {
	p, err := syntax.ParseATURI(it.Str("parent"))
	if err != nil || p.Authority().String() != owner.DID.String() || p.Collection().String() != lexicon.Node {
		return false
	}
	par := owner.Nodes.Get(p.RecordKey().String())
	if par == nil {
		return false
	}
	return slices.Contains(contributorsAt(owner, par), c.DID.String())
}

// Gather reads the repositories of every contributor named in owner's
// outline records (other: by DID) and collects their admitted bullets. It
// returns problems worth telling the reader (a repository that could not
// be read).
func Gather(owner *Tree, other func(did string) (*Tree, error)) (Contributions, []string) {
	if other == nil {
		return nil, nil
	}
	var notes []string
	out := Contributions{}
	for _, did := range allContributors(owner) {
		ct, err := other(did)
		if err != nil {
			notes = append(notes, "could not read contributor "+did+": "+err.Error())
			continue
		}
		for it := range ct.Detached.Items() {
			if it.Mirror || !Contributed(owner, ct, it) {
				continue
			}
			p, _ := syntax.ParseATURI(it.Str("parent"))
			k := p.RecordKey().String()
			out[k] = append(out[k], Contribution{Item: it, Tree: ct})
		}
	}
	return out, notes
}

// SharedChildren lists the bullets directly under par, a bullet of owner's
// outline, as the owner's outline shows them: the owner's own children and
// the contributions hanging there (contribs, from Gather), in display order.
// Inserting a contribution places it among these.
func SharedChildren(owner *Tree, par *Item, contribs Contributions) []SharedSibling {
	type shown struct {
		it  *Item
		did string // "" for the owner's
		uri string
	}
	ents := make([]shown, 0, par.Children.Len())
	for k := range par.Children.Items() {
		ents = append(ents, shown{k, "", "at://" + owner.DID.String() + "/" + k.Rec.Collection + "/" + k.Key()})
	}
	for _, c := range contribs[par.Key()] {
		ents = append(ents, shown{c.Item, c.Tree.DID.String(), "at://" + c.Tree.DID.String() + "/" + c.Item.Rec.Collection + "/" + c.Item.Key()})
	}
	slices.SortStableFunc(ents, func(a, b shown) int {
		return order.CompareShown(a.it.SortKey(), a.it.Key(), a.it.Mirror, a.did, b.it.SortKey(), b.it.Key(), b.it.Mirror, b.did)
	})
	out := make([]SharedSibling, len(ents))
	for i, e := range ents {
		out[i] = SharedSibling{URI: e.uri, SortKey: e.it.SortKey()}
	}
	return out
}

// shared resolves a parent in another repository for an insert or move:
// the owner's bullet and the bullets shown under it when the owner's
// outline admits this identity there, else an *Error (ErrCrossRepo when not
// admitted, ErrParentMissing when the bullet is not there, ErrUnavailable
// when the owner's repository cannot be read). own is the plan's current
// tree. nil, nil: the parent is this repository's after all (named by
// handle).
func (e *Engine) shared(ctx context.Context, own *Tree, parent syntax.ATURI) (*Shared, error) {
	ident := parent.Authority().String()
	owner, err := e.others(ctx, ident)
	if err != nil {
		return nil, &Error{Kind: ErrUnavailable, Msg: fmt.Sprintf("could not read %s's repository to place bullets under %s: %v", ident, parent, err),
			Next: "nothing was written; try again later"}
	}
	me := own.DID.String()
	if owner.DID.String() == me {
		return nil, nil
	}
	readIt := "call read_outline repo=" + owner.DID.String() + " to see its bullets"
	if parent.Collection().String() != lexicon.Node || parent.RecordKey() == "" {
		return nil, &Error{Kind: ErrInvalidInput, Msg: fmt.Sprintf("%s is not a bullet (at://DID/%s/RKEY)", parent, lexicon.Node), Next: readIt}
	}
	par := owner.Nodes.Get(parent.RecordKey().String())
	if par == nil {
		return nil, &Error{Kind: ErrParentMissing, Msg: fmt.Sprintf("parent %s does not exist", parent), Next: readIt}
	}
	if !slices.Contains(contributorsAt(owner, par), me) {
		return nil, &Error{Kind: ErrCrossRepo,
			Msg:  fmt.Sprintf("%s is in %s's outline, which does not admit you (%s) as a contributor there; nothing was written", parent, owner.DID, me),
			Next: "add under your own bullets instead, or ask its owner to list you in contributors (set on their app.bulleted.outline record)"}
	}
	contribs, _ := Gather(owner, func(did string) (*Tree, error) {
		if did == me {
			return own, nil // the plan's own tree: this call's earlier steps included
		}
		return e.others(ctx, did)
	})
	return &Shared{Parent: "at://" + owner.DID.String() + "/" + lexicon.Node + "/" + par.Key(), Siblings: SharedChildren(owner, par, contribs)}, nil
}

// Owners finds the owners of this repository's contributions for one call,
// reading each other repository once.
type Owners struct {
	e    *Engine
	read map[string]ownerRead
}

type ownerRead struct {
	t   *Tree
	err error
}

// Owners returns a finder of contributions' owners for one call.
func (e *Engine) Owners() *Owners { return &Owners{e: e, read: map[string]ownerRead{}} }

// Of returns the owner DID when it, detached in t because its parent is in
// another repository, hangs under a bullet of an outline that admits t's
// identity as a contributor; "" when it does not, or offline. err is set
// when the owner's repository could not be read.
func (o *Owners) Of(ctx context.Context, t *Tree, it *Item) (string, error) {
	if o.e.others == nil {
		return "", nil
	}
	u, err := syntax.ParseATURI(it.Str("parent"))
	if err != nil || u.Authority().String() == t.DID.String() {
		return "", nil
	}
	did := u.Authority().String()
	r, seen := o.read[did]
	if !seen {
		r.t, r.err = o.e.others(ctx, did)
		o.read[did] = r
	}
	if r.err != nil {
		return "", r.err
	}
	if r.t == nil || !Contributed(r.t, t, it) {
		return "", nil
	}
	return did, nil
}

// guardContributions refuses a move of a contribution that would pull it
// out of the shared outline it is in, and a move of a bullet whose parent
// is in a repository that cannot be read now, since it may be one. A move
// that keeps its parent (none given, or the same) reorders it there; one
// to another shared parent is admitted or refused (cross_repo) as any
// bullet moved there.
func (p *Planner) guardContributions(items []*Item, pos Position) error {
	if p.e.others == nil {
		return nil // offline: no other repository to check (list_detached says so)
	}
	owners := p.e.Owners()
	for _, it := range items {
		if it.Detached == "" {
			continue
		}
		owner, err := owners.Of(p.ctx, p.t, it)
		if err != nil {
			return &Error{Kind: ErrUnavailable,
				Msg:  fmt.Sprintf("%s hangs under %s, in another repository, which cannot be read now to check whether it is a contribution to a shared outline (%v); nothing was written", it.Key(), it.Str("parent"), err),
				Next: "retry in a moment"}
		}
		arg := strings.TrimSpace(pos.Parent)
		if owner == "" || arg == "" || arg == it.Str("parent") {
			continue // not a contribution, or reordered within its shared parent
		}
		if u, err := syntax.ParseATURI(arg); err == nil {
			own, err := p.ownAuthority(u.Authority())
			if err != nil {
				return &Error{Kind: ErrUnavailable,
					Msg:  fmt.Sprintf("%s is your contribution to %s's shared outline; the handle in %s cannot be resolved now to tell whether it is your own repository (%v); nothing was written", it.Key(), owner, arg, err),
					Next: "retry in a moment, or name the parent by its record key or its DID's at:// URI"}
			}
			if !own {
				continue // under another shared parent: admitted there or refused (cross_repo)
			}
		}
		return &Error{Kind: ErrCrossRepo,
			Msg:  fmt.Sprintf("%s is your contribution to %s's shared outline (under %s): moving it would pull it out of that outline; nothing was written", it.Key(), owner, it.Str("parent")),
			Next: "leave it there; you can reorder it there (move_node without parent, with after=<a bullet shown under " + it.Str("parent") + "> or position=first|last), edit it (update_node), add under it (insert_after parent=" + it.Key() + ") or delete it (delete_node)"}
	}
	return nil
}

// ownAuthority reports whether a (a DID, or a handle resolved through the
// engine's resolver) names this repository: at://<own handle>/… is one's
// own bullet as much as at://<own DID>/….
func (p *Planner) ownAuthority(a syntax.AtIdentifier) (bool, error) {
	if a.String() == p.t.DID.String() {
		return true, nil
	}
	h, err := a.AsHandle()
	if err != nil {
		return false, nil // another DID
	}
	if p.e.Resolver == nil {
		return false, fmt.Errorf("no resolver for handle %s (offline)", h)
	}
	did, err := p.e.Resolver.ResolveHandle(p.ctx, h.String())
	if err != nil {
		return false, err
	}
	return did == p.t.DID, nil
}
