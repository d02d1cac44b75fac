package store_test

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/bluesky-social/indigo/atproto/atdata"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// The compact decode takes every generated record (so DecodeRecord's
// tests against atdata test it), gives atdata's values, and shares the
// lexicons' keys and known values instead of copying them.
func TestCompactDecodeTakesAndShares(t *testing.T) {
	typ, ok1 := store.Interned("$type")
	td, ok2 := store.Interned("todo")
	if !ok1 || !ok2 {
		t.Fatal("$type or todo not in the shared strings")
	}
	shared, todo := unsafe.StringData(typ), unsafe.StringData(td)
	sawTodo := false
	for _, r := range outlinegen.Generate(3000, 5) {
		b, err := atdata.MarshalCBOR(r.Value.Map())
		if err != nil {
			t.Fatal(err)
		}
		got, ok := store.CompactDecode(b)
		if !ok {
			t.Fatalf("%s/%s: not taken", r.Collection, r.RKey)
		}
		want, err := atdata.UnmarshalCBOR(b)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: compact %#v\natdata %#v (%v)", r.RKey, got, want, err)
		}
		for k, v := range got {
			if k == "$type" && unsafe.StringData(k) != shared {
				t.Fatalf("%s: key $type is a copy", r.RKey)
			}
			if s, ok := v.(string); ok && s == "todo" {
				sawTodo = true
				if unsafe.StringData(s) != todo {
					t.Fatalf("%s: layout todo is a copy", r.RKey)
				}
			}
		}
	}
	if !sawTodo {
		t.Fatal("no todo in the generated records")
	}
	// refused here, left to the other paths: out of order and duplicate
	// keys, a float, a tag, trailing bytes
	for name, b := range map[string][]byte{
		"out of order": {0xa2, 0x61, 'b', 0x01, 0x61, 'a', 0x02},
		"duplicate":    {0xa2, 0x61, 'a', 0x01, 0x61, 'a', 0x02},
		"float":        {0xa1, 0x61, 'a', 0xf9, 0x3c, 0x00},
		"tag":          {0xa1, 0x61, 'a', 0xc1, 0x01},
		"trailing":     {0xa1, 0x61, 'a', 0x01, 0x00},
		"bad utf-8":    {0xa1, 0x61, 'a', 0x61, 0xff},
	} {
		if v, ok := store.CompactDecode(b); ok {
			t.Errorf("%s: took it as %#v", name, v)
		}
	}
}

// BenchmarkDecodeRecord decodes generated records by the compact decode
// (compact) and by the reflection decoder it replaced (reflect), reporting
// the bytes allocated a record: opening a store decodes every record.
func BenchmarkDecodeRecord(b *testing.B) {
	var raws [][]byte
	for _, r := range outlinegen.Generate(2000, 7) {
		raw, err := atdata.MarshalCBOR(r.Value.Map())
		if err != nil {
			b.Fatal(err)
		}
		raws = append(raws, raw)
	}
	for _, c := range []struct {
		name string
		fn   func([]byte) bool
	}{
		{"compact", func(raw []byte) bool { _, ok := store.CompactDecode(raw); return ok }},
		{"reflect", func(raw []byte) bool { return store.PlainDecode(raw) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if !c.fn(raws[i%len(raws)]) {
					b.Fatal("not decoded")
				}
				i++
			}
		})
	}
}
