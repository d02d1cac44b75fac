package store

import (
	"fmt"
	"testing"

	"github.com/ipfs/go-cid"
	"github.com/multiformats/go-multihash"
)

// TestSpansKeepsEveryCID: blocks of the usual CID (keyed by digest) and
// of any other (a raw codec, another hash) are found, told apart, and all
// walked with their own CIDs.
func TestSpansKeepsEveryCID(t *testing.T) {
	mk := func(p cid.Prefix, data string) cid.Cid {
		c, err := p.Sum([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	std := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256)
	cs := []cid.Cid{mk(std, "a"), mk(std, "b"), mk(cid.NewPrefixV1(cid.Raw, multihash.SHA2_256), "a"),
		mk(cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_512), "a"), mk(cid.NewPrefixV0(multihash.SHA2_256), "a")}
	s := newSpans(0)
	for i, c := range cs {
		s.set(c, span{int64(i), uint32(i)})
	}
	if s.len() != len(cs) || len(s.std) != 2 {
		t.Fatalf("len %d (std %d), want %d (2)", s.len(), len(s.std), len(cs))
	}
	check := func(when string, cs []cid.Cid, off func(i int) int64) {
		t.Helper()
		if s.len() != len(cs) {
			t.Fatalf("%s: len %d, want %d", when, s.len(), len(cs))
		}
		for i, c := range cs {
			if sp, ok := s.get(c); !ok || sp.off != off(i) {
				t.Fatalf("%s: %s: %v %v", when, c, sp, ok)
			}
		}
		if _, ok := s.get(mk(std, "absent")); ok {
			t.Fatalf("%s: an absent block was found", when)
		}
		seen := map[cid.Cid]int64{}
		for c, sp := range s.all() {
			seen[c] = sp.off
		}
		for i, c := range cs {
			if o, ok := seen[c]; !ok || o != off(i) {
				t.Fatalf("%s: all: %s missing or wrong (%v)", when, c, o)
			}
		}
	}
	check("in the map", cs, func(i int) int64 { return int64(i) })
	// folded into the sorted arrays (a log read whole), then blocks added
	// beside them, one block's place changed, and folded again
	for i := range 3000 {
		cs = append(cs, mk(std, fmt.Sprint("many ", i)))
		s.set(cs[len(cs)-1], span{int64(len(cs) - 1), 1})
	}
	s.seal()
	if len(s.std) != 0 || len(s.keys) != 3002 {
		t.Fatalf("sealed: %d in the map, %d sorted", len(s.std), len(s.keys))
	}
	check("sorted", cs, func(i int) int64 { return int64(i) })
	for i := range 500 {
		cs = append(cs, mk(std, fmt.Sprint("added ", i)))
		s.set(cs[len(cs)-1], span{int64(len(cs) - 1), 1})
	}
	s.set(cs[0], span{-1, 1})
	moved := func(i int) int64 {
		if i == 0 {
			return -1
		}
		return int64(i)
	}
	s.settle() // 500 of 3,002: stays in the map
	if len(s.std) != 500 {
		t.Fatalf("settle folded %d blocks", 3502-len(s.std))
	}
	check("sorted and added", cs, moved)
	for i := range 1000 {
		cs = append(cs, mk(std, fmt.Sprint("more ", i)))
		s.set(cs[len(cs)-1], span{int64(len(cs) - 1), 1})
	}
	s.settle()
	if len(s.std) != 0 {
		t.Fatalf("settle left %d of 1,500 added to 3,002", len(s.std))
	}
	check("folded again", cs, moved)
}

// TestCIDStringIsString: the one-allocation CID text is cid.String's, for
// CIDv1 of several codecs and hashes and for CIDv0.
func TestCIDStringIsString(t *testing.T) {
	for i, p := range []cid.Prefix{cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256), cid.NewPrefixV1(cid.Raw, multihash.SHA2_256),
		cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_512), cid.NewPrefixV0(multihash.SHA2_256)} {
		for _, data := range []string{"", "a", "record bytes"} {
			c, err := p.Sum([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := cidString(c), c.String(); got != want {
				t.Fatalf("prefix %d %q: %s, want %s", i, data, got, want)
			}
		}
	}
}

// TestSpansOfALog: the index of a log read whole is the one set would
// make section by section: a block found at its last section, a bad
// section left out, other CIDs kept.
func TestSpansOfALog(t *testing.T) {
	std := cid.NewPrefixV1(cid.DagCBOR, multihash.SHA2_256)
	mk := func(p cid.Prefix, data string) cid.Cid {
		c, err := p.Sum([]byte(data))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	var secs []section
	for i := range 5000 {
		secs = append(secs, section{c: mk(std, fmt.Sprint(i%4000)), off: int64(i), n: 1})
	}
	secs = append(secs, section{c: mk(cid.NewPrefixV1(cid.Raw, multihash.SHA2_256), "raw"), off: 7, n: 2},
		section{c: mk(std, "bad"), off: 9, n: bad})
	got, want := spansOf(secs, 100), newSpans(0)
	for _, sc := range secs {
		if sc.n != bad {
			want.set(sc.c, span{100 + sc.off, sc.n})
		}
	}
	if got.len() != want.len() || got.len() != 4001 {
		t.Fatalf("%d blocks, want %d (4,001)", got.len(), want.len())
	}
	for c, sp := range want.all() {
		if g, ok := got.get(c); !ok || g != sp {
			t.Fatalf("%s: %v %v, want %v", c, g, ok, sp)
		}
	}
	if _, ok := got.get(mk(std, "bad")); ok {
		t.Fatal("a bad section was indexed")
	}
}
