package store

import (
	"bufio"
	"encoding/binary"
	"io"

	"github.com/ipfs/go-cid"
	cbor "github.com/ipfs/go-ipld-cbor"
)

// CARWriter writes a CAR file (version 1, one root) a block at a time, so
// that a whole repository is never held as one buffer (WriteCAR's blocks
// must all be at hand; this needs one at a time).
type CARWriter struct {
	bw *bufio.Writer
	lb [binary.MaxVarintLen64]byte
}

// NewCARWriter writes the header of a CAR whose root is root to w.
func NewCARWriter(w io.Writer, root cid.Cid) (*CARWriter, error) {
	hdr, err := cbor.DumpObject(map[string]any{"roots": []cid.Cid{root}, "version": 1})
	if err != nil {
		return nil, err
	}
	cw := &CARWriter{bw: bufio.NewWriterSize(w, 64<<10)}
	cw.bw.Write(cw.lb[:binary.PutUvarint(cw.lb[:], uint64(len(hdr)))])
	_, err = cw.bw.Write(hdr)
	return cw, err
}

// Block writes one section: the block data of CID c.
func (cw *CARWriter) Block(c cid.Cid, data []byte) error {
	cb := c.Bytes()
	cw.bw.Write(cw.lb[:binary.PutUvarint(cw.lb[:], uint64(len(cb)+len(data)))])
	cw.bw.Write(cb)
	_, err := cw.bw.Write(data)
	return err
}

// Flush writes what is buffered.
func (cw *CARWriter) Flush() error { return cw.bw.Flush() }
