package store

// BeforeCompactRename stops a compaction before its rename (tests).
func BeforeCompactRename(fn func() error) { beforeCompactRename = fn }

// Every store the tests open maps its log (mapLog), however small, so that
// a value that still pointed into the mapping once it is released would
// fault in the tests; the read path is the one a refresh takes.
func init() { mapMin = 1 }

// CompactDecode and Interned expose the compact decode to its tests.
var CompactDecode = compactDecode

func Interned(s string) (string, bool) {
	v, ok := interned[s]
	if !ok {
		return "", false
	}
	return v.(string), true
}

// PlainDecode is the reflection decoder's fast path alone (benchmarks).
func PlainDecode(b []byte) bool {
	var v map[string]any
	return plainCBOR.Unmarshal(b, &v) == nil && v != nil && plainMap(v)
}
