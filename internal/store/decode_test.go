package store_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atdata"
	"github.com/fxamacker/cbor/v2"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// sameAsAtdata checks DecodeRecord against atdata.UnmarshalCBOR on b: the
// same value, or both refusing.
func sameAsAtdata(t *testing.T, name string, b []byte) {
	t.Helper()
	want, werr := atdata.UnmarshalCBOR(b)
	got, gerr := store.DecodeRecord(b)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: atdata error %v, DecodeRecord error %v", name, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: DecodeRecord\n %#v\natdata\n %#v", name, got, want)
	}
}

func mustCBOR(t *testing.T, v any) []byte {
	t.Helper()
	b, err := cbor.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every generated record (text, notes, todos, tags, mentions, facets), and
// the shapes atdata turns into its own types or refuses, decode as atdata
// decodes them.
func TestDecodeRecordIsAtdata(t *testing.T) {
	t.Parallel()
	for _, r := range outlinegen.Generate(5000, 2) {
		b, err := atdata.MarshalCBOR(r.Value.Map())
		if err != nil {
			t.Fatal(err)
		}
		sameAsAtdata(t, r.Collection+"/"+r.RKey, b)
	}
	link, _ := atdata.MarshalCBOR(map[string]any{"$type": "app.bulleted.node", "ref": atdata.CIDLink{}})
	blob, _ := atdata.MarshalCBOR(map[string]any{"$type": "app.bulleted.node", "img": map[string]any{"$type": "blob", "mimeType": "image/png", "size": int64(3), "ref": map[string]any{"$link": "bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy"}}})
	cases := map[string][]byte{
		"link":         link,
		"blob":         blob,
		"bytes":        mustCBOR(t, map[string]any{"$type": "x.y", "b": []byte{1, 2}}),
		"float":        mustCBOR(t, map[string]any{"$type": "x.y", "f": 1.5}),
		"whole float":  mustCBOR(t, map[string]any{"$type": "x.y", "f": 2.0}),
		"$link map":    mustCBOR(t, map[string]any{"$type": "x.y", "l": map[string]any{"$link": "bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy"}}),
		"$bytes map":   mustCBOR(t, map[string]any{"$type": "x.y", "l": map[string]any{"$bytes": "AQI"}}),
		"legacy blob":  mustCBOR(t, map[string]any{"$type": "x.y", "l": map[string]any{"mimeType": "image/png", "cid": "bafkreibme22gw2h7y2h7tg2fhqotaqjucnbc24deqo72b6mkl2egezxhvy"}}),
		"empty $type":  mustCBOR(t, map[string]any{"$type": ""}),
		"number $type": mustCBOR(t, map[string]any{"$type": 3}),
		"nested":       mustCBOR(t, map[string]any{"$type": "x.y", "a": []any{map[string]any{"b": []any{int64(-4), true, nil, "s"}}}}),
		"big uint":     mustCBOR(t, map[string]any{"$type": "x.y", "n": uint64(1) << 63}),
		"not a map":    mustCBOR(t, []any{1, 2}),
		"empty":        {},
		"garbage":      {0xff, 0x00, 0x13},
		"indefinite":   {0xbf, 0x65, '$', 't', 'y', 'p', 'e', 0x63, 'x', '.', 'y', 0xff},
		"duplicate":    {0xa2, 0x61, 'a', 0x01, 0x61, 'a', 0x02},
	}
	deep := map[string]any{"v": "x"}
	for range 40 {
		deep = map[string]any{"d": deep}
	}
	cases["deep"] = mustCBOR(t, deep)
	for name, b := range cases {
		sameAsAtdata(t, name, b)
	}
}

// FuzzDecodeRecord: for any bytes, DecodeRecord agrees with atdata when
// atdata decodes them, and refuses what atdata refuses.
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range outlinegen.Generate(50, 3) {
		b, _ := atdata.MarshalCBOR(r.Value.Map())
		f.Add(b)
	}
	f.Add([]byte{0xa1, 0x61, 'a', 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := atdata.UnmarshalCBOR(b)
		got, gerr := store.DecodeRecord(b)
		if werr == nil && (gerr != nil || !reflect.DeepEqual(got, want)) {
			t.Fatalf("atdata %#v, DecodeRecord %#v %v", want, got, gerr)
		}
		if werr != nil && gerr == nil && !bytes.Equal(b, nil) {
			t.Fatalf("atdata refuses (%v), DecodeRecord decodes %#v", werr, got)
		}
	})
}
