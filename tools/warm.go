package tools

import "context"

// Warm builds, ahead of the first call, what the first read, search and
// write would otherwise build on the agent's time: the tree of the current
// commit and the search index over it. serve runs it in the background
// just after start; a call that comes first simply builds them itself
// (both are guarded), so warming never delays or changes an answer.
func (env *Env) Warm(ctx context.Context) error {
	t, err := env.Engine.Tree(ctx)
	if err != nil {
		return err
	}
	env.index(t.DID.String()).Update(t)
	return nil
}
