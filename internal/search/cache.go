package search

import (
	"container/list"
	"sync"
)

// Size estimates the memory the index holds, in bytes, in constant time:
// its blocks as the last update measured them (their rows and corpus,
// the only copy of the lower-cased texts) and a fixed cost per entry. It
// never waits for an update under way (the figure is the last one's).
func (x *Index) Size() int64 { return x.size.Load() }

// entryBytes is an entry's fixed cost: the struct, its map slot and key,
// and its record CIDs.
const entryBytes = 128 // the struct is 48, its slot and key about 80

// Cache keeps one index per repository (by DID), bounded by the bytes they
// hold: past MaxBytes the least recently used are dropped (and built again
// if asked for). The one asked for last is always kept, however large.
type Cache struct {
	MaxBytes int64

	mu    sync.Mutex
	byDID map[string]*list.Element // of *cached
	lru   list.List                // front: most recently used
}

type cached struct {
	did  string
	x    *Index
	size int64 // as last measured
}

// DefaultCacheBytes bounds a Cache with no MaxBytes.
const DefaultCacheBytes = 256 << 20

// NewCache returns a cache bounded by maxBytes (0: DefaultCacheBytes).
func NewCache(maxBytes int64) *Cache { return &Cache{MaxBytes: maxBytes} }

// For returns did's index, made empty if the cache holds none. The sizes
// of the indexes are measured again on each call (they grow as they are
// updated), and the least recently used are dropped to fit.
func (c *Cache) For(did string) *Index {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byDID == nil {
		c.byDID = map[string]*list.Element{}
	}
	el, ok := c.byDID[did]
	if ok {
		c.lru.MoveToFront(el)
	} else {
		x := New()
		x.background = true // a cold search walks; the index is built beside it
		el = c.lru.PushFront(&cached{did: did, x: x})
		c.byDID[did] = el
	}
	limit := c.MaxBytes
	if limit <= 0 {
		limit = DefaultCacheBytes
	}
	var total int64
	for e := c.lru.Front(); e != nil; {
		ce := e.Value.(*cached)
		ce.size = ce.x.Size()
		total += ce.size
		next := e.Next()
		if total > limit && e != el {
			total -= ce.size
			c.lru.Remove(e)
			delete(c.byDID, ce.did)
		}
		e = next
	}
	return el.Value.(*cached).x
}

// Len is how many indexes the cache holds.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// Bytes is what the indexes held measured at the last For.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for e := c.lru.Front(); e != nil; e = e.Next() {
		n += e.Value.(*cached).size
	}
	return n
}
