package store

import (
	"bytes"
	"iter"
	"slices"
	"sort"

	"github.com/ipfs/go-cid"
)

// stdPrefix is the CID prefix of every block the store writes (CIDv1,
// DAG-CBOR, SHA-256 of 32 bytes), before the digest.
const stdPrefix = "\x01\x71\x12\x20"

// spans is where each block is in the log, by CID. A block of the usual
// CID (stdPrefix) is keyed by its 32-byte digest: those of the log as it
// was read are in two sorted arrays (keys, at: 48 bytes a block, where a
// map of them took about 70 with its slack: 28 MB at 249,000 records),
// found by their first two bytes (first) and a search by halves among the
// few that share them; blocks added since are in a map (std), folded into
// the arrays once it is a quarter of them. A map keyed by cid.Cid kept
// each key in an allocation of its own (48 bytes a block beside its slot,
// 18 MB at 249,000 records). Other CIDs, which a log read from elsewhere
// may hold, keep their key.
type spans struct {
	keys  [][32]byte // sorted, each once
	at    []span     // at[i] is keys[i]'s
	first []int32    // first[h]: the first i whose keys[i] begins with h (2 bytes, big-endian) or after; len 1<<16+1
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

// find is d's index in keys, or -1.
func (s *spans) find(d *[32]byte) int {
	if len(s.keys) == 0 {
		return -1
	}
	h := head(d)
	lo, hi := int(s.first[h]), int(s.first[h+1])
	i := lo + sort.Search(hi-lo, func(i int) bool { return bytes.Compare(s.keys[lo+i][:], d[:]) >= 0 })
	if i < hi && s.keys[i] == *d {
		return i
	}
	return -1
}

func (s *spans) get(c cid.Cid) (span, bool) {
	if d, ok := digest(c); ok {
		if sp, ok := s.std[d]; ok {
			return sp, true
		}
		if i := s.find(&d); i >= 0 {
			return s.at[i], true
		}
		return span{}, false
	}
	sp, ok := s.other[c]
	return sp, ok
}

func (s *spans) set(c cid.Cid, sp span) {
	if d, ok := digest(c); ok {
		if i := s.find(&d); i >= 0 {
			s.at[i] = sp
			return
		}
		s.std[d] = sp
		return
	}
	s.other[c] = sp
}

// settle folds the blocks added into the sorted arrays once they are a
// quarter of them (after a commit's blocks are added).
func (s *spans) settle() {
	if len(s.std) > 1024 && len(s.std) > len(s.keys)/4 {
		s.seal()
	}
}

// seal folds the map of blocks added into the sorted arrays.
func (s *spans) seal() {
	if len(s.std) == 0 {
		return
	}
	s.keys, s.at, s.first = sortedSpans(func(put func(d *[32]byte, sp span)) {
		for i := range s.keys {
			put(&s.keys[i], s.at[i])
		}
		for d, sp := range s.std {
			put(&d, sp)
		}
	})
	s.std = map[[32]byte]span{}
}

// spansOf is the index of a log's sections read whole (from offset base),
// made without a map between: a later section of the same block wins, as
// set would have it.
func spansOf(secs []section, base int64) spans {
	s := newSpans(0)
	s.keys, s.at, s.first = sortedSpans(func(put func(d *[32]byte, sp span)) {
		for _, sc := range secs {
			if sc.n == bad {
				continue
			}
			if d, ok := digest(sc.c); ok {
				put(&d, span{base + sc.off, sc.n})
			} else {
				s.other[sc.c] = span{base + sc.off, sc.n}
			}
		}
	})
	return s
}

// sortedSpans sorts what each puts (called twice: counted, then placed)
// by digest: placed by their first two bytes (a counting sort, digests
// being uniform), then each run of the same two bytes (a few blocks)
// sorted in place, in order of putting among equals, of which the last
// is kept.
func sortedSpans(each func(put func(d *[32]byte, sp span))) ([][32]byte, []span, []int32) {
	first := make([]int32, 1<<16+1)
	n := 0
	each(func(d *[32]byte, _ span) {
		first[head(d)+1]++
		n++
	})
	for h := 1; h <= 1<<16; h++ {
		first[h] += first[h-1]
	}
	next := slices.Clone(first[:1<<16])
	keys, at := make([][32]byte, n), make([]span, n)
	each(func(d *[32]byte, sp span) {
		h := head(d)
		keys[next[h]], at[next[h]] = *d, sp
		next[h]++
	})
	dups := false
	for h := range 1 << 16 {
		lo, hi := int(first[h]), int(first[h+1])
		for i := lo + 1; i < hi; i++ {
			for j := i; j > lo; j-- {
				c := bytes.Compare(keys[j-1][:], keys[j][:])
				dups = dups || c == 0
				if c <= 0 {
					break
				}
				keys[j-1], keys[j] = keys[j], keys[j-1]
				at[j-1], at[j] = at[j], at[j-1]
			}
		}
	}
	if !dups {
		return keys, at, first
	}
	// the same block twice: the last one put is kept
	w := 0
	for i := range keys {
		if i+1 < len(keys) && keys[i+1] == keys[i] {
			continue
		}
		keys[w], at[w] = keys[i], at[i]
		w++
	}
	keys, at = keys[:w:w], at[:w:w]
	clear(first)
	for i := range keys {
		first[head(&keys[i])+1]++
	}
	for h := 1; h <= 1<<16; h++ {
		first[h] += first[h-1]
	}
	return keys, at, first
}

// head is a digest's first two bytes, its bucket in first.
func head(d *[32]byte) int { return int(d[0])<<8 | int(d[1]) }

func (s *spans) len() int { return len(s.keys) + len(s.std) + len(s.other) }

// all is every block's CID and span (each usual CID made again: for the
// rare walks over the whole log).
func (s *spans) all() iter.Seq2[cid.Cid, span] {
	return func(yield func(cid.Cid, span) bool) {
		for i := range s.keys {
			c, err := cid.Cast(append([]byte(stdPrefix), s.keys[i][:]...))
			if err != nil {
				continue // cannot happen: the prefix is a CID's
			}
			if !yield(c, s.at[i]) {
				return
			}
		}
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
