package store

import (
	"encoding/json"
	"fmt"
	"math"
	"unsafe"

	"github.com/bluesky-social/indigo/atproto/atdata"
)

// Value is a record's value in its compact form: the record's DAG-CBOR
// bytes, as the repository holds them, in one immutable string (issue
// #26). A decoded record was a map of boxed values, most of a kept
// record's bytes; a Value is its encoding, about a third of that, and its
// fields are read from it where they lie:
//   - Text and Get read one top-level field without decoding the others
//     (a text field is a slice of the value's own bytes, not a copy);
//   - Map decodes the whole record into a fresh map the caller owns, as
//     DecodeRecord does (the same Go types).
//
// The zero Value is no value (a deleted record, or a change without one).
// Values made by the store (read from a repository, or ValueOf) always
// decode: a record that does not is refused where it is read.
type Value struct{ s string }

// ValueOf encodes m (a record as the engine builds it: maps, strings, ints,
// bools, lists, atdata's types) as the repository will hold it, and checks
// that it reads back (DecodeRecord).
func ValueOf(m map[string]any) (Value, error) {
	if m == nil {
		return Value{}, nil
	}
	raw, err := atdata.MarshalCBOR(m)
	if err != nil {
		return Value{}, err
	}
	// what encodes but does not read back (a float) is refused here, as
	// a read of the record would refuse it
	return SharedValue(raw)
}

// MustValue is ValueOf for values known to encode (tests, generated
// outlines); it panics otherwise.
func MustValue(m map[string]any) Value {
	v, err := ValueOf(m)
	if err != nil {
		panic(fmt.Sprintf("store.MustValue: %v", err))
	}
	return v
}

// DecodeValue checks that b is a record the store can read (DecodeRecord)
// and keeps a copy of it as a Value.
func DecodeValue(b []byte) (Value, error) {
	if err := checkRecord(b); err != nil {
		return Value{}, err
	}
	return Value{string(b)}, nil
}

// SharedValue is DecodeValue without the copy: the Value is b's own bytes,
// for a caller that keeps b anyway and never changes it (the PDS backend's
// record blocks: the record and its block are then one copy).
func SharedValue(b []byte) (Value, error) {
	if err := checkRecord(b); err != nil {
		return Value{}, err
	}
	if len(b) == 0 {
		return Value{}, nil
	}
	return Value{unsafe.String(&b[0], len(b))}, nil
}

// checkRecord is DecodeRecord's verdict on b: a plain record is checked
// in one pass that builds nothing (checkPlain); anything else is decoded.
func checkRecord(b []byte) error {
	if len(b) <= atdata.MAX_CBOR_RECORD_SIZE && checkPlain(b) {
		return nil
	}
	_, err := DecodeRecord(b)
	return err
}

// IsZero reports whether v is no value.
func (v Value) IsZero() bool { return v.s == "" }

// Len is the size of v's encoding in bytes.
func (v Value) Len() int { return len(v.s) }

// CBOR is v's encoding, the record block's bytes. The caller must not
// change them.
func (v Value) CBOR() []byte { return bytesOf(v.s) }

// Span is where sub, a text read from v (Text, Field: they read in place),
// begins in v's bytes; ok is false when sub is not a part of v's bytes.
// With At it lets a caller keep a text of v as two small numbers rather
// than a string header (the tree's items: 16 bytes each, 249,000 of them).
func (v Value) Span(sub string) (off int, ok bool) {
	if sub == "" {
		return 0, true
	}
	base, p := uintptr(unsafe.Pointer(unsafe.StringData(v.s))), uintptr(unsafe.Pointer(unsafe.StringData(sub)))
	if v.s == "" || p < base || p+uintptr(len(sub)) > base+uintptr(len(v.s)) {
		return 0, false
	}
	return int(p - base), true
}

// At is the text of v's bytes from off, n long (as Span found it).
func (v Value) At(off, n int) string { return v.s[off : off+n] }

// Equal reports whether v and w are the same record value (the same
// encoding: DAG-CBOR is canonical).
func (v Value) Equal(w Value) bool { return v.s == w.s }

// Map decodes v into a new map (nil for the zero Value). A value that does
// not decode, which the store never makes, is an empty map.
func (v Value) Map() map[string]any {
	if v.s == "" {
		return nil
	}
	m, err := DecodeRecord(bytesOf(v.s))
	if err != nil || m == nil {
		return map[string]any{}
	}
	return m
}

// Text is the top-level text field f, and whether v has one.
func (v Value) Text(f string) (string, bool) {
	raw, ok := v.Field(f)
	if !ok {
		return "", false
	}
	return raw.Text()
}

// Str is the top-level text field f ("" if v has none).
func (v Value) Str(f string) string { s, _ := v.Text(f); return s }

// Has reports whether v has the top-level field f.
func (v Value) Has(f string) bool { _, ok := v.field(f); return ok }

// Get is the top-level field f as Map would give it (nil if v has none).
// Strings, ints, bools and nulls are read in place; other values are
// decoded.
func (v Value) Get(f string) any {
	raw, ok := v.field(f)
	if !ok {
		return nil
	}
	d := &cdec{b: bytesOf(raw)}
	major, n, ok := d.head()
	if ok {
		switch major {
		case 0:
			if n <= math.MaxInt64 {
				return int64(n)
			}
		case 1:
			if n <= math.MaxInt64 {
				return -1 - int64(n)
			}
		case 3:
			s, _ := Raw{raw}.Text()
			return s
		case 4, 5:
			if x, ok := compactDecodeAny(bytesOf(raw)); ok {
				return x
			}
		case 7:
			switch n {
			case 20:
				return false
			case 21:
				return true
			case 22:
				return nil
			}
		}
	}
	return v.Map()[f]
}

// Keys is v's top-level field names, in the encoding's order.
func (v Value) Keys() []string {
	var out []string
	v.fields(func(k, _ string) bool { out = append(out, k); return true })
	return out
}

// Raw is one encoded value inside a Value (a field, a list's element),
// read in place: a walk over nested fields that allocates nothing (a
// record's facets, read for every bullet the search index takes in).
type Raw struct{ s string }

// Field is v's top-level field f, encoded.
func (v Value) Field(f string) (Raw, bool) {
	raw, ok := v.field(f)
	return Raw{raw}, ok
}

// Field is r's field f when r is a map.
func (r Raw) Field(f string) (Raw, bool) {
	raw, ok := Value(r).field(f)
	return Raw{raw}, ok
}

// Text is r's string when r is one.
func (r Raw) Text() (string, bool) {
	d := &cdec{b: bytesOf(r.s)}
	major, n, ok := d.head()
	if !ok || major != 3 || n > uint64(len(d.b)-d.off) {
		return "", false
	}
	return r.s[d.off : d.off+int(n)], true
}

// Elems calls fn with each element of r when r is a list, until fn
// returns false.
func (r Raw) Elems(fn func(Raw) bool) {
	d := &cdec{b: bytesOf(r.s)}
	major, n, ok := d.head()
	if !ok || major != 4 {
		return
	}
	for range n {
		start := d.off
		if !d.skip(0) || !fn(Raw{r.s[start:d.off]}) {
			return
		}
	}
}

// field is the encoding of v's top-level field f.
func (v Value) field(f string) (raw string, found bool) {
	v.fields(func(k, r string) bool {
		if k == f {
			raw, found = r, true
			return false
		}
		return true
	})
	return raw, found
}

// fields calls fn with each top-level key and its value's encoding, until
// fn returns false.
func (v Value) fields(fn func(k, raw string) bool) {
	if v.s == "" {
		return
	}
	d := &cdec{b: bytesOf(v.s)}
	major, n, ok := d.head()
	if !ok || major != 5 {
		return
	}
	for range n {
		mk, kl, ok := d.head()
		if !ok || mk != 3 || kl > uint64(len(d.b)-d.off) {
			return
		}
		k := v.s[d.off : d.off+int(kl)]
		d.off += int(kl)
		start := d.off
		if !d.skip(0) {
			return
		}
		if !fn(k, v.s[start:d.off]) {
			return
		}
	}
}

// skip passes over one data item.
func (d *cdec) skip(depth int) bool {
	if depth > atdata.MAX_CBOR_NESTED_LEVELS {
		return false
	}
	major, n, ok := d.head()
	if !ok {
		return false
	}
	switch major {
	case 2, 3:
		if n > uint64(len(d.b)-d.off) {
			return false
		}
		d.off += int(n)
	case 4, 5:
		if major == 5 {
			if n > math.MaxInt32 {
				return false
			}
			n *= 2
		}
		if n > uint64(len(d.b)-d.off) {
			return false // each item is a byte at least
		}
		for range n {
			if !d.skip(depth + 1) {
				return false
			}
		}
	case 6:
		return d.skip(depth + 1)
	}
	return true
}

// MarshalJSON writes v as the JSON of its map (as Record's value always
// was written).
func (v Value) MarshalJSON() ([]byte, error) {
	if v.s == "" {
		return []byte("null"), nil
	}
	return json.Marshal(v.Map())
}

// UnmarshalJSON reads what MarshalJSON wrote. Numbers must be integers
// (records hold no floats).
func (v *Value) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if m == nil {
		*v = Value{}
		return nil
	}
	x, err := ValueOf(fromJSON(m).(map[string]any))
	if err != nil {
		return err
	}
	*v = x
	return nil
}

// fromJSON makes JSON's float64 integers int64 (what a decode of the
// record gives).
func fromJSON(x any) any {
	switch t := x.(type) {
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return int64(t)
		}
	case []any:
		for i := range t {
			t[i] = fromJSON(t[i])
		}
	case map[string]any:
		for k := range t {
			t[k] = fromJSON(t[k])
		}
	}
	return x
}

// bytesOf is s's bytes, not copied: to be read only.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// PlannedValue is m, a value a plan is about to write, for a preview of the
// tree after the plan. A value that does not encode (which the plan's
// validation refuses before anything is written) is previewed as a record
// of m's $type holding only the reason, so that it shows as invalid rather
// than as a deletion.
func PlannedValue(m map[string]any) Value {
	v, err := ValueOf(m)
	if err != nil {
		t, _ := m["$type"].(string)
		return MustValue(map[string]any{"$type": t, "$unencodable": err.Error()})
	}
	return v
}
