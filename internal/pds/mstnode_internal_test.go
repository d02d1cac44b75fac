package pds

import (
	"errors"
	"testing"

	"github.com/ipfs/go-cid"
)

// TestNodeValues: nodeValues finds, in entry order, the value CIDs
// parseNode finds, in every node of a model repository's many commits and
// in a node whose map lists its keys out of order; bytes that are not a
// node's (cut anywhere, a value that is not a link, trailing bytes, lengths
// beyond the bytes) are errNodeShape, never a panic or a wrong list.
func TestNodeValues(t *testing.T) {
	m := newModel(t, 3)
	seen := 0
	for range 12 {
		m.mutate(30)
		m.commitState()
		for k := range m.nodes {
			blk := m.made[k]
			n, err := parseNode(blk.Cid(), blk.RawData())
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, e := range n.Entries {
				if e.IsValue() {
					want = append(want, e.Value.KeyString())
				}
			}
			var got []string
			if err := nodeValues(blk.RawData(), func(i int, vk string) {
				if i != len(got) {
					t.Fatalf("value %d reported as %d", len(got), i)
				}
				got = append(got, vk)
			}); err != nil {
				t.Fatalf("node %s: %v", blk.Cid(), err)
			}
			if len(got) != len(want) {
				t.Fatalf("node %s: %d values, parseNode finds %d", blk.Cid(), len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("node %s: value %d is %s, parseNode reads %s", blk.Cid(), i, cidOfKey(got[i]), cidOfKey(want[i]))
				}
			}
			seen += len(got)
			// every cut of it is refused
			raw := blk.RawData()
			for j := range len(raw) {
				if err := nodeValues(raw[:j], func(int, string) {}); !errors.Is(err, errNodeShape) {
					t.Fatalf("node %s cut to %d of %d bytes: %v", blk.Cid(), j, len(raw), err)
				}
			}
			if err := nodeValues(append(raw[:len(raw):len(raw)], 0xf6), func(int, string) {}); !errors.Is(err, errNodeShape) {
				t.Fatalf("a trailing byte: %v", err)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no values seen")
	}
	v, _ := cid.NewPrefixV1(cid.DagCBOR, 0x12).Sum([]byte("x"))
	link := append([]byte{0xd8, 0x2a, 0x58, byte(1 + len(v.Bytes())), 0}, v.Bytes()...)
	// {"l": null, "e": [{"k": "a", "p": 0, "t": null, "v": link}]}: keys
	// out of DAG-CBOR's order are still read
	odd := append([]byte{0xa2, 0x61, 'l', 0xf6, 0x61, 'e', 0x81, 0xa4, 0x61, 'k', 0x41, 'a', 0x61, 'p', 0x00, 0x61, 't', 0xf6, 0x61, 'v'}, link...)
	var got []string
	if err := nodeValues(odd, func(_ int, vk string) { got = append(got, vk) }); err != nil || len(got) != 1 || got[0] != v.KeyString() {
		t.Fatalf("keys out of order: %v %d", err, len(got))
	}
	for name, bad := range map[string][]byte{
		"not a map":           {0x80},
		"a value not a link":  {0xa1, 0x61, 'e', 0x81, 0xa1, 0x61, 'v', 0xf6},
		"an entry without v":  {0xa1, 0x61, 'e', 0x81, 0xa1, 0x61, 'k', 0x41, 'a'},
		"an array too long":   {0xa1, 0x61, 'e', 0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"a map too long":      {0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		"indefinite length":   {0xa1, 0x61, 'e', 0x9f, 0xff},
		"a key not text":      {0xa1, 0x41, 'e', 0x80},
		"a link without a 0":  append([]byte{0xa1, 0x61, 'e', 0x81, 0xa1, 0x61, 'v', 0xd8, 0x2a, 0x58, byte(len(v.Bytes()))}, v.Bytes()...),
		"a string beyond end": {0xa1, 0x61, 'e', 0x81, 0xa1, 0x61, 'v', 0xd8, 0x2a, 0x5a, 0xff, 0xff, 0xff, 0xff},
	} {
		if err := nodeValues(bad, func(int, string) { t.Fatalf("%s: a value reported", name) }); !errors.Is(err, errNodeShape) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
