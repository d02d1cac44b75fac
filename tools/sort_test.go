package tools_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestSortChildren: sort_children orders a bullet's children by text
// (natural, case-insensitive), state, creation or backwards, writing only
// the sortKeys that must change (the children already in order keep
// theirs); a dry run writes nothing, sorting what is sorted changes
// nothing, and undo restores the order exactly. Read back from the store.
func TestSortChildren(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	r.ok("import_outline", map[string]any{"content": "- P\n  - item 10\n  - Item 2\n  - [ ] apple\n  - [x] banana\n  - item 1"})
	p := r.key("P")
	children := func() ([]string, map[string]string) {
		t.Helper()
		type kid struct{ text, key string }
		var ks []kid
		keys := map[string]string{}
		for _, rec := range r.records() {
			if rec.Collection == "app.bulleted.node" && rec.Value.Get("parent") == r.uri("P") {
				ks = append(ks, kid{rec.Value.Str("text"), rec.Value.Str("sortKey")})
				keys[rec.Value.Str("text")] = rec.Value.Str("sortKey")
			}
		}
		for i := range ks { // by sortKey, as bytes
			for j := i + 1; j < len(ks); j++ {
				if ks[j].key < ks[i].key {
					ks[i], ks[j] = ks[j], ks[i]
				}
			}
		}
		var texts []string
		for _, k := range ks {
			texts = append(texts, k.text)
		}
		return texts, keys
	}
	start, keys0 := children()
	if !reflect.DeepEqual(start, []string{"item 10", "Item 2", "apple", "banana", "item 1"}) {
		t.Fatalf("imported order %v", start)
	}
	before := r.records()
	dry := r.ok("sort_children", map[string]any{"node": p, "by": "text", "dry_run": true})
	if w, _ := dry["writes"].([]any); len(w) != 2 {
		t.Fatalf("a text sort of [item 10, Item 2, apple, banana, item 1] plans %d writes, want 2 (apple, banana, item 1 keep their keys)", len(w))
	}
	if !reflect.DeepEqual(before, r.records()) {
		t.Fatal("the dry run wrote")
	}
	sc := r.ok("sort_children", map[string]any{"node": p, "by": "text"})
	got, keys := children()
	if want := []string{"apple", "banana", "item 1", "Item 2", "item 10"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("by text: %v, want %v", got, want)
	}
	for _, kept := range []string{"apple", "banana", "item 1"} {
		if keys[kept] != keys0[kept] {
			t.Errorf("%q was in place and got a new key", kept)
		}
	}
	if sc := r.ok("sort_children", map[string]any{"node": p, "by": "text"}); sc["noChange"] != true {
		t.Errorf("sorting a sorted list: %v, want noChange", sc)
	}
	r.ok("undo", map[string]any{"operation": sc["operation"]})
	if got, _ := children(); !reflect.DeepEqual(got, start) {
		t.Fatalf("after undo: %v, want %v", got, start)
	}
	r.ok("sort_children", map[string]any{"node": p, "by": "state"})
	if got, _ := children(); got[0] != "apple" || got[1] != "banana" {
		t.Fatalf("by state: %v, want the open todo, then the done one, first", got)
	}
	r.ok("sort_children", map[string]any{"node": p, "by": "reverse"})
	r.ok("sort_children", map[string]any{"node": p, "by": "state", "descending": true})
	if got, _ := children(); got[len(got)-1] != "apple" {
		t.Fatalf("by state, descending: %v, want the open todo last", got)
	}
	// the top level, and bad input
	r.ok("import_outline", map[string]any{"content": "- b\n- a"})
	r.ok("sort_children", map[string]any{"by": "text"})
	type kid struct{ text, key string }
	var top []kid
	for _, rec := range r.records() {
		if rec.Collection == "app.bulleted.node" && rec.Value.Get("parent") == nil {
			top = append(top, kid{rec.Value.Str("text"), rec.Value.Str("sortKey")})
		}
	}
	slices.SortFunc(top, func(a, b kid) int { return strings.Compare(a.key, b.key) })
	if len(top) != 3 || top[0].text != "a" || top[1].text != "b" || top[2].text != "P" {
		t.Fatalf("top level by text: %v, want a, b, P", top)
	}
	r.refused("invalid", "sort_children", map[string]any{"node": p, "by": "colour"})
	// a mirror has no text of its own: where it goes is said
	r.ok("add_mirror", map[string]any{"original": r.key("a"), "parent": p})
	sc = r.ok("sort_children", map[string]any{"node": p, "by": "text", "dry_run": true})
	if d, _ := sc["diagnostics"].([]any); !slices.ContainsFunc(d, func(x any) bool { s, _ := x.(string); return strings.Contains(s, "1 mirror(s) have no text") }) {
		t.Fatalf("a text sort with a mirror among the children does not say where it goes: %v", sc["diagnostics"])
	}
}

// TestSortTextCollation: by=text is Unicode collation of the root locale,
// case ignored, numbers by value: accented letters next to their base
// letter ("éclair" before "Zebra", "Ångström" among the a's), "item 2"
// before "item 10", "Item 3" (any case) between them. Read back.
func TestSortTextCollation(t *testing.T) {
	t.Parallel()
	r := newRulesRepo(t)
	r.ok("import_outline", map[string]any{"content": "- P\n  - Zebra\n  - éclair\n  - item 10\n  - Item 3\n  - item 2\n  - Ångström\n  - banana\n  - Eclairs\n  - apple"})
	r.ok("sort_children", map[string]any{"node": r.key("P"), "by": "text"})
	type kid struct{ text, key string }
	var ks []kid
	for _, rec := range r.records() {
		if rec.Collection == "app.bulleted.node" && rec.Value.Get("parent") == r.uri("P") {
			ks = append(ks, kid{rec.Value.Str("text"), rec.Value.Str("sortKey")})
		}
	}
	slices.SortFunc(ks, func(a, b kid) int { return strings.Compare(a.key, b.key) })
	var got []string
	for _, k := range ks {
		got = append(got, k.text)
	}
	if want := []string{"Ångström", "apple", "banana", "éclair", "Eclairs", "item 2", "Item 3", "item 10", "Zebra"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("by text: %q, want %q", got, want)
	}
}
