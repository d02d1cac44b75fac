package pds

import (
	"bytes"
	"fmt"
	"testing"
)

// The arena hands out copies side by side that later copies never touch;
// a large value gets an allocation of its own.
func TestValueArenaCopies(t *testing.T) {
	var a valueArena
	var raws, got [][]byte
	for i := range 3000 {
		raw := []byte(fmt.Sprintf("value %d %s", i, bytes.Repeat([]byte{byte(i)}, i%300)))
		if i%500 == 0 {
			raw = bytes.Repeat([]byte{'x'}, arenaChunk/4) // large
		}
		c := a.copy(raw)
		if &c[0] == &raw[0] || !bytes.Equal(c, raw) || cap(c) != len(c) {
			t.Fatalf("copy %d: not a copy of exactly its bytes", i)
		}
		raws, got = append(raws, bytes.Clone(raw)), append(got, c)
		for j := range raw {
			raw[j] = '!' // the block's buffer is garbage after: the copy must not share it
		}
	}
	for i := range got {
		if !bytes.Equal(got[i], raws[i]) {
			t.Fatalf("copy %d changed by later copies", i)
		}
	}
}
