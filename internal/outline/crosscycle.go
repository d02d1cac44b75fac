package outline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Mirror cycles across repositories. A mirror whose original is in another
// repository renders that repository's subtree, which may hold mirrors of
// bullets of this repository (or of a third one), and contributions:
// bullets of other identities hanging under its bullets, this identity's
// own among them. When such a chain leads back to a bullet above the first
// mirror, it renders forever, though no repository alone has a cycle. A plan
// that writes a mirror or moves bullets while mirrors exist is checked on
// the tree as it would be after it, with the other repositories it reaches
// read through the engine's Others (bounded: crossMaxRepos repositories,
// crossMaxDepth repositories away); one that closes a cycle the repository
// did not have before is refused (ErrCycle), nothing written. A repository
// that cannot be read, or lies beyond the bound, is said in the plan's
// diagnostics: cycles through it are not checked.

const (
	crossMaxRepos = 8 // other repositories read by one plan's check
	crossMaxDepth = 3 // repositories away from this one
)

// gref names a record of any repository: its DID and record key (nodes
// and mirrors are told apart by the map they are kept in).
type gref struct{ did, rkey string }

func (g gref) uri(coll string) string { return "at://" + g.did + "/" + coll + "/" + g.rkey }

// crossCheck is one plan's view of the repositories its mirrors reach: the
// trees read (once per plan), and what could not be read.
type crossCheck struct {
	ctx    context.Context
	others Others
	own    *Tree             // this repository, as the check at hand sees it (before or after the plan)
	trees  map[string]*Tree  // other repositories read, by DID
	depth  map[string]int    // by DID: repositories away from this one
	alias  map[string]string // identifier asked (a handle) → DID
	failed map[string]string // identifier → why it was not read
	order  []string          // failed, in the order met
	reads  int
	said   map[string]bool // failures already noted in the plan
}

func newCrossCheck(ctx context.Context, others Others) *crossCheck {
	return &crossCheck{ctx: ctx, others: others, trees: map[string]*Tree{}, depth: map[string]int{},
		alias: map[string]string{}, failed: map[string]string{}, said: map[string]bool{}}
}

// tree is the repository ident names (this one's, or another read through
// Others within the bound), or nil when it is not read (said in failed).
func (c *crossCheck) tree(ident string, depth int) *Tree {
	if ident == c.own.DID.String() {
		return c.own
	}
	if did, ok := c.alias[ident]; ok {
		ident = did
	}
	if ident == c.own.DID.String() {
		return c.own
	}
	if t := c.trees[ident]; t != nil {
		return t
	}
	if _, bad := c.failed[ident]; bad {
		return nil
	}
	why := ""
	switch {
	case c.others == nil:
		why = "this server does not read other repositories (offline)"
	case depth > crossMaxDepth:
		why = fmt.Sprintf("more than %d repositories away", crossMaxDepth)
	case c.reads >= crossMaxRepos:
		why = fmt.Sprintf("past the %d other repositories one plan reads", crossMaxRepos)
	}
	if why == "" {
		c.reads++
		t, err := c.others(c.ctx, ident)
		switch {
		case err != nil:
			why = "it could not be read: " + err.Error()
		case t == nil:
			why = "it could not be read"
		default:
			did := t.DID.String()
			c.alias[ident] = did
			if did == c.own.DID.String() {
				return c.own
			}
			if have := c.trees[did]; have != nil {
				return have
			}
			c.trees[did], c.depth[did] = t, depth
			return t
		}
	}
	c.failed[ident] = why
	c.order = append(c.order, ident)
	return nil
}

func (c *crossCheck) depthOf(t *Tree) int {
	if t == c.own {
		return 0
	}
	return c.depth[t.DID.String()]
}

// final is the node mirror m of t ends at, through mirrors of mirrors in
// any repository; ok is false when it ends nowhere readable.
func (c *crossCheck) final(t *Tree, m *Item) (gref, *Tree, bool) {
	seen := map[gref]bool{}
	for hops := 0; m != nil && hops < 64; hops++ {
		u, err := syntax.ParseATURI(m.Str("original"))
		if err != nil {
			return gref{}, nil, false
		}
		if a := u.Authority().String(); a != t.DID.String() {
			if t = c.tree(a, c.depthOf(t)+1); t == nil {
				return gref{}, nil, false
			}
		}
		rk := u.RecordKey().String()
		switch u.Collection().String() {
		case lexicon.Node:
			if t.Nodes.Get(rk) == nil {
				return gref{}, nil, false
			}
			return gref{t.DID.String(), rk}, t, true
		case lexicon.Mirror:
			g := gref{t.DID.String(), rk}
			if seen[g] {
				return gref{}, nil, false
			}
			seen[g] = true
			m = t.Mirrors.Get(rk)
		default:
			return gref{}, nil, false
		}
	}
	return gref{}, nil, false
}

// trigger reports whether a cycle through another repository is possible
// at all from t: a mirror whose original is elsewhere, a bullet hanging
// under another repository's bullet, or contributors admitted here.
func crossTrigger(t *Tree) bool {
	me := t.DID.String()
	for _, m := range t.Mirrors.All() {
		if u, err := syntax.ParseATURI(m.Str("original")); err == nil && u.Authority().String() != me {
			return true
		}
	}
	for it := range t.Detached.Items() {
		if u, err := syntax.ParseATURI(it.Str("parent")); err == nil && u.Authority().String() != me {
			return true
		}
	}
	return len(allContributors(t)) > 0
}

// cycles returns the mirrors (by repository) that render forever with own
// as this repository's tree, reading what they reach; and for each, the
// node it ends at.
func (c *crossCheck) cycles(own *Tree) ([]gref, map[gref]gref) {
	c.own = own
	type mir struct {
		t *Tree
		m *Item
	}
	var mirrors []mir
	orig := map[gref]gref{}
	done := map[*Tree]bool{}
	for {
		todo := []*Tree{own}
		for _, did := range slices.Sorted(maps.Keys(c.trees)) {
			todo = append(todo, c.trees[did])
		}
		fresh := false
		for _, t := range todo {
			if done[t] {
				continue
			}
			done[t], fresh = true, true
			// contributors' bullets render under this tree's: their
			// mirrors count
			for _, d := range allContributors(t) {
				c.tree(d, c.depthOf(t)+1)
			}
			for k, m := range t.Mirrors.All() {
				mirrors = append(mirrors, mir{t, m})
				if o, _, ok := c.final(t, m); ok {
					orig[gref{t.DID.String(), k}] = o
				}
			}
		}
		if !fresh {
			break
		}
	}
	// below: node → the mirrors rendered in its subtree (across
	// contributions into repositories read)
	below := map[gref][]gref{}
	for _, x := range mirrors {
		g := gref{x.t.DID.String(), x.m.Key()}
		t, it := x.t, x.m
		for steps := 0; it != nil && steps < 100_000; steps++ {
			if p := t.Parent(it); p != nil {
				below[gref{t.DID.String(), p.Key()}] = append(below[gref{t.DID.String(), p.Key()}], g)
				it = p
				continue
			}
			if it.Detached == "" {
				break // the top level
			}
			u, err := syntax.ParseATURI(it.Str("parent"))
			if err != nil || u.Authority().String() == t.DID.String() || u.Collection().String() != lexicon.Node {
				break
			}
			owner := c.known(u.Authority().String())
			if owner == nil || !Contributed(owner, t, it) {
				break
			}
			par := owner.Nodes.Get(u.RecordKey().String())
			if par == nil {
				break
			}
			below[gref{owner.DID.String(), par.Key()}] = append(below[gref{owner.DID.String(), par.Key()}], g)
			t, it = owner, par
		}
	}
	next := map[gref][]gref{}
	for m, o := range orig {
		next[m] = below[o]
	}
	out := slices.SortedFunc(maps.Keys(onCycles(next, slices.SortedFunc(maps.Keys(next), cmpGref))), cmpGref)
	return out, orig
}

// known is a repository already read (or this one), without reading.
func (c *crossCheck) known(ident string) *Tree {
	if ident == c.own.DID.String() {
		return c.own
	}
	if did, ok := c.alias[ident]; ok {
		ident = did
	}
	if ident == c.own.DID.String() {
		return c.own
	}
	return c.trees[ident]
}

func cmpGref(a, b gref) int {
	if a.did != b.did {
		return strings.Compare(a.did, b.did)
	}
	return strings.Compare(a.rkey, b.rkey)
}

// crossMirrorCycle refuses the plan (ErrCycle) when, after it, mirrors
// would render forever through another repository that did not before;
// repositories it could not read are said in the plan's diagnostics.
func (p *Planner) crossMirrorCycle() error {
	if p.e == nil || (!crossTrigger(p.t) && !crossTrigger(p.base)) {
		return nil
	}
	if p.cross == nil {
		p.cross = newCrossCheck(p.ctx, p.e.others)
	}
	c := p.cross
	now, orig := c.cycles(p.t)
	defer c.say(p)
	if len(now) == 0 {
		return nil
	}
	was, _ := c.cycles(p.base)
	var fresh []gref
	for _, g := range now {
		if _, ok := slices.BinarySearchFunc(was, g, cmpGref); !ok {
			fresh = append(fresh, g)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	me := p.t.DID.String()
	var parts, uris, repos []string
	for i, g := range fresh {
		uris = append(uris, g.uri(lexicon.Mirror))
		if g.did != me && !slices.Contains(repos, g.did) {
			repos = append(repos, g.did)
		}
		if i < 6 {
			parts = append(parts, fmt.Sprintf("%s renders %s", g.uri(lexicon.Mirror), orig[g].uri(lexicon.Node)))
		}
	}
	if len(fresh) > 6 {
		parts = append(parts, fmt.Sprintf("… (%d more)", len(fresh)-6))
	}
	return &Error{Kind: ErrCycle,
		Msg: fmt.Sprintf("the change would close a mirror cycle through another repository (%s), so its mirrors would render forever: %s, each inside what the one before renders; nothing was written",
			strings.Join(repos, ", "), strings.Join(parts, "; ")),
		Next: "place the mirror (or the bullets you move) outside the subtree that the other repository's mirrors render, or delete the mirror first",
		Data: map[string]any{"mirrors": uris, "repositories": repos}}
}

// say notes, once per plan, each repository the check could not read
// (offline: all of them in one note).
func (c *crossCheck) say(p *Planner) {
	var offline []string
	for _, ident := range c.order {
		if c.said[ident] {
			continue
		}
		c.said[ident] = true
		if c.others == nil {
			offline = append(offline, ident)
			continue
		}
		p.note("mirror cycles through %s were not checked: %s", ident, c.failed[ident])
	}
	if len(offline) > 0 {
		p.note("mirror cycles through other repositories (%s) were not checked: this server does not read other repositories (offline)", strings.Join(offline, ", "))
	}
}
