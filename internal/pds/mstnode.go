package pds

import (
	"errors"
	"unsafe"
)

// errNodeShape: a kept MST node's bytes are not the DAG-CBOR of a node as
// parseNode read them (a kept node always is: it decoded when it came).
var errNodeShape = errors.New("an MST node's bytes are not a node's")

// nodeValues calls fn with the CID key (the CID's bytes) of each entry's
// value of the MST node whose block is data, in entry order: the CIDs a
// node's values (keptNode.vals) are of. The keys are data's own bytes,
// not a copy (data is never modified once kept), and nothing is
// allocated: parsed (parseNode), a node took 2.5 times its bytes in
// entries, keys and CIDs, all garbage for a walk that wants the CIDs only
// (the cache file's records, a record looked for by CID).
func nodeValues(data []byte, fn func(i int, vk string)) error {
	p := cborScan{b: data}
	maj, n := p.head()
	if maj != cborMap {
		return errNodeShape
	}
	for range n {
		if k := p.text(); k != "e" {
			p.skip()
			continue
		}
		maj, entries := p.head()
		if maj != cborArray {
			return errNodeShape
		}
		for i := range int(entries) {
			maj, fields := p.head()
			if maj != cborMap {
				return errNodeShape
			}
			found := false
			for range fields {
				if p.text() != "v" {
					p.skip()
					continue
				}
				vk, ok := p.link()
				if !ok {
					return errNodeShape
				}
				fn(i, vk)
				found = true
			}
			if !found {
				return errNodeShape
			}
		}
	}
	if p.bad || p.i != len(p.b) {
		return errNodeShape
	}
	return nil
}

// CBOR's major types as nodeValues meets them.
const (
	cborBytes = 2
	cborText  = 3
	cborArray = 4
	cborMap   = 5
	cborTag   = 6
)

// cborScan reads DAG-CBOR items from b without allocating; a malformed or
// cut item sets bad (and every later read returns nothing).
type cborScan struct {
	b   []byte
	i   int
	bad bool
}

// head reads an item's head: its major type and argument.
func (p *cborScan) head() (maj byte, arg uint64) {
	if p.bad || p.i >= len(p.b) {
		p.bad = true
		return 0xff, 0
	}
	c := p.b[p.i]
	p.i++
	maj, info := c>>5, c&0x1f
	size := 0
	switch {
	case info < 24:
		arg = uint64(info)
	case info == 24:
		size = 1
	case info == 25:
		size = 2
	case info == 26:
		size = 4
	case info == 27:
		size = 8
	default: // indefinite lengths and reserved values: not DAG-CBOR
		p.bad = true
		return 0xff, 0
	}
	if len(p.b)-p.i < size {
		p.bad = true
		return 0xff, 0
	}
	for _, c := range p.b[p.i : p.i+size] {
		arg = arg<<8 | uint64(c)
	}
	p.i += size
	// an array or map of more items than bytes left is cut (and would
	// have its reader loop on nothing)
	if (maj == cborArray || maj == cborMap) && arg > uint64(len(p.b)-p.i) {
		p.bad = true
		return 0xff, 0
	}
	return maj, arg
}

// span is the next n bytes of b.
func (p *cborScan) span(n uint64) []byte {
	if p.bad || uint64(len(p.b)-p.i) < n {
		p.bad = true
		return nil
	}
	s := p.b[p.i : p.i+int(n)]
	p.i += int(n)
	return s
}

// text reads a text string ("" and bad if the item is not one).
func (p *cborScan) text() string {
	maj, n := p.head()
	if maj != cborText {
		p.bad = true
		return ""
	}
	s := p.span(n)
	if len(s) == 0 {
		return ""
	}
	return unsafe.String(&s[0], len(s))
}

// link reads a CID link (tag 42 over bytes led by a zero byte) as its
// CID's bytes; ok false if the item is not one (null included).
func (p *cborScan) link() (vk string, ok bool) {
	maj, tag := p.head()
	if maj != cborTag || tag != 42 {
		p.bad = true
		return "", false
	}
	maj, n := p.head()
	if maj != cborBytes {
		p.bad = true
		return "", false
	}
	s := p.span(n)
	if len(s) < 2 || s[0] != 0 {
		p.bad = true
		return "", false
	}
	return unsafe.String(&s[1], len(s)-1), true
}

// skip reads one whole item.
func (p *cborScan) skip() {
	maj, n := p.head()
	switch maj {
	case cborBytes, cborText:
		p.span(n)
	case cborArray:
		for range n {
			if p.bad {
				return
			}
			p.skip()
		}
	case cborMap:
		for range 2 * n {
			if p.bad {
				return
			}
			p.skip()
		}
	case cborTag:
		p.skip()
	}
}
