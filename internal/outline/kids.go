package outline

import (
	"iter"
	"slices"
	"sort"
	"unsafe"
)

// Kids is a sibling list: an item's children (Item.Children), the top
// level (Tree.Roots) or the detached items (Tree.Detached), in sibling
// order. Like the slices it replaces it is never changed once made (old
// trees, shared by plans and snapshots, keep theirs), so any number of
// readers may use one at once; the zero Kids is the empty list.
//
// A list of at most kidsMax items is one array of pointers (16 bytes in
// the item, no directory: a short list costs what a slice did). A longer
// one is a directory of chunks of at most kidsMax items, each with the
// count of items up to its end. A list made from another (edit: k items
// inserted, removed or replaced) shares every chunk it does not touch and
// copies those it does and the directory: O(n/kidsMax + kidsMax·k)
// pointers for a list of n, not O(n) (issue 41); At and a search by
// halves are O(log n), a walk (All) O(n).
type Kids struct {
	// p is the first item (**Item) when c is 0, else the first chunk
	// (*kidsChunk); nil when the list is empty
	p unsafe.Pointer
	n int32 // items
	c int32 // chunks (0: one array of n items, n ≤ kidsMax)
}

// kidsChunk is one chunk of a long list: n items from p, and the count of
// items in it and the chunks before it.
type kidsChunk struct {
	p   **Item
	n   int32
	end int32
}

const (
	// kidsMax is the most items a chunk (or a list without a directory)
	// holds: an edit copies one chunk of 4 KB and the directory (16 bytes
	// a chunk: 2 KB at 50,000 siblings, 8 KB at 250,000)
	kidsMax = 512
	// kidsMin is the fewest a chunk an edit made holds (a smaller rest is
	// merged with a neighbour), so the directory stays short
	kidsMin = kidsMax / 4
)

// KidsOf is the list of xs, which must be in sibling order. It takes xs
// over: the caller must not change it after.
func KidsOf(xs []*Item) Kids {
	n := len(xs)
	switch {
	case n == 0:
		return Kids{}
	case n <= kidsMax:
		return Kids{p: unsafe.Pointer(&xs[0]), n: int32(n)}
	}
	// chunks of xs itself, as even as they come (no copy)
	m := (n + kidsMax - 1) / kidsMax
	cs := make([]kidsChunk, m)
	at := 0
	for i := range cs {
		end := n * (i + 1) / m
		cs[i] = kidsChunk{p: &xs[at], n: int32(end - at), end: int32(end)}
		at = end
	}
	return Kids{p: unsafe.Pointer(&cs[0]), n: int32(n), c: int32(m)}
}

// Len is the number of items.
func (k Kids) Len() int { return int(k.n) }

// flat is the items of a list without a directory.
func (k Kids) flat() []*Item {
	if k.n == 0 {
		return nil
	}
	return unsafe.Slice((**Item)(k.p), k.n)
}

// chunks is the directory of a long list (nil: none).
func (k Kids) chunks() []kidsChunk {
	if k.c == 0 {
		return nil
	}
	return unsafe.Slice((*kidsChunk)(k.p), k.c)
}

func (c *kidsChunk) items() []*Item { return unsafe.Slice(c.p, c.n) }

// start is the index of the chunk's first item.
func (c *kidsChunk) start() int { return int(c.end - c.n) }

// chunkOf is the index of the chunk holding item i of a long list.
func (k Kids) chunkOf(i int) int {
	cs := k.chunks()
	return sort.Search(len(cs), func(j int) bool { return int(cs[j].end) > i })
}

// At is the item at index i (0 ≤ i < Len()).
func (k Kids) At(i int) *Item {
	if k.c == 0 {
		return k.flat()[i]
	}
	if i < 0 || i >= int(k.n) {
		panic("outline: Kids index out of range")
	}
	c := &k.chunks()[k.chunkOf(i)]
	return c.items()[i-c.start()]
}

// All is the items with their indexes, in sibling order.
func (k Kids) All() iter.Seq2[int, *Item] {
	return func(yield func(int, *Item) bool) {
		if k.c == 0 {
			for i, it := range k.flat() {
				if !yield(i, it) {
					return
				}
			}
			return
		}
		i := 0
		for _, c := range k.chunks() {
			for _, it := range c.items() {
				if !yield(i, it) {
					return
				}
				i++
			}
		}
	}
}

// Items is the items in sibling order.
func (k Kids) Items() iter.Seq[*Item] {
	return func(yield func(*Item) bool) {
		if k.c == 0 {
			for _, it := range k.flat() {
				if !yield(it) {
					return
				}
			}
			return
		}
		for _, c := range k.chunks() {
			for _, it := range c.items() {
				if !yield(it) {
					return
				}
			}
		}
	}
}

// Backward is the items with their indexes, last first.
func (k Kids) Backward() iter.Seq2[int, *Item] {
	return func(yield func(int, *Item) bool) {
		if k.c == 0 {
			for i, it := range slices.Backward(k.flat()) {
				if !yield(i, it) {
					return
				}
			}
			return
		}
		cs := k.chunks()
		for c := len(cs) - 1; c >= 0; c-- {
			s := cs[c].start()
			for j, it := range slices.Backward(cs[c].items()) {
				if !yield(s+j, it) {
					return
				}
			}
		}
	}
}

// AppendTo appends the items to dst, in sibling order.
func (k Kids) AppendTo(dst []*Item) []*Item {
	if k.c == 0 {
		return append(dst, k.flat()...)
	}
	dst = slices.Grow(dst, int(k.n))
	for _, c := range k.chunks() {
		dst = append(dst, c.items()...)
	}
	return dst
}

// Slice is a new slice of the items i to j-1 (0 ≤ i ≤ j ≤ Len()), for
// callers that need one (pages of a view).
func (k Kids) Slice(i, j int) []*Item {
	if i < 0 || j < i || j > int(k.n) {
		panic("outline: Kids slice out of range")
	}
	if k.c == 0 {
		return slices.Clone(k.flat()[i:j])
	}
	out := make([]*Item, 0, j-i)
	for c := k.chunkOf(i); len(out) < j-i; c++ {
		ch := &k.chunks()[c]
		its, s := ch.items(), ch.start()
		out = append(out, its[max(i-s, 0):min(j-s, len(its))]...)
	}
	return out
}

// SearchFunc searches the list by halves as slices.BinarySearchFunc does:
// cmp(item) tells whether an item sorts before (<0), at (0) or after (>0)
// the target; the answer is the index of the first item not before it,
// and whether that item is at it.
func (k Kids) SearchFunc(cmp func(*Item) int) (int, bool) {
	if k.c == 0 {
		return slices.BinarySearchFunc(k.flat(), 0, func(it *Item, _ int) int { return cmp(it) })
	}
	cs := k.chunks()
	// the first chunk whose last item is not before the target
	c := sort.Search(len(cs), func(j int) bool { return cmp(cs[j].items()[cs[j].n-1]) >= 0 })
	if c == len(cs) {
		return int(k.n), false
	}
	i, found := slices.BinarySearchFunc(cs[c].items(), 0, func(it *Item, _ int) int { return cmp(it) })
	return cs[c].start() + i, found
}

// Search finds it by sibling order (compareItems): its index, or where it
// would be, and whether an item there compares equal.
func (k Kids) Search(it *Item) (int, bool) {
	return k.SearchFunc(func(x *Item) int { return compareItems(x, it) })
}

// edit is the list without the items at the indexes cut (ascending) and
// with add[j] before the item at index at[j] (Len() for after the last;
// at ascending, add in sibling order). The chunks no index falls in are
// shared with k; k is not changed.
func (k Kids) edit(cut, at []int, add []*Item) Kids {
	n := int(k.n) - len(cut) + len(add)
	if n <= 0 {
		return Kids{}
	}
	if n <= kidsMax && k.c == 0 {
		return KidsOf(spliceRange(make([]*Item, 0, n), k.flat(), 0, cut, at, add, true))
	}
	var b kidsBuilder
	b.dir = make([]kidsChunk, 0, int(k.c)+2+len(add)/kidsMin)
	cs := k.chunks()
	if k.c == 0 {
		cs = []kidsChunk{{n: k.n, end: k.n}}
		if k.n > 0 {
			cs[0].p = &k.flat()[0]
		}
	}
	for i := range cs {
		c := &cs[i]
		s, e, last := c.start(), int(c.end), i == len(cs)-1
		nc := 0
		for nc < len(cut) && cut[nc] < e {
			nc++
		}
		na := 0
		for na < len(at) && (at[na] < e || last) {
			na++
		}
		if nc == 0 && na == 0 {
			b.keep(c)
			continue
		}
		b.pend = spliceRange(b.pend, c.items(), s, cut[:nc], at[:na], add[:na], last)
		cut, at, add = cut[nc:], at[na:], add[na:]
		if len(b.pend) >= 2*kidsMax {
			b.flush()
		}
	}
	return b.finish()
}

// spliceRange appends to out the items base (those at index s on of the
// whole list) without those at the indexes cut and with add[j] before the
// item at at[j]; end: items at the list's end (at[j] past base) too.
func spliceRange(out, base []*Item, s int, cut, at []int, add []*Item, end bool) []*Item {
	pos := 0 // base[:pos] is placed
	ci := 0
	for j, it := range add {
		p := min(at[j]-s, len(base))
		for ci < len(cut) && cut[ci]-s < p {
			out = append(out, base[pos:cut[ci]-s]...)
			pos = cut[ci] - s + 1
			ci++
		}
		if p > pos {
			out = append(out, base[pos:p]...)
			pos = p
		}
		out = append(out, it)
	}
	for ; ci < len(cut); ci++ {
		out = append(out, base[pos:cut[ci]-s]...)
		pos = cut[ci] - s + 1
	}
	return append(out, base[pos:]...)
}

// kidsBuilder makes a long list's directory: chunks kept as they are,
// and the items of the chunks an edit touched (pend), made chunks of
// kidsMin to kidsMax items.
type kidsBuilder struct {
	dir  []kidsChunk
	pend []*Item
	n    int32
}

func (b *kidsBuilder) push(p **Item, n int) {
	b.n += int32(n)
	b.dir = append(b.dir, kidsChunk{p: p, n: int32(n), end: b.n})
}

// keep adds chunk c as it is, after what is pending (a rest too small
// for a chunk of its own is merged with it: a copy).
func (b *kidsBuilder) keep(c *kidsChunk) {
	if len(b.pend) > 0 && len(b.pend) < kidsMin {
		b.pend = append(b.pend, c.items()...)
		return
	}
	b.flush()
	b.push(c.p, int(c.n))
}

// flush makes the pending items chunks of at most kidsMax, as even as
// they come (in their array: it is not used again).
func (b *kidsBuilder) flush() {
	n := len(b.pend)
	if n == 0 {
		return
	}
	m := (n + kidsMax - 1) / kidsMax
	at := 0
	for i := range m {
		end := n * (i + 1) / m
		b.push(&b.pend[at], end-at)
		at = end
	}
	b.pend = nil
}

// finish is the list made: a rest too small for a chunk is merged with
// the chunk before it.
func (b *kidsBuilder) finish() Kids {
	if len(b.pend) > 0 && len(b.pend) < kidsMin && len(b.dir) > 0 {
		last := b.dir[len(b.dir)-1]
		b.dir = b.dir[:len(b.dir)-1]
		b.n -= last.n
		b.pend = append(slices.Clip(last.items()), b.pend...)
	}
	b.flush()
	if b.n <= kidsMax {
		// a list short enough for one array (an edit that removed most)
		var out []*Item
		for i := range b.dir {
			out = append(out, b.dir[i].items()...)
		}
		return KidsOf(out)
	}
	return Kids{p: unsafe.Pointer(&b.dir[0]), n: b.n, c: int32(len(b.dir))}
}

// bytes is what the list's arrays and directory take (Tree.Size).
func (k Kids) bytes() int64 {
	return int64(unsafe.Sizeof((*Item)(nil)))*int64(k.n) + int64(unsafe.Sizeof(kidsChunk{}))*int64(k.c)
}

// From is the items from index i on (0 ≤ i ≤ Len()), with their indexes.
func (k Kids) From(i int) iter.Seq2[int, *Item] {
	return func(yield func(int, *Item) bool) {
		for i < int(k.n) {
			run := k.run(i)
			for _, it := range run {
				if !yield(i, it) {
					return
				}
				i++
			}
		}
	}
}

// run is the items from index i (< Len()) to the end of the array (the
// chunk) holding it.
func (k Kids) run(i int) []*Item {
	if k.c == 0 {
		return k.flat()[i:]
	}
	c := &k.chunks()[k.chunkOf(i)]
	return c.items()[i-c.start():]
}

// runBack is the items from the start of the array (the chunk) holding
// item i (< Len()) to it, it included.
func (k Kids) runBack(i int) []*Item {
	if k.c == 0 {
		return k.flat()[:i+1]
	}
	c := &k.chunks()[k.chunkOf(i)]
	return c.items()[:i-c.start()+1]
}

// CommonEnds is how many items k and o have in common (the same items) at
// their start, and then at their end (pre+suf ≤ the shorter length): the
// chunks two versions of a list share are passed over whole, so two
// versions of a long list that differ in a few items cost the chunks
// those are in.
func (k Kids) CommonEnds(o Kids) (pre, suf int) {
	n := min(k.Len(), o.Len())
	for pre < n {
		a, b := k.run(pre), o.run(pre)
		m := min(len(a), len(b))
		if &a[0] == &b[0] {
			pre += m
			continue
		}
		j := 0
		for j < m && a[j] == b[j] {
			j++
		}
		pre += j
		if j < m {
			break
		}
	}
	for pre+suf < n {
		a, b := k.runBack(k.Len()-1-suf), o.runBack(o.Len()-1-suf)
		m := min(len(a), len(b), n-pre-suf)
		a, b = a[len(a)-m:], b[len(b)-m:]
		if &a[m-1] == &b[m-1] {
			suf += m
			continue
		}
		j := 0
		for j < m && a[m-1-j] == b[m-1-j] {
			j++
		}
		suf += j
		if j < m {
			break
		}
	}
	return pre, suf
}

// Delete is the list without the items i to j-1 (0 ≤ i ≤ j ≤ Len()),
// sharing with k the chunks they are not in; k is not changed.
func (k Kids) Delete(i, j int) Kids {
	if i < 0 || j < i || j > int(k.n) {
		panic("outline: Kids delete out of range")
	}
	if i == j {
		return k
	}
	cut := make([]int, j-i)
	for x := range cut {
		cut[x] = i + x
	}
	return k.edit(cut, nil, nil)
}
