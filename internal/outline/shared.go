package outline

import (
	"errors"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
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

// sharedParent returns the shared parent pos names, or nil when pos's
// parent is not a bullet of another repository (or the engine cannot read
// other repositories: the same-repository rule then refuses it as before).
func (p *Planner) sharedParent(pos Position) (*Shared, error) {
	ref := strings.TrimSpace(pos.Parent)
	if p.e == nil || p.e.others == nil || !strings.HasPrefix(ref, "at://") {
		return nil, nil
	}
	u, err := syntax.ParseATURI(ref)
	if err != nil || u.Authority().String() == p.t.DID.String() {
		return nil, nil // this repository's, or malformed: resolved as usual
	}
	return p.e.shared(p.ctx, p.t, u)
}

// sharedKeys returns n sortKeys for bullets placed at pos among the
// bullets under a shared parent, leaving out those whose URIs are in skip
// (bullets being moved there). Nobody else's record is ever rewritten.
func (p *Planner) sharedKeys(sh *Shared, pos Position, n int, skip map[string]bool) ([]string, error) {
	sibs, at, err := p.sharedAt(sh, pos, skip)
	if err != nil {
		return nil, err
	}
	var lo, hi string
	if at > 0 {
		lo = sibs[at-1].SortKey
	}
	if at < len(sibs) {
		hi = sibs[at].SortKey
	}
	keys, err := order.Spread(lo, hi, n)
	if err != nil || len(keys) != n {
		return nil, fail(ErrInvalidInput, "use another position (position=first|last or after= another sibling)",
			"no sortKey fits between the neighbours %q and %q under %s, and bullets of other identities are never rewritten", lo, hi, sh.Parent)
	}
	if p.shared == nil {
		p.shared = map[string]bool{}
	}
	p.shared[sh.Parent] = true
	return keys, nil
}

// sharedAt resolves pos under a shared parent: the bullets there as the
// owner's outline shows them, less those in skip, and the index pos names.
func (p *Planner) sharedAt(sh *Shared, pos Position, skip map[string]bool) ([]SharedSibling, int, error) {
	sibs := make([]SharedSibling, 0, len(sh.Siblings))
	for _, s := range sh.Siblings {
		if !skip[s.URI] {
			sibs = append(sibs, s)
		}
	}
	at := len(sibs)
	switch {
	case pos.After != "":
		if pos.Where != "" {
			return nil, 0, fail(ErrInvalidInput, "pass either after or position", "after and position both given")
		}
		anchor := strings.TrimSpace(pos.After)
		if !strings.HasPrefix(anchor, "at://") {
			anchor = p.t.NodeURI(anchor)
		}
		at = -1
		for i, s := range sibs {
			if s.URI == anchor {
				at = i + 1
			}
		}
		if at < 0 {
			return nil, 0, fail(ErrAnchorMissing, "pass after= one of the bullets directly under "+sh.Parent+" (full at:// URI for another identity's), or position=first|last",
				"anchor %s is not directly under %s", pos.After, sh.Parent)
		}
	case pos.Where == "first":
		at = 0
	case pos.Where == "" || pos.Where == "last":
	default:
		return nil, 0, fail(ErrInvalidInput, "use position first or last, or after=<sibling>", "unknown position %q", pos.Where)
	}
	return sibs, at, nil
}

// keptShared returns the shared parent items (detached here) hang under
// when they all name the same bullet of another identity's outline that
// admits this one, else nil (an error only when that repository cannot be
// read now).
func (p *Planner) keptShared(items []*Item) (*Shared, error) {
	parent := items[0].Str("parent")
	for _, it := range items[1:] {
		if it.Str("parent") != parent {
			return nil, nil
		}
	}
	sh, err := p.sharedParent(Position{Parent: parent})
	if err != nil {
		var oe *Error
		if errors.As(err, &oe) && (oe.Kind == ErrCrossRepo || oe.Kind == ErrParentMissing || oe.Kind == ErrInvalidInput) {
			return nil, nil // not a contribution: re-attached as any detached bullet
		}
		return nil, err
	}
	if sh != nil && sh.Parent != parent {
		return nil, nil // named by handle: leave it to an explicit parent
	}
	return sh, nil
}
