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
//
// Each subscription keeps the revision of the outline its session was
// told of (when it subscribed, or when a stream holding it closed): an
// instance that loads it from an outline moved past that revision sends
// one update at once (what changed meanwhile was not told anywhere).
type SubscriptionStore interface {
	// Subscribe records session's subscription to uri, made at revision
	// rev (again: nothing changes); full: the session holds max already
	// (not recorded).
	Subscribe(ctx context.Context, session, uri, rev string, max int) (full bool, err error)
	// Unsubscribe ends session's subscription to uri.
	Unsubscribe(ctx context.Context, session, uri string) error
	// Subscribed are the subscriptions of session (none once it ended).
	Subscribed(ctx context.Context, session string) ([]StoredSubscription, error)
	// Told records that session was told of every change up to rev (its
	// subscriptions' revisions move forward to it).
	Told(ctx context.Context, session, rev string) error
	// OnSubscriptions makes changed hear of each session whose
	// subscriptions changed (or that ended), on any instance; "": any
	// session's may have (changes were not heard for a while).
	OnSubscriptions(changed func(session string))
}

// StoredSubscription is one subscription in a SubscriptionStore: its URI
// and the revision its session was told of ("": not known).
type StoredSubscription struct{ URI, Rev string }

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
	st.OnSubscriptions(func(session string) {
		if session != "" {
			go r.reload(session)
			return
		}
		r.mu.Lock()
		var all []string
		for id := range r.held {
			all = append(all, id)
		}
		r.mu.Unlock()
		for _, id := range all {
			go r.reload(id)
		}
	})
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
	st := r.stored()
	if st == nil {
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
			rev := r.subs.toldOf(session)
			r.mu.Lock()
			reopened := r.held[session] != nil // a new stream of the session here while this one's reload ran: its subscriptions stay
			r.mu.Unlock()
			if !reopened {
				r.subs.drop(session)
			}
			h.load.Unlock()
			if rev != "" {
				// where the session's next stream starts from
				go func() { _ = st.Told(context.WithoutCancel(ctx), session, rev) }() // (not kept: that stream tells once more)
			}
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
	subs, err := st.Subscribed(ctx, session)
	if err != nil {
		return // (the store said what failed) loaded again at the next change
	}
	have := r.subs.uris(session)
	for _, uri := range have {
		if !slices.ContainsFunc(subs, func(s StoredSubscription) bool { return s.URI == uri }) {
			r.subs.remove(session, uri)
		}
	}
	for _, sub := range subs {
		if slices.Contains(have, sub.URI) {
			continue
		}
		t, err := r.subscribeTree(ctx, session, sub.URI, true)
		if err != nil {
			continue // (one that cannot be read now is left out, as a refused subscribe is)
		}
		// it starts from the tree last seen here: told once if the
		// outline moved past what the session was told of
		if sub.Rev != "" && r.subs.toldRev(t.DID.String()) > sub.Rev {
			r.subs.notify(session, sub.URI)
		}
	}
}

// storeSubscription records (unsubscribe false) or ends a session's
// subscription to uri in the store (rev: the revision it starts from),
// before it is acknowledged; the session's stream, if it is
// held here, has it at once.
func (r *resources) storeSubscription(ctx context.Context, st SubscriptionStore, session, uri, rev string, unsubscribe bool) error {
	if unsubscribe {
		if err := st.Unsubscribe(ctx, session, uri); err != nil {
			return fmt.Errorf("the subscription could not be ended; retry in a moment")
		}
	} else {
		full, err := st.Subscribe(ctx, session, uri, rev, MaxSubscriptions)
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
