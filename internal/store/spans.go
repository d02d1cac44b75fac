package store

import (
	"iter"

	"github.com/ipfs/go-cid"
)

// stdPrefix is the CID prefix of every block the store writes (CIDv1,
// DAG-CBOR, SHA-256 of 32 bytes), before the digest.
const stdPrefix = "\x01\x71\x12\x20"

// spans is where each block is in the log, by CID. A block of the usual
// CID (stdPrefix) is keyed by its 32-byte digest, kept in the map's own
// slot: a map keyed by cid.Cid kept each key in an allocation of its own
// (48 bytes a block beside its slot, 18 MB at 249,000 records). Other
// CIDs, which a log read from elsewhere may hold, keep their key.
type spans struct {
	std   map[[32]byte]span
	other map[cid.Cid]span
}

func newSpans(n int) spans {
	return spans{std: make(map[[32]byte]span, n), other: map[cid.Cid]span{}}
}

// digest is c's SHA-256 digest when c has the usual prefix.
func digest(c cid.Cid) (d [32]byte, ok bool) {
	k := c.KeyString()
	if len(k) != len(stdPrefix)+32 || k[:len(stdPrefix)] != stdPrefix {
		return d, false
	}
	copy(d[:], k[len(stdPrefix):])
	return d, true
}

func (s spans) get(c cid.Cid) (span, bool) {
	if d, ok := digest(c); ok {
		sp, ok := s.std[d]
		return sp, ok
	}
	sp, ok := s.other[c]
	return sp, ok
}

func (s spans) set(c cid.Cid, sp span) {
	if d, ok := digest(c); ok {
		s.std[d] = sp
		return
	}
	s.other[c] = sp
}

func (s spans) len() int { return len(s.std) + len(s.other) }

// all is every block's CID and span (each usual CID made again: for the
// rare walks over the whole log).
func (s spans) all() iter.Seq2[cid.Cid, span] {
	return func(yield func(cid.Cid, span) bool) {
		for d, sp := range s.std {
			c, err := cid.Cast(append([]byte(stdPrefix), d[:]...))
			if err != nil {
				continue // cannot happen: the prefix is a CID's
			}
			if !yield(c, sp) {
				return
			}
		}
		for c, sp := range s.other {
			if !yield(c, sp) {
				return
			}
		}
	}
}
