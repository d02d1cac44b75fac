package store

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// TestCmpPath: a record's path compares as the string "collection/rkey"
// does, for collections that extend one another with characters before
// and after '/'.
func TestCmpPath(t *testing.T) {
	colls := []string{"a", "a-b", "a.b", "a/b", "ab", "app.bulleted.node", "app.bulleted.node-x", "app.bulleted.nodes", "app.bulleted.note", ""}
	keys := []string{"", "x", "x-y", "3k", "zz"}
	var paths []string
	for _, c := range colls {
		for _, k := range keys {
			paths = append(paths, c+"/"+k)
		}
	}
	paths = append(paths, "a", "app.bulleted.node", "app.bulleted.node/", "b")
	for _, c := range colls {
		for _, k := range keys {
			r := Record{Collection: c, RKey: k}
			for _, p := range paths {
				if got, want := cmpPath(&r, p), strings.Compare(c+"/"+k, p); got != want {
					t.Fatalf("cmpPath(%q/%q, %q) = %d, want %d", c, k, p, got, want)
				}
			}
		}
	}
}

// TestRecordSetAsAMap: random sets and deletes over a base, with folds at
// random, read as a map by path would (get, the count, and current in
// path order).
func TestRecordSetAsAMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	path := func(i int) (string, string, string) {
		coll := []string{"app.bulleted.node", "app.bulleted.note", "app.bulleted.node-x"}[i%3]
		k := fmt.Sprintf("k%03d", i/3)
		return coll + "/" + k, coll, k
	}
	model := map[string]string{}
	var base []Record
	for i := range 300 {
		if i%2 == 0 {
			p, c, k := path(i)
			base = append(base, Record{Collection: c, RKey: k, CID: "base"})
			model[p] = "base"
		}
	}
	slices.SortFunc(base, func(a, b Record) int { return strings.Compare(a.Collection+"/"+a.RKey, b.Collection+"/"+b.RKey) })
	rs := recordSet{base: base, n: len(base)}
	for step := range 5000 {
		p, c, k := path(rng.IntN(400))
		if rng.IntN(3) == 0 {
			rs.set(p, nil)
			delete(model, p)
		} else {
			v := fmt.Sprint("v", step)
			rs.set(p, &Record{Collection: c, RKey: k, CID: v})
			model[p] = v
		}
		if rng.IntN(500) == 0 {
			rs.fold()
		}
		if step%97 == 0 {
			q, _, _ := path(rng.IntN(400))
			r, ok := rs.get(q)
			if want, has := model[q]; ok != has || ok && r.CID != want {
				t.Fatalf("step %d: get %s = %v %v, want %q %v", step, q, r, ok, want, has)
			}
			if rs.n != len(model) {
				t.Fatalf("step %d: %d records, want %d", step, rs.n, len(model))
			}
			got := map[string]string{}
			cur := rs.current()
			for i, r := range cur {
				if i > 0 && comparePaths(&cur[i-1], &r) >= 0 {
					t.Fatalf("step %d: current not in path order at %s/%s", step, r.Collection, r.RKey)
				}
				got[r.Collection+"/"+r.RKey] = r.CID
			}
			if !maps.Equal(got, model) {
				t.Fatalf("step %d: current has %d records, want %d", step, len(got), len(model))
			}
		}
	}
}

// TestSplitPath: a record's collection is the shared string when known,
// and its record key then lies outside the path (which is not kept);
// another collection's parts are the path's own.
func TestSplitPath(t *testing.T) {
	p := strings.Clone("app.bulleted.node/3kabc")
	c, k := splitPath(p)
	in := func(s string) bool {
		a := uintptr(unsafe.Pointer(unsafe.StringData(p)))
		b := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		return b >= a && b < a+uintptr(len(p))
	}
	if c != "app.bulleted.node" || k != "3kabc" || in(c) || in(k) {
		t.Fatalf("%q %q (in the path: %v %v)", c, k, in(c), in(k))
	}
	p = strings.Clone("com.example.thing/xyz")
	if c, k := splitPath(p); c != "com.example.thing" || k != "xyz" {
		t.Fatalf("%q %q", c, k)
	}
}
