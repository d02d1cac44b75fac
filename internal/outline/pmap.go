package outline

import (
	"iter"
	"maps"
)

// Map is a persistent map by record key: a new version shares everything
// unchanged with the one it came from, so a tree after a one-bullet commit
// costs what changed, not the size of the repository. A version is a base
// map, never written once shared, and a small map of this version's changes
// since the base (copied when a version is derived, so no version ever
// changes under a reader); when the changes grow past a share of the size,
// a new base is made (a clone, amortised over as many changes).
type Map[V any] struct {
	base map[string]V
	top  map[string]slot[V]
	n    int
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
	v, ok := m.base[k]
	return v, ok
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

// with returns a new version with changes applied (a slot with ok false
// deletes); m is unchanged.
func (m *Map[V]) with(changes map[string]slot[V]) Map[V] {
	if len(changes) == 0 {
		return *m
	}
	out := Map[V]{base: m.base, n: m.n}
	for k, s := range changes {
		_, had := m.Lookup(k)
		switch {
		case had && !s.ok:
			out.n--
		case !had && s.ok:
			out.n++
		}
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
		if _, inBase := m.base[k]; !inBase && !s.ok {
			delete(out.top, k) // created and deleted since base
			continue
		}
		out.top[k] = s
	}
	return out
}

// flattenAt is how many changes a version keeps beside its base: copying
// them per version costs a few microseconds; a new base (a clone of n
// entries) is then made once per that many changes.
func flattenAt(n int) int { return max(512, n/64) }
