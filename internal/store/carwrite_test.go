package store

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
)

// A CAR written a block at a time is byte for byte the one WriteCAR makes
// of the same blocks in its order (the root's first, then by CID).
func TestCARWriterMatchesWriteCAR(t *testing.T) {
	var bs []blocks.Block
	for i := range 50 {
		v := MustValue(map[string]any{"$type": "app.bulleted.node", "text": fmt.Sprint("bullet ", i), "sortKey": "a"})
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
	root := bs[17].Cid()
	var want bytes.Buffer
	if err := WriteCAR(&want, root, slices.Clone(bs)); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(bs, func(a, b blocks.Block) int {
		switch {
		case a.Cid() == root:
			return -1
		case b.Cid() == root:
			return 1
		}
		return strings.Compare(a.Cid().KeyString(), b.Cid().KeyString())
	})
	var got bytes.Buffer
	cw, err := NewCARWriter(&got, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if err := cw.Block(b.Cid(), b.RawData()); err != nil {
			t.Fatal(err)
		}
	}
	if err := cw.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) || got.Len() < 50*20 {
		t.Fatalf("%d bytes written a block at a time, WriteCAR made %d (or differs)", got.Len(), want.Len())
	}
}
