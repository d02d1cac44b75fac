package search

import "github.com/bluesky-social/indigo/atproto/syntax"

// entryMap is the entries by record key. A key that is a TID (as nearly
// every bullet's is) is kept as its 64-bit integer: a slot of 16 bytes
// instead of 24 (about 3 MB at 249,000 bullets); any other key by its
// string.
type entryMap struct {
	tids  map[uint64]*entry
	other map[string]*entry
}

func newEntryMap(n int) entryMap {
	return entryMap{tids: make(map[uint64]*entry, n), other: map[string]*entry{}}
}

// tidOf is key's TID integer; ok is false when key is not a TID whose
// integer gives it back (13 characters of the sortable alphabet, the
// first one of 2–7, a or b: the integer's top bit clear, as
// syntax.NewTIDFromInteger wants; not the all-zero TID).
func tidOf(key string) (uint64, bool) {
	if len(key) != 13 || key[0] > 'b' {
		return 0, false
	}
	v := syntax.TID(key).Integer()
	return v, v != 0
}

func (m *entryMap) get(key string) *entry {
	if v, ok := tidOf(key); ok {
		return m.tids[v]
	}
	return m.other[key]
}

func (m *entryMap) set(key string, e *entry) {
	if v, ok := tidOf(key); ok {
		m.tids[v] = e
		return
	}
	m.other[key] = e
}

func (m *entryMap) len() int { return len(m.tids) + len(m.other) }

// sweep deletes the entries of keys keep says no to.
func (m *entryMap) sweep(keep func(key string) bool) {
	for v := range m.tids {
		if !keep(syntax.NewTIDFromInteger(v).String()) {
			delete(m.tids, v)
		}
	}
	for k := range m.other {
		if !keep(k) {
			delete(m.other, k)
		}
	}
}
