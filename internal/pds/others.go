package pds

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// Others reads other identities' public repositories (for read_outline's
// repo argument, live mirrors and comments) through the same CAR path as
// the user's own, within tighter bounds: each read (resolution and
// download) within Timeout, each CAR at most Limits.MaxCAR bytes, and the
// repositories kept between reads at most MaxBlocks blocks together (least
// recently read dropped first). A failed read is remembered for RetryAfter,
// so that an outline with many mirrors of one unreachable PDS waits for it
// once. No lock is held while a read is on the network; concurrent reads of
// one identity share one download.
type Others struct {
	Resolver *Resolver
	HTTP     *http.Client // optional: default DefaultHTTPClient

	// Timeout bounds one read, resolution included (0: OthersTimeout).
	Timeout time.Duration
	// Limits bound the CAR downloads (zero fields: OthersMaxCAR, Timeout,
	// StallTimeout).
	Limits Limits
	// MaxBlocks bounds the blocks (records of any app and MST nodes) of
	// the repositories kept together (0: OthersMaxBlocks).
	MaxBlocks int
	// RetryAfter is how long a failure is remembered (0:
	// OthersRetryAfter; negative: not remembered).
	RetryAfter time.Duration

	mu      sync.Mutex
	entries map[syntax.DID]*other
	lru     list.List // of *other, most recently read first
	blocks  int       // kept by the entries in lru
}

type other struct {
	did     syntax.DID
	repo    *Repo
	elem    *list.Element // in lru while counted
	blocks  int           // counted in Others.blocks
	busy    chan struct{} // closed when the read under way ends
	err     error         // the last read's failure
	errTime time.Time
}

// Snapshot returns the app.bulleted records of ident (a handle or DID).
func (o *Others) Snapshot(ctx context.Context, ident string) (*store.Snapshot, error) {
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = OthersTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ident = strings.TrimPrefix(ident, "@")
	bounded := func(err error) error {
		if err != nil && !errors.Is(err, ErrTimeout) && ctx.Err() == context.DeadlineExceeded {
			return &timeoutError{fmt.Sprintf("reading %s: not done within %s (%v)", ident, timeout, err)}
		}
		return err
	}
	did, err := syntax.ParseDID(ident)
	if err != nil {
		if did, err = o.Resolver.ResolveHandle(ctx, ident); err != nil {
			return nil, bounded(err)
		}
	}
	e, err := o.claim(ctx, did)
	if err != nil {
		return nil, bounded(err)
	}
	var s *store.Snapshot
	r := e.repo
	if r == nil {
		r, err = o.open(ctx, did)
	}
	if err == nil {
		s, err = r.Snapshot(ctx)
	}
	err = bounded(err)
	o.release(e, r, s, err)
	return s, err
}

// claim returns did's entry, marked busy, after any read of it under way;
// or the failure of a recent read.
func (o *Others) claim(ctx context.Context, did syntax.DID) (*other, error) {
	retry := o.RetryAfter
	if retry == 0 {
		retry = OthersRetryAfter
	}
	for {
		o.mu.Lock()
		if o.entries == nil {
			o.entries = map[syntax.DID]*other{}
		}
		e := o.entries[did]
		if e == nil {
			e = &other{did: did}
			o.entries[did] = e
		}
		if busy := e.busy; busy != nil {
			o.mu.Unlock()
			select {
			case <-busy:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if e.err != nil && retry > 0 && time.Since(e.errTime) < retry {
			err := e.err
			o.mu.Unlock()
			return nil, fmt.Errorf("%w (failed %s ago; not tried again for %s)", err, time.Since(e.errTime).Round(time.Second), retry)
		}
		e.busy = make(chan struct{})
		o.mu.Unlock()
		return e, nil
	}
}

// release ends e's read: it remembers the failure, or counts the blocks
// kept and drops the least recently read repositories over the bound.
func (o *Others) release(e *other, r *Repo, s *store.Snapshot, err error) {
	max := o.MaxBlocks
	if max <= 0 {
		max = OthersMaxBlocks
	}
	kept := 0
	if r != nil {
		kept = r.keptBlocks()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	close(e.busy)
	e.busy = nil
	if err != nil {
		e.err, e.errTime = err, time.Now()
		if e.elem == nil {
			e.repo = nil // nothing kept: only the failure is
		}
		if len(o.entries) > o.lru.Len()+1000 { // old failures
			for did, x := range o.entries {
				if x.elem == nil && x.busy == nil && time.Since(x.errTime) > OthersRetryAfter {
					delete(o.entries, did)
				}
			}
		}
		return
	}
	e.err, e.repo = nil, r
	o.blocks += kept - e.blocks
	e.blocks = kept
	if e.elem == nil {
		e.elem = o.lru.PushFront(e)
	} else {
		o.lru.MoveToFront(e.elem)
	}
	for el := o.lru.Back(); el != nil && o.blocks > max; {
		prev := el.Prev()
		if x := el.Value.(*other); x.busy == nil {
			o.forget(x)
		}
		el = prev
	}
}

// forget drops x and what it keeps; o.mu is held.
func (o *Others) forget(x *other) {
	o.lru.Remove(x.elem)
	o.blocks -= x.blocks
	x.elem, x.blocks, x.repo = nil, 0, nil
	delete(o.entries, x.did)
}

// Kept reports how many repositories and blocks o keeps.
func (o *Others) Kept() (repos, blocks int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lru.Len(), o.blocks
}

// open is the Repo of did on its PDS.
func (o *Others) open(ctx context.Context, did syntax.DID) (*Repo, error) {
	ep, err := o.Resolver.Endpoint(ctx, did)
	if err != nil {
		return nil, err
	}
	r := New(NewAPIClient(ep, o.HTTP), did)
	r.Limits = o.Limits
	if r.Limits.MaxCAR <= 0 {
		r.Limits.MaxCAR = OthersMaxCAR
	}
	if r.Limits.CARTimeout <= 0 {
		r.Limits.CARTimeout = o.Timeout
		if o.Timeout <= 0 {
			r.Limits.CARTimeout = OthersTimeout
		}
	}
	return r, nil
}

// keptBlocks is how many blocks r keeps from its last read (its records,
// after a listRecords read).
func (r *Repo) keptBlocks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	if r.car != nil {
		n = r.car.blockCount()
	}
	if r.list != nil {
		n = max(n, len(r.list.Records))
	}
	return n
}
