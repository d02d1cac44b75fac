package outline

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// kidItems are n items in sibling order (sortKeys in their record keys'
// order: compareItems is that order).
func kidItems(n int, prefix string) []*Item {
	out := make([]*Item, n)
	for i := range out {
		out[i] = &Item{sk: vspan{n: noSpan}}
		out[i].Rec.RKey = fmt.Sprintf("%s%08d", prefix, i)
	}
	return out
}

// checkKids compares every way of reading k with want, and k's shape:
// no directory for a short list, chunks of kidsMin to kidsMax items
// (one of fewer only when it is the whole list), ends that add up.
func checkKids(t *testing.T, k Kids, want []*Item) {
	t.Helper()
	if k.Len() != len(want) {
		t.Fatalf("Len %d, want %d", k.Len(), len(want))
	}
	if (k.c == 0) != (len(want) <= kidsMax) {
		t.Fatalf("%d items in %d chunks", len(want), k.c)
	}
	end := int32(0)
	for i, c := range k.chunks() {
		if c.n < kidsMin || c.n > kidsMax {
			t.Fatalf("chunk %d of %d has %d items", i, k.c, c.n)
		}
		end += c.n
		if c.end != end {
			t.Fatalf("chunk %d ends at %d, counted %d", i, c.end, end)
		}
	}
	for i, w := range want {
		if k.At(i) != w {
			t.Fatalf("At(%d) is %s, want %s", i, k.At(i).Key(), w.Key())
		}
	}
	var got []*Item
	for i, it := range k.All() {
		if i != len(got) {
			t.Fatalf("All: index %d at %d", i, len(got))
		}
		got = append(got, it)
	}
	if !slices.Equal(got, want) {
		t.Fatal("All differs")
	}
	if got := slices.Collect(k.Items()); !slices.Equal(got, want) && len(want) > 0 {
		t.Fatal("Items differs")
	}
	got = got[:0]
	for i, it := range k.Backward() {
		if it != want[i] {
			t.Fatalf("Backward: %d is %s", i, it.Key())
		}
		got = append(got, it)
	}
	if len(got) != len(want) {
		t.Fatalf("Backward: %d items", len(got))
	}
	if got := k.AppendTo(nil); !slices.Equal(got, want) {
		t.Fatal("AppendTo differs")
	}
	for _, r := range [][2]int{{0, len(want)}, {len(want) / 3, len(want) / 2}, {len(want), len(want)}} {
		if got := k.Slice(r[0], r[1]); !slices.Equal(got, want[r[0]:r[1]]) {
			t.Fatalf("Slice(%d, %d) differs", r[0], r[1])
		}
	}
	for _, from := range []int{0, len(want) / 2, len(want)} {
		i := from
		for j, it := range k.From(from) {
			if j != i || it != want[i] {
				t.Fatalf("From(%d): %d at %d", from, j, i)
			}
			i++
		}
		if i != len(want) {
			t.Fatalf("From(%d) stopped at %d", from, i)
		}
	}
	for i, w := range want {
		if len(want) > 600 && i%17 != 0 && i%kidsMax > 2 && i%kidsMax < kidsMax-2 {
			continue // a sample of a long list, with the chunks' edges
		}
		if j, ok := k.Search(w); !ok || j != i {
			t.Fatalf("Search(%s) = %d, %v; want %d", w.Key(), j, ok, i)
		}
	}
	if len(want) > 0 {
		past := &Item{sk: vspan{n: noSpan}}
		past.Rec.RKey = want[len(want)-1].Rec.RKey + "~"
		if j, ok := k.Search(past); ok || j != len(want) {
			t.Fatalf("Search past the end = %d, %v", j, ok)
		}
	}
}

// TestKidsEdges: lists at and around a chunk's size, made at once and by
// edits at a chunk's edges (its first, its last, one past), growing into
// a directory and shrinking out of it, chunks split and merged, the last
// item of a chunk removed, the empty list.
func TestKidsEdges(t *testing.T) {
	t.Parallel()
	checkKids(t, Kids{}, nil)
	checkKids(t, KidsOf(nil), nil)
	for _, n := range []int{1, kidsMin - 1, kidsMin, kidsMax - 1, kidsMax, kidsMax + 1, 2*kidsMax - 1, 2 * kidsMax, 2*kidsMax + 1, 5*kidsMax + 7} {
		base := kidItems(n, "a")
		k := KidsOf(slices.Clone(base))
		checkKids(t, k, base)
		if k.Delete(0, n).Len() != 0 {
			t.Fatalf("n=%d: everything deleted leaves items", n)
		}
		// one inserted at each edge of each chunk, and one removed there
		var at []int
		for _, c := range k.chunks() {
			at = append(at, c.start(), c.start()+1, int(c.end)-1, int(c.end))
		}
		at = append(at, 0, 1, n-1, n, kidsMax-1, kidsMax, kidsMax+1, kidsMin-1, kidsMin)
		for _, i := range at {
			if i < 0 || i > n {
				continue
			}
			// an item that sorts at i: between base[i-1] and base[i]
			it := &Item{sk: vspan{n: noSpan}}
			it.Rec.RKey = "a"
			if i > 0 {
				it.Rec.RKey = base[i-1].Rec.RKey + "5"
			}
			want := slices.Insert(slices.Clone(base), i, it)
			got := k.edit(nil, []int{i}, []*Item{it})
			checkKids(t, got, want)
			if i < n {
				want := slices.Delete(slices.Clone(base), i, i+1)
				checkKids(t, k.Delete(i, i+1), want)
				// replaced: out and in at once
				want = slices.Clone(base)
				want[i] = it
				checkKids(t, k.edit([]int{i}, []int{i}, []*Item{it}), want)
			}
		}
		checkKids(t, k, base) // unchanged by all of it
	}
}

// TestKidsShrinksAndGrows: a long list emptied an item at a time from
// its middle, then filled again, checked at every step (chunks merged
// on the way down, split on the way up, the directory dropped and made).
func TestKidsShrinksAndGrows(t *testing.T) {
	t.Parallel()
	items := kidItems(3*kidsMax+5, "a")
	k := KidsOf(slices.Clone(items))
	want := slices.Clone(items)
	for len(want) > 0 {
		i := len(want) / 2
		k = k.Delete(i, i+1)
		want = slices.Delete(want, i, i+1)
		checkKids(t, k, want)
	}
	for _, it := range items {
		i, _ := k.Search(it)
		k = k.edit(nil, []int{i}, []*Item{it})
		want = slices.Insert(want, i, it)
		checkKids(t, k, want)
	}
}

// TestKidsLikeSlice: random edits (items removed and inserted at once,
// runs deleted) against a plain slice; every list made is checked, and
// every list made before stays as it was.
func TestKidsLikeSlice(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(41, 7))
	pool := kidItems(20_000, "a")
	type version struct {
		k    Kids
		want []*Item
	}
	for round := range 6 {
		n := []int{0, 3, kidsMax, kidsMax + 1, 3000, 6000}[round]
		pos := r.Perm(len(pool))[:n]
		slices.Sort(pos)
		cur := make([]*Item, n)
		in := make(map[*Item]bool, n)
		for i, p := range pos {
			cur[i] = pool[p]
			in[pool[p]] = true
		}
		k := KidsOf(slices.Clone(cur))
		versions := []version{{k, slices.Clone(cur)}}
		for step := range 200 {
			var cut []int
			if len(cur) > 0 {
				for range r.IntN(4) {
					cut = append(cut, r.IntN(len(cur)))
				}
				if r.IntN(20) == 0 { // a run
					i := r.IntN(len(cur))
					for j := i; j < min(len(cur), i+r.IntN(2*kidsMax)); j++ {
						cut = append(cut, j)
					}
				}
			}
			slices.Sort(cut)
			cut = slices.Compact(cut)
			var add []*Item
			for range r.IntN(4) + r.IntN(2)*r.IntN(kidsMax) {
				if it := pool[r.IntN(len(pool))]; !in[it] && !slices.Contains(add, it) {
					add = append(add, it)
				}
			}
			slices.SortFunc(add, compareItems)
			at := make([]int, len(add))
			for j, it := range add {
				at[j], _ = k.Search(it)
			}
			next := k.edit(cut, at, add)
			var want []*Item
			for i, it := range cur {
				if !slices.Contains(cut, i) {
					want = append(want, it)
				} else {
					delete(in, it)
				}
			}
			for _, it := range add {
				i, _ := slices.BinarySearchFunc(want, it, compareItems)
				want = slices.Insert(want, i, it)
				in[it] = true
			}
			checkKids(t, next, want)
			k, cur = next, want
			versions = append(versions, version{k, slices.Clone(want)})
			if step%50 == 0 {
				for _, v := range versions {
					if got := v.k.AppendTo(nil); !slices.Equal(got, v.want) {
						t.Fatalf("round %d step %d: an earlier list changed", round, step)
					}
				}
			}
		}
	}
}

// TestKidsEditCopiesLittle: an item inserted in the middle of a list of
// 250,000 copies one chunk (or two, split or merged) and the directory,
// and the list it was made from keeps every item.
func TestKidsEditCopiesLittle(t *testing.T) {
	t.Parallel()
	items := kidItems(250_001, "a")
	odd := make([]*Item, 0, 125_000)
	for i := 0; i+1 < len(items); i += 2 {
		odd = append(odd, items[i])
	}
	k := KidsOf(slices.Clone(odd))
	for _, i := range []int{0, 1, len(odd) / 2, len(odd) - 1, len(odd)} {
		it := items[min(2*i+1, len(items)-1)]
		j, _ := k.Search(it)
		n := k.edit(nil, []int{j}, []*Item{it})
		if c := Copied(k, n); c > 2*kidsMax {
			t.Fatalf("insert at %d copied %d items", j, c)
		}
		if c := Copied(k, k.Delete(j, min(j+1, k.Len()))); c > 2*kidsMax {
			t.Fatalf("delete at %d copied %d items", j, c)
		}
	}
	if got := k.AppendTo(nil); !slices.Equal(got, odd) {
		t.Fatal("the list changed")
	}
}
