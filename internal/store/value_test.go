package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/fxamacker/cbor/v2"
)

func sampleValues(t testing.TB) []map[string]any {
	t.Helper()
	return []map[string]any{
		{"$type": "app.bulleted.node", "text": "Buy milk", "sortKey": "a0", "createdAt": "2026-01-01T00:00:00.000Z"},
		{"$type": "app.bulleted.node", "text": "héllo #tag @bob", "sortKey": "Zz", "parent": "at://did:plc:abc/app.bulleted.node/3k",
			"layout": "todo", "completedAt": "2026-01-02T00:00:00.000Z", "count": int64(-7), "big": int64(1 << 40), "flag": true, "off": false, "none": nil,
			"facets": []any{map[string]any{"index": map[string]any{"byteStart": int64(7), "byteEnd": int64(11)},
				"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#tag", "tag": "tag"}}}},
			"future": map[string]any{"x": "y", "list": []any{"a", int64(1)}}},
		{"$type": "app.bulleted.note", "text": strings.Repeat("long text ", 300), "subject": "at://did:plc:abc/app.bulleted.node/3k"},
		{"$type": "app.bulleted.node", "img": atdata.Bytes([]byte{1, 2, 3}), "text": "with bytes"},
	}
}

// TestValueReadsFieldsAsMapDoes: every top-level field read in place (Get,
// Text, Has) is what a full decode (DecodeRecord) gives, Keys are the
// decoded keys, and Map is a fresh decode each time.
func TestValueReadsFieldsAsMapDoes(t *testing.T) {
	for _, m := range sampleValues(t) {
		v, err := ValueOf(m)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := atdata.MarshalCBOR(m)
		want, err := DecodeRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := v.Map(); !reflect.DeepEqual(got, want) {
			t.Fatalf("Map %v, want %v", got, want)
		}
		keys := v.Keys()
		if len(keys) != len(want) {
			t.Fatalf("Keys %v, want the %d of %v", keys, len(want), want)
		}
		for _, k := range keys {
			if !v.Has(k) {
				t.Fatalf("Has(%q) false", k)
			}
			if got := v.Get(k); !reflect.DeepEqual(got, want[k]) {
				t.Fatalf("Get(%q) = %#v, want %#v", k, got, want[k])
			}
			s, ok := v.Text(k)
			ws, wok := want[k].(string)
			if s != ws || ok != wok {
				t.Fatalf("Text(%q) = %q %v, want %q %v", k, s, ok, ws, wok)
			}
		}
		if v.Has("absent") || v.Get("absent") != nil || v.Str("absent") != "" {
			t.Fatal("an absent field reads as present")
		}
		a := v.Map()
		a["text"] = "changed"
		if v.Str("text") == "changed" {
			t.Fatal("a change to Map's result changed the value")
		}
		if v.CID() == "" || v.CID() != mustCID(t, m) {
			t.Fatalf("CID %q, want %q", v.CID(), mustCID(t, m))
		}
	}
}

func mustCID(t *testing.T, m map[string]any) string {
	c, err := RecordCID(m)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestValueTextIsInPlace: a text field is the value's own bytes, not a
// copy (the record and, say, the search index share one copy of a text).
func TestValueTextIsInPlace(t *testing.T) {
	v := MustValue(map[string]any{"$type": "app.bulleted.node", "text": "shared text"})
	s := v.Str("text")
	start, end := uintptr(unsafe.Pointer(unsafe.StringData(v.s))), uintptr(unsafe.Pointer(unsafe.StringData(v.s)))+uintptr(len(v.s))
	if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p < start || p >= end {
		t.Fatal("Text copied the field")
	}
}

// TestValueZeroAndJSON: the zero Value is no value; JSON writes the map
// (as Record's value always was) and reads back the same encoding.
func TestValueZeroAndJSON(t *testing.T) {
	var z Value
	if !z.IsZero() || z.Map() != nil || z.Has("text") || z.CID() != "" {
		t.Fatal("the zero Value is not empty")
	}
	for _, m := range sampleValues(t)[:3] {
		v := MustValue(m)
		b, err := json.Marshal(Record{Collection: "c", RKey: "k", Value: v})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"value":{`) {
			t.Fatalf("JSON %s", b)
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		if !r.Value.Equal(v) {
			t.Fatalf("JSON round trip changed the value: %v, want %v", r.Value.Map(), m)
		}
	}
}

// TestPlannedValueUnencodable: a planned value that does not encode shows
// as an invalid record of its type, not as no value (a deletion).
func TestPlannedValueUnencodable(t *testing.T) {
	v := PlannedValue(map[string]any{"$type": "app.bulleted.node", "text": 1.5})
	if v.IsZero() || v.Str("$type") != "app.bulleted.node" || v.Str("$unencodable") == "" {
		t.Fatalf("got %v", v.Map())
	}
}

// TestSharedValueIsTheBlock: SharedValue keeps the block's bytes, refuses
// what DecodeRecord refuses.
func TestSharedValueIsTheBlock(t *testing.T) {
	raw, _ := atdata.MarshalCBOR(sampleValues(t)[0])
	v, err := SharedValue(raw)
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.StringData(v.s) != &raw[0] {
		t.Fatal("SharedValue copied")
	}
	if _, err := SharedValue(raw[:len(raw)-1]); err == nil {
		t.Fatal("a cut record was taken")
	}
	if _, err := DecodeValue([]byte{0xa1, 0x61}); err == nil {
		t.Fatal("a broken record was taken")
	}
}

// FuzzValueGet: for any record DecodeRecord takes, each field read in
// place is the decoded one.
func FuzzValueGet(f *testing.F) {
	for _, m := range sampleValues(f) {
		raw, _ := atdata.MarshalCBOR(m)
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		want, err := DecodeRecord(raw)
		if err != nil {
			return
		}
		v, err := DecodeValue(raw)
		if err != nil {
			t.Fatal(err)
		}
		for k, x := range want {
			if got := v.Get(k); !reflect.DeepEqual(got, x) {
				t.Fatalf("Get(%q) = %#v, want %#v", k, got, x)
			}
		}
		if len(v.Keys()) != len(want) {
			t.Fatalf("Keys %v, want %d", v.Keys(), len(want))
		}
	})
}

// FuzzCheckPlain: the check that builds nothing (what opening a store
// runs on every record) takes exactly the records compactDecode takes.
func FuzzCheckPlain(f *testing.F) {
	for _, m := range append(sampleValues(f),
		map[string]any{"$type": "blob", "x": "y"},
		map[string]any{"$type": "", "x": "y"},
		map[string]any{"$type": int64(1)},
		map[string]any{"a": map[string]any{"$link": "bafy"}},
		map[string]any{"a": map[string]any{"$bytes": "AQID"}},
		map[string]any{"a": map[string]any{"mimeType": "image/png", "cid": "bafy"}},
		map[string]any{"a": map[string]any{"mimeType": "image/png", "cid": "bafy", "size": int64(3)}},
		map[string]any{"a": []any{map[string]any{"$type": "blob"}}},
	) {
		raw, err := atdata.MarshalCBOR(m)
		if err != nil {
			// atdata refuses some of these: encode them plainly
			raw, err = plainCBOREnc(m)
			if err != nil {
				f.Fatal(err)
			}
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, want := compactDecode(raw)
		if got := checkPlain(raw); got != want {
			t.Fatalf("checkPlain %v, compactDecode %v", got, want)
		}
	})
}

// plainCBOREnc encodes m as DAG-CBOR orders keys (length first), for
// shapes atdata will not encode.
func plainCBOREnc(m map[string]any) ([]byte, error) {
	em, err := cbor.CTAP2EncOptions().EncMode()
	if err != nil {
		return nil, err
	}
	return em.Marshal(m)
}
