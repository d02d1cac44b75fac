package store

import (
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
	for i, c := range cs {
		if sp, ok := s.get(c); !ok || sp.off != int64(i) {
			t.Fatalf("%s: %v %v", c, sp, ok)
		}
	}
	if _, ok := s.get(mk(std, "c")); ok {
		t.Fatal("an absent block was found")
	}
	seen := map[cid.Cid]int64{}
	for c, sp := range s.all() {
		seen[c] = sp.off
	}
	for i, c := range cs {
		if off, ok := seen[c]; !ok || off != int64(i) {
			t.Fatalf("all: %s missing or wrong (%v)", c, off)
		}
	}
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
