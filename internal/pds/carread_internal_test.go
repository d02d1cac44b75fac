package pds

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"

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
		if !blockMatches(b.Cid(), b.RawData()) {
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
