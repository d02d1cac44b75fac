package tools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Contributions. A bullet of this repository whose parent is a bullet of
// another identity's outline that lists this identity as a contributor is
// a contribution: it renders in place in that outline. In this repository's
// own tree it is detached (its parent is elsewhere), and the planner would
// re-attach it on a move; that would pull it out of the shared outline, so
// move_node refuses it (guardContributions), directly and inside
// apply_batch, dry run or not, unless the move keeps its parent (no parent,
// or the same one): then it is reordered among the bullets the owner's
// outline shows there, only its own sortKey changing; or unless it names
// another shared parent, where the plan admits it or refuses it (cross_repo)
// as for any bullet moved there. Its own subtree moves as usual.

// contributionOwner returns the owner DID when it, detached in t because its
// parent is in another repository, hangs under a bullet of an outline that
// admits t's identity as a contributor; "" when it does not, or offline.
// err is set when the owner's repository could not be read. cache keeps
// what was read, by DID, for one call.
func contributionOwner(ctx context.Context, env *Env, t *outline.Tree, it *outline.Item, cache map[string]ownerRead) (string, error) {
	if env.Others == nil {
		return "", nil
	}
	u, err := syntax.ParseATURI(it.Str("parent"))
	if err != nil || u.Authority().String() == t.DID.String() {
		return "", nil
	}
	did := u.Authority().String()
	r, seen := cache[did]
	if !seen {
		r.t, r.err = env.Others(ctx, did)
		cache[did] = r
	}
	if r.err != nil {
		return "", r.err
	}
	if r.t == nil || !view.Contributed(r.t, t, it) {
		return "", nil
	}
	return did, nil
}

// sameParent reports whether a move_node parent argument keeps the
// parent a contribution has (omitted, or the same bullet).
func sameParent(arg, cur string) bool {
	arg = strings.TrimSpace(arg)
	return arg == "" || arg == cur
}

// foreignParent reports whether a move_node parent argument names a bullet
// of another repository (by at:// URI).
func foreignParent(arg, me string) bool {
	u, err := syntax.ParseATURI(strings.TrimSpace(arg))
	return err == nil && u.Authority().String() != me
}

// ownerRead is another repository read for contributionOwner.
type ownerRead struct {
	t   *outline.Tree
	err error
}

// guardContributions refuses a move_node of a contribution (see above),
// and a move of a bullet whose parent is in a repository that cannot be
// read now, since it may be one.
func guardContributions(ctx context.Context, env *Env, a Args) error {
	if env.Others == nil {
		return nil // offline: no other repository to check (list_detached says so)
	}
	refs, _, err := a.Strings("nodes")
	if err != nil {
		return nil // the plan reports it
	}
	if n := a.Str("node"); n != "" {
		refs = append(refs, n)
	}
	t, err := env.Engine.Tree(ctx)
	if err != nil {
		return nil // the plan reports it
	}
	owners := map[string]ownerRead{}
	for _, r := range refs {
		it, err := t.Resolve(r)
		if err != nil || it.Detached == "" {
			continue
		}
		owner, err := contributionOwner(ctx, env, t, it, owners)
		if err != nil {
			return &outline.Error{Kind: outline.ErrUnavailable,
				Msg:  fmt.Sprintf("%s hangs under %s, in another repository, which cannot be read now to check whether it is a contribution to a shared outline (%v); nothing was written", it.Key(), it.Str("parent"), err),
				Next: "retry in a moment"}
		}
		if owner != "" && sameParent(a.Str("parent"), it.Str("parent")) {
			continue // reordered within the shared parent: only its sortKey changes
		}
		if owner != "" && foreignParent(a.Str("parent"), t.DID.String()) {
			continue // under another shared parent: the plan admits it there or refuses (cross_repo)
		}
		if owner != "" {
			return &outline.Error{Kind: outline.ErrCrossRepo,
				Msg:  fmt.Sprintf("%s is your contribution to %s's shared outline (under %s): moving it would pull it out of that outline; nothing was written", it.Key(), owner, it.Str("parent")),
				Next: "leave it there; you can reorder it there (move_node without parent, with after=<a bullet shown under " + it.Str("parent") + "> or position=first|last), edit it (update_node), add under it (insert_after parent=" + it.Key() + ") or delete it (delete_node)"}
		}
	}
	return nil
}

// ShareContributions lets env's engine insert under another identity's
// bullet when that outline admits this identity as a contributor there
// (outline.Engine.Shared): the new bullets are records of this repository
// whose parent is the owner's bullet, placed among the bullets the owner's
// outline shows there. Without Others (offline) nothing changes: a parent
// in another repository is refused. It returns env.
func ShareContributions(env *Env) *Env {
	if env.Others != nil && env.Engine != nil {
		env.Engine.Shared = func(ctx context.Context, own *outline.Tree, parent syntax.ATURI) (*outline.Shared, error) {
			return sharedParent(ctx, env, own, parent)
		}
	}
	return env
}

func sharedParent(ctx context.Context, env *Env, own *outline.Tree, parent syntax.ATURI) (*outline.Shared, error) {
	ident := parent.Authority().String()
	owner, err := env.Others(ctx, ident)
	if err != nil {
		return nil, &outline.Error{Kind: outline.ErrUnavailable, Msg: fmt.Sprintf("could not read %s's repository to place bullets under %s: %v", ident, parent, err),
			Next: "nothing was written; try again later"}
	}
	me := own.DID.String()
	if owner.DID.String() == me {
		return nil, nil // this repository, named by its handle: resolved as usual
	}
	readIt := "call read_outline repo=" + owner.DID.String() + " to see its bullets"
	if parent.Collection().String() != lexicon.Node || parent.RecordKey() == "" {
		return nil, &outline.Error{Kind: outline.ErrInvalidInput, Msg: fmt.Sprintf("%s is not a bullet (at://DID/%s/RKEY)", parent, lexicon.Node), Next: readIt}
	}
	par := owner.Nodes.Get(parent.RecordKey().String())
	if par == nil {
		return nil, &outline.Error{Kind: outline.ErrParentMissing, Msg: fmt.Sprintf("parent %s does not exist", parent), Next: readIt}
	}
	if !slices.Contains(view.ContributorsAt(owner, par), me) {
		return nil, &outline.Error{Kind: outline.ErrCrossRepo,
			Msg:  fmt.Sprintf("%s is in %s's outline, which does not admit you (%s) as a contributor there; nothing was written", parent, owner.DID, me),
			Next: "add under your own bullets instead, or ask its owner to list you in contributors (set on their app.bulleted.outline record)"}
	}
	contribs, _ := view.Gather(owner, func(did string) (*outline.Tree, error) {
		if did == me {
			return own, nil // the plan's own tree: this call's earlier steps included
		}
		return env.Others(ctx, did)
	})
	return &outline.Shared{Parent: "at://" + owner.DID.String() + "/" + lexicon.Node + "/" + par.Key(), Siblings: view.SharedChildren(owner, par, contribs)}, nil
}
