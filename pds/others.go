package pds

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
)

// Others reads other identities' public repositories (for read_outline's
// repo argument, live mirrors and comments) through the same CAR path as
// the user's own, each cached by commit.
type Others struct {
	Resolver *Resolver
	HTTP     *http.Client // optional

	mu    sync.Mutex
	repos map[syntax.DID]*Repo
	trees map[syntax.DID]*outline.Tree
}

// Tree returns the outline tree of ident (a handle or DID).
func (o *Others) Tree(ctx context.Context, ident string) (*outline.Tree, error) {
	ident = strings.TrimPrefix(ident, "@")
	did, err := syntax.ParseDID(ident)
	if err != nil {
		if did, err = o.Resolver.ResolveHandle(ctx, ident); err != nil {
			return nil, err
		}
	}
	o.mu.Lock()
	if o.repos == nil {
		o.repos, o.trees = map[syntax.DID]*Repo{}, map[syntax.DID]*outline.Tree{}
	}
	r := o.repos[did]
	o.mu.Unlock()
	if r == nil {
		ep, err := o.Resolver.Endpoint(ctx, did)
		if err != nil {
			return nil, err
		}
		c := atclient.NewAPIClient(ep)
		if o.HTTP != nil {
			c.Client = o.HTTP
		}
		r = New(c, did)
		o.mu.Lock()
		o.repos[did] = r
		o.mu.Unlock()
	}
	s, err := r.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.trees[did]; t != nil && t.Commit == s.Commit {
		return t, nil
	}
	t := outline.Rebuild(s, o.trees[did])
	o.trees[did] = t
	return t, nil
}
