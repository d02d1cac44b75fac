package pds

import (
	"context"
	"time"

	"github.com/bluesky-social/indigo/events"
)

// KeptBlocks is how many blocks r keeps from its last CAR read.
func KeptBlocks(r *Repo) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.car == nil {
		return 0
	}
	return r.car.blockCount()
}

// ForgetKeptBlocks drops every kept block but the commit and the records, so
// that the next incremental read cannot complete the MST.
func ForgetKeptBlocks(r *Repo) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := blockMap{}
	for k, b := range r.car.blocks {
		if _, ok := r.car.others[k]; ok || k == r.car.commit.KeyString() {
			kept[k] = b
		}
	}
	r.car.blocks = kept
	clear(r.car.nodes)
}

// AsksGzip reports whether r asks for gzipped CARs.
func AsksGzip(r *Repo) bool { return r.gzip() }

// KeptRev is the rev of r's kept repository ("" if none).
func KeptRev(r *Repo) string { return r.keptRev() }

// DropStreamEvents makes Follow lose the commit events drop says (by
// sequence number), as a stream with a gap would.
func DropStreamEvents(r *Repo, drop func(seq int64) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stream.drop = drop
}

// InjectEvent hands ev to r as if its stream had sent it.
func InjectEvent(ctx context.Context, r *Repo, ev *events.XRPCStreamEvent, errs func(error)) {
	r.event(ctx, ev, func() {}, errs)
}

// LastGap is why r's last stream commit was not taken in ("" if none was).
func LastGap(r *Repo) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stream.lastGap
}

// AgeOwnCommit makes r's own last commit d older (KnownChanges trusts it
// for TrustOwn).
func AgeOwnCommit(r *Repo, d time.Duration) {
	r.mu.Lock()
	r.ownAt = r.ownAt.Add(-d)
	r.mu.Unlock()
}

// Unbounded marks ctx so that a client of NewHTTPClient leaves its
// requests' size alone (benchmarks' bare downloads of big repositories).
func Unbounded(ctx context.Context) context.Context {
	return context.WithValue(ctx, selfBounded{}, true)
}

// CaughtUp reports whether r's follower has caught up on its connection
// (live), settled or not.
func CaughtUp(r *Repo) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stream.live
}

// SaveCache writes r's cache file now (as after a whole read).
func SaveCache(r *Repo) { r.saveCache(0, true) }

// LastHeard is the rev of the last commit of r's repository its follower
// read off the connection (taken in or not yet).
func LastHeard(r *Repo) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stream.lastHeard
}

// OnDealing makes r's follower call fn with each commit of r's repository
// about to be taken in, whether it was news when read off the connection,
// and whether reads wait for it.
func OnDealing(r *Repo, fn func(rev string, heard, waited bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stream.dealing = fn
}
