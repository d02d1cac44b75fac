package pds

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"
	mh "github.com/multiformats/go-multihash"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

func testCAR(t *testing.T, n int) ([]byte, []blocks.Block) {
	t.Helper()
	var bs []blocks.Block
	for i := range n {
		v := store.MustValue(map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprint("bullet ", i, string(bytes.Repeat([]byte("x"), i%700))), "sortKey": "a"})
		id, err := cid.Decode(v.CID())
		if err != nil {
			t.Fatal(err)
		}
		b, err := blocks.NewBlockWithCid(v.CBOR(), id)
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	var buf bytes.Buffer
	if err := store.WriteCAR(&buf, bs[0].Cid(), bs); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), bs
}

// The section reader reads what go-car's reader reads, block for block,
// across many chunks; and refuses what it refuses.
func TestSectionReaderAgreesWithGoCar(t *testing.T) {
	raw, _ := testCAR(t, 5000)
	ref, err := car.NewCarReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	sr, hdr, err := newSectionReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if len(hdr.Roots) != 1 || hdr.Roots[0] != ref.Header.Roots[0] {
		t.Fatalf("roots %v, go-car %v", hdr.Roots, ref.Header.Roots)
	}
	var got []blocks.Block
	for i := 0; ; i++ {
		want, werr := ref.Next()
		b, err := sr.next()
		if werr == io.EOF || err == io.EOF {
			if werr != err {
				t.Fatalf("block %d: end %v, go-car %v", i, err, werr)
			}
			break
		}
		if err != nil || werr != nil || b.Cid() != want.Cid() || !bytes.Equal(b.RawData(), want.RawData()) {
			t.Fatalf("block %d: %v %v", i, err, werr)
		}
		got = append(got, b)
	}
	if len(got) != 5000 {
		t.Fatalf("%d blocks", len(got))
	}
	for i, b := range got { // later chunks never wrote over earlier blocks
		if !blockMatches(b.Cid().Bytes(), b.Cid(), b.RawData()) {
			t.Fatalf("block %d changed after it was read", i)
		}
	}
	o := own(got[7])
	if o.Cid() != got[7].Cid() || !bytes.Equal(o.RawData(), got[7].RawData()) || &o.RawData()[0] == &got[7].RawData()[0] {
		t.Fatal("own is not a copy of the block")
	}
	// a flipped byte in a block, and a CAR cut short
	bad := bytes.Clone(raw)
	bad[len(bad)-3] ^= 1
	if err := readAll(bad); err == nil || !bytes.Contains([]byte(err.Error()), []byte("integrity")) {
		t.Fatalf("a damaged block: %v", err)
	}
	if err := readAll(raw[:len(raw)-10]); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a CAR cut short: %v", err)
	}
}

func readAll(raw []byte) error {
	sr, _, err := newSectionReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	for {
		if _, err := sr.next(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestBlockMatches: a block is checked against its CID on the fast path
// (CIDv1, SHA-256) and the general one (CIDv0, SHA-512, a two-byte codec)
// alike; a changed byte fails both.
func TestBlockMatches(t *testing.T) {
	data := []byte("\xa1ahbello")
	for _, c := range []cid.Cid{
		mustSum(t, cid.NewPrefixV1(cid.DagCBOR, mh.SHA2_256), data),
		mustSum(t, cid.NewPrefixV1(cid.Raw, mh.SHA2_256), data),
		mustSum(t, cid.NewPrefixV0(mh.SHA2_256), data),
		mustSum(t, cid.NewPrefixV1(cid.DagCBOR, mh.SHA2_512), data),
		mustSum(t, cid.NewPrefixV1(cid.DagJOSE, mh.SHA2_256), data), // codec 0x85 0x01
	} {
		if !blockMatches(c.Bytes(), c, data) {
			t.Errorf("%s does not match its block", c)
		}
		bad := bytes.Clone(data)
		bad[3] ^= 1
		if blockMatches(c.Bytes(), c, bad) {
			t.Errorf("%s matches a changed block", c)
		}
	}
}

// TestCIDText: the text made without go-cid is go-cid's, for a CIDv1 of
// any codec and hash; a CIDv0 and bytes that are no CID as before.
func TestCIDText(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var names recordNames // the same texts, side by side in its arena
	var made, want []string
	for i := range 500 {
		data := make([]byte, rng.IntN(64))
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		prefixes := []cid.Prefix{cid.NewPrefixV1(cid.DagCBOR, mh.SHA2_256), cid.NewPrefixV1(cid.Raw, mh.SHA2_512),
			cid.NewPrefixV1(cid.DagJOSE, mh.SHA2_256), cid.NewPrefixV0(mh.SHA2_256), cid.NewPrefixV1(cid.DagCBOR, mh.IDENTITY)}
		c := mustSum(t, prefixes[i%len(prefixes)], data)
		if got := cidText(c.KeyString()); got != c.String() {
			t.Fatalf("cidText %q, go-cid %q", got, c.String())
		}
		made, want = append(made, names.cid(c.KeyString())), append(want, c.String())
		_, _ = names.of(append([]byte("app.bulleted.node/"), data...))
	}
	for i := range made { // none overwritten by a later one
		if made[i] != want[i] {
			t.Fatalf("recordNames.cid %q, go-cid %q", made[i], want[i])
		}
	}
	if got := cidText("\x12"); got != "" {
		t.Fatalf("not a CID: %q", got)
	}
}

func mustSum(t *testing.T, p cid.Prefix, data []byte) cid.Cid {
	t.Helper()
	c, err := p.Sum(data)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// next is the next block, or io.EOF after the last.
func (s *sectionReader) next() (blocks.Block, error) {
	c, data, err := s.section()
	if err != nil {
		return nil, err
	}
	return blocks.NewBlockWithCid(data, c)
}
