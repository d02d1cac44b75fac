package search

import (
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestCacheBoundedByBytes: the cache keeps indexes while they fit its
// bytes, drops the least recently used past them, and always keeps the one
// asked for; a dropped index is made again, empty, when asked for.
func TestCacheBoundedByBytes(t *testing.T) {
	t.Parallel()
	tr := outline.Build(&store.Snapshot{DID: outlinegen.DID, Commit: "c1", Records: outlinegen.Generate(2000, 1)})
	one := New()
	one.Update(tr)
	size := one.Size()
	if size < 2000*entryBytes {
		t.Fatalf("an index of about 2,000 records measures %d bytes", size)
	}
	c := NewCache(2*size + size/2) // room for two
	for _, did := range []string{"did:a", "did:b", "did:c"} {
		c.For(did).Update(tr)
	}
	// measured again at the next For: three of size about S, room for two
	x := c.For("did:b")
	if c.Len() != 2 || c.Bytes() > c.MaxBytes {
		t.Fatalf("%d indexes, %d bytes, over the bound of %d", c.Len(), c.Bytes(), c.MaxBytes)
	}
	if c.For("did:b") != x {
		t.Fatal("the index asked for last was dropped")
	}
	if got := c.For("did:c"); got.Size() < size {
		t.Fatal("did:c was used after did:a and should have been kept")
	}
	if got := c.For("did:a"); got.Size() >= size {
		t.Fatalf("did:a was the least recently used and should have been dropped (made again empty), size %d", got.Size())
	}
	// one index larger than the bound is kept while it is the one in use
	tiny := NewCache(1)
	y := tiny.For("did:x")
	y.Update(tr)
	if tiny.For("did:x") != y || tiny.Len() != 1 {
		t.Fatal("an index over the bound was dropped while in use")
	}
}
