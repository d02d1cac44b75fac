package store

import (
	"encoding/json"
	"io/fs"
	"math"
	"unicode/utf8"
	"unsafe"

	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// A compact decode of plain records (issue #26). Every record of an
// outline is kept decoded, and most of a decoded record's bytes were its
// many small allocations: each map key, each string value, each string's
// box in an interface. compactDecode makes the same values with fewer:
//   - map keys and the lexicons' own values ($type NSIDs, layouts,
//     display) are shared, from one table made from the embedded
//     lexicons, their boxes included;
//   - the record's other strings are slices of one allocation (the arena),
//     and their boxes are the elements of one slice.
//
// The values are what plainCBOR makes (maps, strings, int64, bools, nulls,
// lists): a reader cannot tell. A string shares its arena with the
// record's other strings, which live as long as any of them does. Anything
// it does not take (floats, byte strings, tags, indefinite lengths,
// duplicate keys, invalid UTF-8, bad nesting) is left to DecodeRecord's
// other paths, which decide.

// interned is the shared strings: lexicon property names and known values.
var interned = func() map[string]any {
	m := map[string]any{}
	add := func(s string) {
		if _, ok := m[s]; !ok && s != "" {
			m[s] = any(s)
		}
	}
	for _, s := range []string{"$type", "$link", "$bytes", "blob", "mimeType", "ref", "size", "cid", "uri"} {
		add(s)
	}
	for _, s := range lexicon.Layouts {
		add(s)
	}
	var walk func(id string, v any)
	walk = func(id string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if p, ok := x["properties"].(map[string]any); ok {
				for k := range p {
					add(k)
				}
			}
			if kv, ok := x["knownValues"].([]any); ok {
				for _, s := range kv {
					if s, ok := s.(string); ok {
						add(s)
					}
				}
			}
			if defs, ok := x["defs"].(map[string]any); ok {
				for name := range defs {
					if name == "main" {
						add(id)
					} else {
						add(id + "#" + name)
					}
				}
			}
			for _, e := range x {
				walk(id, e)
			}
		case []any:
			for _, e := range x {
				walk(id, e)
			}
		}
	}
	for _, f := range lexicon.Files() {
		raw, err := fs.ReadFile(lexicon.Schemas, f)
		if err != nil {
			panic(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(raw, &doc); err != nil {
			panic(err)
		}
		id, _ := doc["id"].(string)
		walk(id, doc)
	}
	return m
}()

// stringType is the type word of a string in an interface.
var stringType = func() unsafe.Pointer {
	var s any = ""
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&s))[0]
}()

// boxString is s in an interface, its header stored at *p (which must stay
// unchanged: it is the interface's value).
func boxString(p *string) any {
	var v any
	w := (*[2]unsafe.Pointer)(unsafe.Pointer(&v))
	w[0], w[1] = stringType, unsafe.Pointer(p)
	return v
}

// cdec is one record's decode: a first pass (build false) checks the
// encoding and counts what the second needs; the second builds.
type cdec struct {
	b      []byte
	off    int
	build  bool
	arenaN int      // bytes of strings not interned
	boxN   int      // their boxes
	arena  []byte   // the second pass's strings (one allocation)
	arenaS string   // arena as a string
	boxes  []string // the second pass's boxes
	plain  bool     // the first pass also checks what plainMap checks (checkPlain)
}

func (d *cdec) head() (major byte, arg uint64, ok bool) {
	if d.off >= len(d.b) {
		return 0, 0, false
	}
	c := d.b[d.off]
	d.off++
	major, info := c>>5, c&31
	switch {
	case info < 24:
		return major, uint64(info), true
	case info > 27:
		return 0, 0, false // indefinite lengths, reserved
	}
	n := 1 << (info - 24)
	if d.off+n > len(d.b) {
		return 0, 0, false
	}
	for _, x := range d.b[d.off : d.off+n] {
		arg = arg<<8 | uint64(x)
	}
	d.off += n
	return major, arg, true
}

// text reads a text string's bytes (not copied).
func (d *cdec) text(arg uint64) ([]byte, bool) {
	if arg > uint64(len(d.b)-d.off) {
		return nil, false
	}
	s := d.b[d.off : d.off+int(arg)]
	d.off += int(arg)
	return s, d.build || utf8.Valid(s) // the first pass checked it
}

// str is a text string's value: shared when interned, else in the arena.
func (d *cdec) str(s []byte) any {
	if v, ok := interned[string(s)]; ok {
		return v
	}
	if !d.build {
		d.arenaN += len(s)
		d.boxN++
		return nil
	}
	start := len(d.arena)
	d.arena = append(d.arena, s...)
	d.boxes = append(d.boxes, d.arenaS[start:len(d.arena)])
	return boxString(&d.boxes[len(d.boxes)-1])
}

// key is a map key: shared when interned, else in the arena.
func (d *cdec) key(s []byte) string {
	if v, ok := interned[string(s)]; ok {
		return v.(string)
	}
	if !d.build {
		d.arenaN += len(s)
		return ""
	}
	start := len(d.arena)
	d.arena = append(d.arena, s...)
	return d.arenaS[start:len(d.arena)]
}

func (d *cdec) value(depth int) (any, bool) {
	if depth > atdata.MAX_CBOR_NESTED_LEVELS {
		return nil, false
	}
	major, arg, ok := d.head()
	if !ok {
		return nil, false
	}
	switch major {
	case 0:
		if arg > math.MaxInt64 {
			return nil, false
		}
		return int64(arg), true
	case 1:
		if arg > math.MaxInt64 {
			return nil, false
		}
		return -1 - int64(arg), true
	case 3:
		s, ok := d.text(arg)
		if !ok || len(s) > atdata.MAX_RECORD_STRING_LEN {
			return nil, false
		}
		return d.str(s), true
	case 4:
		if arg > atdata.MAX_CBOR_CONTAINER_LEN {
			return nil, false
		}
		var l []any
		if d.build {
			l = make([]any, arg)
		}
		for i := range int(arg) {
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			if d.build {
				l[i] = v
			}
		}
		return l, true
	case 5:
		return d.object(arg, depth)
	case 7:
		switch arg {
		case 20:
			return false, true
		case 21:
			return true, true
		case 22:
			return nil, true
		}
	}
	return nil, false // byte strings, tags, floats, undefined
}

func (d *cdec) object(n uint64, depth int) (any, bool) {
	if n > atdata.MAX_CBOR_CONTAINER_LEN {
		return nil, false
	}
	var m map[string]any
	if d.build {
		m = make(map[string]any, n)
	}
	var prev []byte
	var legacy int // the keys of a legacy blob seen (plain)
	for range int(n) {
		major, arg, ok := d.head()
		if !ok || major != 3 {
			return nil, false
		}
		k, ok := d.text(arg)
		if !ok || len(k) > atdata.MAX_OBJECT_KEY_LEN {
			return nil, false
		}
		if d.plain {
			switch string(k) {
			case "$link", "$bytes":
				return nil, false
			case "$type": // a non-empty string, not "blob"
				at := d.off
				major, arg, ok := d.head()
				if !ok || major != 3 || arg == 0 || arg == 4 && d.off+4 <= len(d.b) && string(d.b[d.off:d.off+4]) == "blob" {
					return nil, false
				}
				d.off = at
			case "mimeType", "cid":
				legacy++
			}
		}
		// DAG-CBOR orders keys by length, then bytes: a key not after the
		// one before is a duplicate or out of order (left to the others)
		if !d.build && prev != nil && (len(k) < len(prev) || len(k) == len(prev) && string(k) <= string(prev)) {
			return nil, false
		}
		prev = k
		key := d.key(k)
		v, ok := d.value(depth + 1)
		if !ok {
			return nil, false
		}
		if d.build {
			m[key] = v
		}
	}
	if d.plain && n == 2 && legacy == 2 {
		return nil, false // a legacy blob
	}
	if !d.build {
		return nil, true
	}
	return m, true
}

// checkPlain reports, without building anything, whether b is a record
// compactDecode takes (so DecodeRecord reads it): its first pass, with
// plainMap's checks made on the way.
func checkPlain(b []byte) bool {
	if len(b) == 0 || b[0]>>5 != 5 {
		return false
	}
	d := &cdec{b: b, plain: true}
	_, ok := d.value(0)
	return ok && d.off == len(b)
}

// compactDecode decodes a plain record as described above, or reports
// that it is not one it takes.
func compactDecode(b []byte) (map[string]any, bool) {
	if len(b) > 0 && b[0]>>5 != 5 {
		return nil, false
	}
	v, ok := compactDecodeAny(b)
	if !ok {
		return nil, false
	}
	return v.(map[string]any), true
}

// compactDecodeAny decodes one plain value (a record, or one of its
// fields: Value.Get) as compactDecode does.
func compactDecodeAny(b []byte) (any, bool) {
	d := &cdec{b: b}
	if _, ok := d.value(0); !ok || d.off != len(b) {
		return nil, false
	}
	d.build, d.off = true, 0
	if d.arenaN > 0 {
		d.arena = make([]byte, 0, d.arenaN)
		d.arenaS = unsafe.String(unsafe.SliceData(d.arena), d.arenaN)
	}
	if d.boxN > 0 {
		d.boxes = make([]string, 0, d.boxN)
	}
	v, ok := d.value(0)
	if !ok || len(d.arena) != d.arenaN || len(d.boxes) != d.boxN {
		return nil, false // cannot happen: the first pass read the same
	}
	if !plainValue(v) {
		return nil, false
	}
	return v, true
}
