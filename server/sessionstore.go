package server

import (
	"context"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// seenTimeout bounds reading and writing a session's told revision in a
// shared store.
const seenTimeout = 5 * time.Second

// setStore keeps the told revisions in st (shared by every instance)
// instead of this process's memory.
func (s *seenRevs) setStore(st SeenStore) {
	s.mu.Lock()
	s.store = st
	s.mu.Unlock()
}

// takeStored is take with the revisions in the shared store: what the
// session was told of on any instance. A store that cannot be read tells
// nothing this time (the call's own result says what failed, if anything
// else did) and the revision is written again on the next result.
func (s *seenRevs) takeStored(session, did string, env *tools.Env) *outline.Changed {
	ctx, cancel := context.WithTimeout(context.Background(), seenTimeout)
	defer cancel()
	pdid, since, err := s.store.Seen(ctx, session)
	if err != nil || pdid != did {
		since = ""
	}
	c := env.Engine.ChangedSince(since, session)
	rev := since
	if c.Rev > rev {
		rev = c.Rev
	}
	if rev != "" && (err != nil || rev != since || pdid != did) {
		_ = s.store.SetSeen(ctx, session, did, rev) // not kept: the next result tells from the older revision
	}
	if since == "" || !c.Any() {
		return nil
	}
	return c
}
