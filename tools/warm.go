package tools

import (
	"context"
	"fmt"
	"io"
)

// preparer is a repository that makes ahead of the first write what that
// write would otherwise make (store.Local.Prepare: its map of records by
// path).
type preparer interface {
	Prepare(ctx context.Context) error
}

// Warm makes, ahead of the first calls, what the first read, write and
// search would otherwise make on the agent's time: the tree of the current
// commit, the repository's own state for writes (store.Local.Prepare) and
// the search index over the tree. serve runs it in the background just
// after start (WarmUp). Warming never delays or changes an answer: a call
// that comes first waits for the build under way, or makes what it needs
// itself if none is (each is built once), and an index already brought to
// a newer commit by a search is left as it is.
func (env *Env) Warm(ctx context.Context) error {
	t, err := env.Engine.Tree(ctx)
	if err != nil {
		return fmt.Errorf("reading the outline: %w", err)
	}
	if p, ok := env.Engine.Repo.(preparer); ok {
		if err := p.Prepare(ctx); err != nil {
			return fmt.Errorf("preparing for the first write: %w", err)
		}
	}
	env.index(t.DID.String()).Warm(t)
	return nil
}

// WarmUp is Warm as serve runs it, in the background: a failure is said on
// w (the process's stderr), since no call is there to answer with it.
func (env *Env) WarmUp(ctx context.Context, w io.Writer) {
	if err := env.Warm(ctx); err != nil && ctx.Err() == nil {
		fmt.Fprintf(w, "bulleted-mcp: warming up failed: %v (the first search and the first write will build what they need themselves, and take longer)\n", err)
	}
}
