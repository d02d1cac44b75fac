package outline

import (
	"context"
	"fmt"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/order"
)

// Shared is a bullet of another identity's outline whose outline record
// admits this identity as a contributor: bullets inserted under it are
// contributions, records of this repository whose parent is the owner's
// bullet, rendered in place in the owner's outline. Writes still go only to
// this repository.
type Shared struct {
	Parent   string          // the owner's bullet (AT-URI)
	Siblings []SharedSibling // the bullets under it as the owner's outline shows them, in order
}

// SharedSibling is one bullet under a shared parent: the owner's or a
// contributor's (this identity's included).
type SharedSibling struct {
	URI     string
	SortKey string
}

// SharedFunc resolves a parent in another repository for an insert: the
// owner's bullet and its children when the owner's outline admits this
// identity there, else an *Error (ErrCrossRepo when not admitted,
// ErrParentMissing when the bullet is not there, ErrUnavailable when the
// owner's repository cannot be read). own is the plan's current tree.
type SharedFunc func(ctx context.Context, own *Tree, parent syntax.ATURI) (*Shared, error)

// sharedParent returns the shared parent pos names, or nil when pos's
// parent is not a bullet of another repository (or the engine cannot read
// other repositories: the same-repository rule then refuses it as before).
func (p *Planner) sharedParent(pos Position) (*Shared, error) {
	ref := strings.TrimSpace(pos.Parent)
	if p.e == nil || p.e.Shared == nil || !strings.HasPrefix(ref, "at://") {
		return nil, nil
	}
	u, err := syntax.ParseATURI(ref)
	if err != nil || u.Authority().String() == p.t.DID.String() {
		return nil, nil // this repository's, or malformed: resolved as usual
	}
	return p.e.Shared(p.ctx, p.t, u)
}

// insertShared plans a contribution: nodes under a bullet of another
// identity's outline that admits this one, placed among the bullets the
// owner's outline shows there. Their sortKeys fit between the neighbours
// as they are (nobody else's record is ever rewritten).
func (p *Planner) insertShared(sh *Shared, pos Position, nodes []NewNode) error {
	at := len(sh.Siblings)
	switch {
	case pos.After != "":
		if pos.Where != "" {
			return fail(ErrInvalidInput, "pass either after or position", "after and position both given")
		}
		anchor := strings.TrimSpace(pos.After)
		if !strings.HasPrefix(anchor, "at://") {
			anchor = p.t.NodeURI(anchor)
		}
		at = -1
		for i, s := range sh.Siblings {
			if s.URI == anchor {
				at = i + 1
			}
		}
		if at < 0 {
			return fail(ErrAnchorMissing, "pass after= one of the bullets directly under "+sh.Parent+" (full at:// URI for another identity's), or position=first|last",
				"anchor %s is not directly under %s", pos.After, sh.Parent)
		}
	case pos.Where == "first":
		at = 0
	case pos.Where == "" || pos.Where == "last":
	default:
		return fail(ErrInvalidInput, "use position first or last, or after=<sibling>", "unknown position %q", pos.Where)
	}
	var lo, hi string
	if at > 0 {
		lo = sh.Siblings[at-1].SortKey
	}
	if at < len(sh.Siblings) {
		hi = sh.Siblings[at].SortKey
	}
	keys, err := order.Spread(lo, hi, len(nodes))
	if err != nil || len(keys) != len(nodes) {
		return fail(ErrInvalidInput, "insert at another position (position=first|last or after= another sibling)",
			"no sortKey fits between the neighbours %q and %q under %s, and bullets of other identities are never rewritten", lo, hi, sh.Parent)
	}
	if p.shared == nil {
		p.shared = map[string]bool{}
	}
	p.shared[sh.Parent] = true
	count, err := p.insertNodes(sh.Parent, nodes, keys)
	if err != nil {
		return err
	}
	where := sh.Parent
	if u, err := syntax.ParseATURI(sh.Parent); err == nil {
		where = fmt.Sprintf("%s in %s's shared outline (a contribution: read it in place with read_outline repo=%s node=%s)", u.RecordKey(), u.Authority(), u.Authority(), u.RecordKey())
	}
	p.summary("insert %d bullet(s) under %s", count, where)
	return nil
}
