package pds

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/ipfs/go-cid"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// The cache file (Repo.Cache) is a CAR of the last read's blocks, so that a
// restarted server (an MCP client starts one per session) asks the PDS only
// for what changed since (getRepo?since=rev), or, if nothing did, for the
// head alone. It is rewritten after a whole-repository read, and after
// incremental reads once they brought a tenth of the blocks again; a cache
// that cannot be read, or holds another repository, is ignored.

// loadCache makes the cache file the last read, once, if there is none.
// A caller that comes while another loads it waits for that load (or its
// ctx): the follower's start must see the kept commit its stream position
// belongs to, not nothing because a first read is still loading it.
func (r *Repo) loadCache(ctx context.Context) {
	r.mu.Lock()
	if r.Cache == "" || r.car != nil || r.list != nil {
		r.mu.Unlock()
		return
	}
	if r.cacheTried {
		loading := r.cacheLoading
		r.mu.Unlock()
		select {
		case <-loading:
		case <-ctx.Done():
		}
		return
	}
	r.cacheTried = true
	loading := make(chan struct{})
	r.cacheLoading = loading
	r.mu.Unlock()
	defer close(loading)
	f, err := os.Open(r.Cache)
	if err != nil {
		return
	}
	defer f.Close()
	fe, err := readBlocks(ctx, limit(f, r.Limits.car().max), runtime.GOMAXPROCS(0), false)
	if err != nil {
		return
	}
	c, err := buildCAR(fe, r.did)
	if err != nil {
		return
	}
	r.Stats.CacheLoads.Add(1)
	r.Stats.Walks.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.car == nil && r.list == nil {
		r.keep(c)
	}
}

// saveCache writes the kept repository to the cache file when it is worth
// it: after a whole read (whole), or when the reads since the last save
// brought a tenth of the blocks kept (received: what this read brought).
// The blocks are listed under the lock, made and written without it.
func (r *Repo) saveCache(received int, whole bool) {
	if r.Cache == "" {
		return
	}
	r.mu.Lock()
	r.unsaved += received
	c := r.car
	due := c != nil && (whole || r.unsaved > c.blockCount()/10)
	var parts cacheParts
	var root cid.Cid
	seq := r.stream.carSeq
	if due {
		r.unsaved = 0
		parts = c.parts()
		root = c.commit
	}
	r.mu.Unlock()
	if !due {
		return
	}
	// streamed to the file a block at a time (a node encoded as it is
	// written): the whole repository as one buffer, and every node's block
	// beside it, was the peak of a server's memory (100k records: 130 MB
	// for a 40 MB file). A block that cannot be made leaves the file as it
	// was: an incomplete cache would cost the next start a whole read too;
	// a failed write costs it a whole read, no more.
	err := atomicfile.WriteFunc(r.Cache, 0o600, func(w io.Writer) error { return parts.write(w, root) })
	if err == nil {
		err = r.saveCursor(seq, root.String()) // the stream's position goes with it (follow.go)
		if r.AfterCacheSave != nil {
			r.AfterCacheSave()
		}
	}
	r.cacheWritten(err)
}

// cacheWritten says a failed write of the cache file or the stream's
// position (on Warn at once and in the next result through Notices), once
// until a write succeeds again. It costs no data: the next start reads
// what the file would have spared it.
func (r *Repo) cacheWritten(err error) {
	r.mu.Lock()
	say := err != nil && !r.cacheFailing
	r.cacheFailing = err != nil
	r.mu.Unlock()
	if !say {
		return
	}
	msg := fmt.Sprintf("The read cache could not be written (%v): nothing is lost, but the next start reads from the PDS what the cache would have spared it (the whole repository, if no older cache is there). Said once until a write succeeds.", err)
	if r.Notices != nil {
		r.Notices.Add(msg)
	}
	if r.Warn != nil {
		r.Warn(msg)
	}
}
