package outline

import (
	"iter"
	"maps"
	"slices"
	"strings"
)

// Map is a persistent map by record key: a new version shares everything
// unchanged with the one it came from, so a tree after a one-bullet commit
// costs what changed, not the size of the repository. A version is a base
// map, never written once shared, and a small map of this version's changes
// since the base (copied when a version is derived, so no version ever
// changes under a reader); when the changes grow past a share of the size,
// a new base is made (a clone, amortised over as many changes).
//
// The base of a map of items (the tree's nodes and mirrors) is a list
// sorted by record key, searched by halves, where a hash map's slot took
// about 56 bytes an item (a key header, the value, the table's spare room):
// 8 bytes an item instead, 12 MB fewer at 249,000 bullets. A lookup then
// compares about 18 keys at 249,000 (a few hundred nanoseconds); nothing
// looks up every item by key on a common path.
type Map[V any] struct {
	base   map[string]V
	sorted []V            // the base instead, when keyOf is set: by keyOf, as bytes
	keyOf  func(V) string // nil: the base is the hash map
	top    map[string]slot[V]
	n      int
}

type slot[V any] struct {
	v  V
	ok bool // false: deleted since base
}

// Get returns the value at k (the zero value if there is none).
func (m *Map[V]) Get(k string) V {
	v, _ := m.Lookup(k)
	return v
}

// Lookup returns the value at k and whether there is one.
func (m *Map[V]) Lookup(k string) (V, bool) {
	if s, ok := m.top[k]; ok {
		return s.v, s.ok
	}
	return m.inBase(k)
}

// inBase looks k up in the base only.
func (m *Map[V]) inBase(k string) (V, bool) {
	if m.keyOf == nil {
		v, ok := m.base[k]
		return v, ok
	}
	if i, ok := m.find(k); ok {
		return m.sorted[i], true
	}
	var zero V
	return zero, false
}

// find is where k is, or would be, in the sorted base.
func (m *Map[V]) find(k string) (int, bool) {
	return slices.BinarySearchFunc(m.sorted, k, func(v V, k string) int { return strings.Compare(m.keyOf(v), k) })
}

// Len is the number of keys.
func (m *Map[V]) Len() int { return m.n }

// All yields every key and value, in no particular order.
func (m *Map[V]) All() iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for k, s := range m.top {
			if s.ok && !yield(k, s.v) {
				return
			}
		}
		if m.keyOf != nil {
			for _, v := range m.sorted {
				k := m.keyOf(v)
				if _, shadowed := m.top[k]; shadowed {
					continue
				}
				if !yield(k, v) {
					return
				}
			}
			return
		}
		for k, v := range m.base {
			if _, shadowed := m.top[k]; shadowed {
				continue
			}
			if !yield(k, v) {
				return
			}
		}
	}
}

// mapOf makes a version holding m (which it takes over).
func mapOf[V any](m map[string]V) Map[V] {
	return Map[V]{base: m, n: len(m)}
}

// sortedMapOf makes a version whose base is list (which it takes over),
// ordered by keyOf here; list must not hold a key twice.
func sortedMapOf[V any](list []V, keyOf func(V) string) Map[V] {
	cmp := func(a, b V) int { return strings.Compare(keyOf(a), keyOf(b)) }
	if !slices.IsSortedFunc(list, cmp) {
		slices.SortFunc(list, cmp)
	}
	return Map[V]{sorted: list, keyOf: keyOf, n: len(list)}
}

// with returns a new version with changes applied (a slot with ok false
// deletes); m is unchanged.
func (m *Map[V]) with(changes map[string]slot[V]) Map[V] {
	if len(changes) == 0 {
		return *m
	}
	out := Map[V]{base: m.base, sorted: m.sorted, keyOf: m.keyOf, n: m.n}
	for k, s := range changes {
		_, had := m.Lookup(k)
		switch {
		case had && !s.ok:
			out.n--
		case !had && s.ok:
			out.n++
		}
	}
	if len(m.top)+len(changes) > flattenAt(out.n) && m.keyOf != nil {
		out.sorted = m.flattenSorted(changes, out.n)
		return out
	}
	if len(m.top)+len(changes) > flattenAt(out.n) {
		base := make(map[string]V, out.n)
		for k, v := range m.All() {
			if _, changed := changes[k]; !changed {
				base[k] = v
			}
		}
		for k, s := range changes {
			if s.ok {
				base[k] = s.v
			}
		}
		out.base = base
		return out
	}
	out.top = make(map[string]slot[V], len(m.top)+len(changes))
	maps.Copy(out.top, m.top)
	for k, s := range changes {
		if _, inBase := m.inBase(k); !inBase && !s.ok {
			delete(out.top, k) // created and deleted since base
			continue
		}
		out.top[k] = s
	}
	return out
}

// flattenSorted is a new sorted base of m with changes applied (n
// entries): a merge of the base with this version's changes and the new
// ones, each sorted.
func (m *Map[V]) flattenSorted(changes map[string]slot[V], n int) []V {
	over := make(map[string]slot[V], len(m.top)+len(changes))
	maps.Copy(over, m.top)
	maps.Copy(over, changes)
	keys := slices.Sorted(maps.Keys(over))
	out := make([]V, 0, n)
	i := 0
	for _, v := range m.sorted {
		k := m.keyOf(v)
		for ; i < len(keys) && keys[i] < k; i++ {
			if s := over[keys[i]]; s.ok {
				out = append(out, s.v)
			}
		}
		if _, changed := over[k]; !changed {
			out = append(out, v)
		}
	}
	for ; i < len(keys); i++ {
		if s := over[keys[i]]; s.ok {
			out = append(out, s.v)
		}
	}
	return out
}

// flattenAt is how many changes a version keeps beside its base: copying
// them per version costs a few microseconds; a new base (a clone of n
// entries) is then made once per that many changes.
func flattenAt(n int) int { return max(512, n/64) }
