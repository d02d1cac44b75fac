package pds

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	blocks "github.com/ipfs/go-block-format"
	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"
	"github.com/ipld/go-car/util"
)

// sectionReader reads a CAR's blocks as go-car's CarReader does (each
// section bounded, each block checked against its CID), but lays their
// bytes side by side in large chunks instead of one allocation each. A
// read's blocks are garbage once it is decoded (values, nodes and keys
// are copies), and go-car's many small buffers, freed among what the
// read keeps, left the heap's spans a third empty (100k records: 44 MB
// held beyond 109 MB live after a cold read); chunks are freed whole. A
// block kept beyond the read is copied out of its chunk (own), so that no
// chunk outlives its read.
type sectionReader struct {
	br    *bufio.Reader
	chunk []byte
	read  int // bytes of sections read so far
}

// sectionChunk is the largest chunk; a chunk is as large as what was read
// before it, from 16 KB (a commit event's few blocks take one small chunk);
// a section over a quarter of sectionChunk gets an allocation of its own.
const sectionChunk = 1 << 20

func newSectionReader(rd io.Reader) (*sectionReader, *car.CarHeader, error) {
	br := bufio.NewReaderSize(rd, 64<<10)
	h, err := car.ReadHeader(br)
	if err != nil {
		return nil, nil, err
	}
	return &sectionReader{br: br}, h, nil
}

// section is the next block's CID and bytes, or io.EOF after the last.
func (s *sectionReader) section() (cid.Cid, []byte, error) {
	if _, err := s.br.Peek(1); err != nil {
		return cid.Undef, nil, err // io.EOF: no more blocks
	}
	l, err := binary.ReadUvarint(s.br)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return cid.Undef, nil, err
	}
	if l > uint64(util.MaxAllowedSectionSize) {
		return cid.Undef, nil, fmt.Errorf("malformed CAR: a section of %d bytes", l)
	}
	buf := s.take(int(l))
	if _, err := io.ReadFull(s.br, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return cid.Undef, nil, err
	}
	n, c, err := cid.CidFromBytes(buf)
	if err != nil {
		return cid.Undef, nil, err
	}
	data := buf[n:]
	if !blockMatches(buf[:n], c, data) {
		return cid.Undef, nil, fmt.Errorf("mismatch in content integrity, name: %s", c)
	}
	return c, data, nil
}

// take is n bytes of the current chunk (a new one when it is full).
func (s *sectionReader) take(n int) []byte {
	if n > sectionChunk/4 {
		return make([]byte, n)
	}
	s.read += n
	if cap(s.chunk)-len(s.chunk) < n {
		s.chunk = make([]byte, 0, min(max(s.read, 16<<10), sectionChunk))
	}
	start := len(s.chunk)
	s.chunk = s.chunk[:start+n]
	return s.chunk[start : start+n : start+n]
}

// blockMatches reports whether data is the block c names, cb being c's
// bytes (a CIDv1 with a one-byte codec and SHA-256, what repositories
// hold, without an allocation; others as go-car checks them).
func blockMatches(cb []byte, c cid.Cid, data []byte) bool {
	if len(cb) == 36 && cb[0] == 1 && cb[1] < 0x80 && cb[2] == 0x12 && cb[3] == 0x20 {
		sum := sha256.Sum256(data)
		return bytes.Equal(cb[4:], sum[:])
	}
	hashed, err := c.Prefix().Sum(data)
	return err == nil && hashed.Equals(c)
}

// own is b with bytes of its own (nil stays nil): a block kept beyond the
// read it came in, which must not hold that read's chunk.
func own(b blocks.Block) blocks.Block {
	if b == nil {
		return nil
	}
	o, err := blocks.NewBlockWithCid(bytes.Clone(b.RawData()), b.Cid())
	if err != nil {
		return b
	}
	return o
}
