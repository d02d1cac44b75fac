package search

// SizeOf is what did's index held when last measured (0: none kept).
func (c *Cache) SizeOf(did string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byDID[did]; ok {
		ce := el.Value.(*cached)
		ce.size = ce.x.Size()
		return ce.size
	}
	return 0
}

// Drop forgets did's index (built again if asked for): a hosted instance
// drops an evicted user's index with their engine.
func (c *Cache) Drop(did string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byDID[did]; ok {
		c.lru.Remove(el)
		delete(c.byDID, did)
	}
}
