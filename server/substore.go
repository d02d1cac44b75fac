package server

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// SubscriptionStore, if a SessionStore also is one, keeps the sessions'
// resource subscriptions (resources/subscribe, protocol versions before
// 2026-07-28) with the sessions, for every instance: a subscribe or
// unsubscribe served by any instance is recorded there, and the instance
// that holds the session's standalone GET stream (where notifications/
// resources/updated go) loads the session's subscriptions when the stream
// opens and again whenever they change (told by changed, from any
// instance), and sends their updates. Only an instance holding a GET
// stream of a session keeps its subscriptions in memory (its
// Subscriptions): updates are sent where the client listens.
type SubscriptionStore interface {
	// Subscribe records session's subscription to uri (again: nothing
	// changes); full: the session holds max already (not recorded).
	Subscribe(ctx context.Context, session, uri string, max int) (full bool, err error)
	// Unsubscribe ends session's subscription to uri.
	Unsubscribe(ctx context.Context, session, uri string) error
	// Subscribed are the subscriptions of session (none once it ended).
	Subscribed(ctx context.Context, session string) ([]string, error)
	// OnSubscriptions makes changed hear of each session whose
	// subscriptions changed (or that ended), on any instance.
	OnSubscriptions(changed func(session string))
}

// resourcesOf finds the resources of a server (for the HTTP transport,
// which keeps their subscriptions in its store).
var resourcesOf sync.Map // weak.Pointer[mcpserver.MCPServer] → *resources (dropped with the server)

// heldStream is a session whose GET stream is open here: the contexts of
// its streams' requests (the newest last; one serves the loads), and one
// load at a time.
type heldStream struct {
	load sync.Mutex
	ctxs []context.Context
}

// setStore keeps the sessions' subscriptions in st.
func (r *resources) setStore(st SubscriptionStore) {
	r.mu.Lock()
	r.store = st
	if r.held == nil {
		r.held = map[string]*heldStream{}
	}
	r.mu.Unlock()
	st.OnSubscriptions(func(session string) { go r.reload(session) })
}

// stored is the store of subscriptions (nil: memory only).
func (r *resources) stored() SubscriptionStore {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.store
}

// holds reports whether a GET stream of session is open here.
func (r *resources) holds(session string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[session] != nil
}

// streamOpened is told of a GET stream of session opened here (ctx: its
// request's, whose user the subscriptions are read for): the session's
// subscriptions are loaded from the store. It returns the function to call
// when the stream ends: with the session's last stream here, its
// subscriptions are let go here.
func (r *resources) streamOpened(ctx context.Context, session string) (closed func()) {
	if r.stored() == nil {
		return func() {}
	}
	r.mu.Lock()
	h := r.held[session]
	if h == nil {
		h = &heldStream{}
		r.held[session] = h
	}
	h.ctxs = append(h.ctxs, ctx)
	r.mu.Unlock()
	// (not waited for: the stream's answer is not held back by the
	// user's repository being opened)
	go r.reload(session)
	return func() {
		r.mu.Lock()
		if i := slices.Index(h.ctxs, ctx); i >= 0 {
			h.ctxs = slices.Delete(h.ctxs, i, i+1)
		}
		last := len(h.ctxs) == 0 && r.held[session] == h
		if last {
			delete(r.held, session)
		}
		r.mu.Unlock()
		if last {
			h.load.Lock()
			r.subs.drop(session)
			h.load.Unlock()
		}
	}
}

// reload makes the subscriptions held here for session those of the
// store, when a GET stream of session is open here.
func (r *resources) reload(session string) {
	r.mu.Lock()
	h, st := r.held[session], r.store
	r.mu.Unlock()
	if h == nil || st == nil {
		return
	}
	h.load.Lock()
	defer h.load.Unlock()
	r.mu.Lock()
	var ctx context.Context
	if r.held[session] == h && len(h.ctxs) > 0 {
		ctx = h.ctxs[len(h.ctxs)-1]
	}
	r.mu.Unlock()
	if ctx == nil || ctx.Err() != nil {
		return // the stream ended meanwhile
	}
	uris, err := st.Subscribed(ctx, session)
	if err != nil {
		return // (the store said what failed) loaded again at the next change
	}
	have := r.subs.uris(session)
	for _, uri := range have {
		if !slices.Contains(uris, uri) {
			r.subs.remove(session, uri)
		}
	}
	for _, uri := range uris {
		if !slices.Contains(have, uri) {
			_ = r.subscribe(ctx, session, uri, true) // (one that cannot be read now is left out, as a refused subscribe is)
		}
	}
}

// storeSubscription records (unsubscribe false) or ends a session's
// subscription to uri in the store, before it is acknowledged; the
// session's stream, if it is held here, has it at once.
func (r *resources) storeSubscription(ctx context.Context, st SubscriptionStore, session, uri string, unsubscribe bool) error {
	if unsubscribe {
		if err := st.Unsubscribe(ctx, session, uri); err != nil {
			return fmt.Errorf("the subscription could not be ended; retry in a moment")
		}
	} else {
		full, err := st.Subscribe(ctx, session, uri, MaxSubscriptions)
		if err != nil {
			return fmt.Errorf("the subscription could not be kept; retry in a moment")
		}
		if full {
			return fmt.Errorf("this session has %d subscriptions, the most a session may hold; unsubscribe from one first", MaxSubscriptions)
		}
	}
	if r.holds(session) {
		r.reload(session)
	}
	return nil
}
