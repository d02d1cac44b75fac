package facet

import (
	"reflect"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// TestStoredValuesIsValues: read in place from a record's encoding, the
// values of each kind are those Values reads from the decoded record, for
// facets of every kind, repeated values, features without their value, and
// shapes that are not facets at all.
func TestStoredValuesIsValues(t *testing.T) {
	feat := func(typ, k, v string) map[string]any { return map[string]any{"$type": typ, k: v} }
	facetOf := func(fs ...map[string]any) map[string]any {
		l := make([]any, len(fs))
		for i, f := range fs {
			l[i] = f
		}
		return map[string]any{"index": map[string]any{"byteStart": int64(0), "byteEnd": int64(3)}, "features": l}
	}
	recs := []map[string]any{
		{"text": "no facets"},
		{"text": "t", "facets": []any{facetOf(feat(TypeTag, "tag", "Plan"), feat(TypeMention, "did", "did:plc:a")),
			facetOf(feat(TypeTag, "tag", "Plan"), feat(TypeLink, "uri", "https://x.example"), feat(TypeTag, "tag", "b"))}},
		{"text": "t", "facets": []any{facetOf(map[string]any{"$type": TypeTag}), "not a facet", int64(3),
			map[string]any{"features": "not a list"}, facetOf(feat(TypeMention, "did", "did:plc:b"), feat("other", "tag", "x"))}},
		{"text": "t", "facets": "not a list"},
		{"text": "t", "facets": []any{facetOf(map[string]any{"$type": TypeTag, "tag": int64(1)})}},
	}
	for i, m := range recs {
		v := store.MustValue(m)
		for _, k := range []Kind{Tag, Mention, Link} {
			got, want := StoredValues(v, k), Values(v.Map(), k)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("record %d, %s: %q, want %q", i, k, got, want)
			}
		}
	}
}
