package order

import (
	"errors"
	"sort"
	"strings"
)

// Alphabet is the set of bytes generated keys use, in byte order.
const Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// MaxKey is Bulleted's limit on a sortKey in bytes.
const MaxKey = 512

// Threshold is the key length above which Place looks for a small window of
// its own siblings to respace (at most Window of them, none foreign) so that
// keys stay short; when there is none it accepts a longer key.
const Threshold = 24

// MaxGen is the longest key Place generates where a window of at most
// Window siblings (foreign ones last) can be respaced to avoid a longer one;
// where none can, it takes a longer key rather than rewriting more.
const MaxGen = 32

// Window is the most siblings a bounded respacing rewrites.
const Window = 32

// jump is how far a biased choice moves from zero on a fresh level near the
// top of a key; deepJump from DeepPrefix bytes down, where a shorter jump
// keeps each nested level to 3 bytes (a nested campaign rarely runs long).
const (
	jump       = 62 * 62 * 62 / 2
	deepJump   = 62 * 62 / 2
	deepPrefix = 8
)

// jumpAt is the zig-zag jump on a fresh level under a prefix of pre bytes.
func jumpAt(pre int) int64 {
	if pre >= deepPrefix {
		return deepJump
	}
	return jump
}

// ErrNoRoom is returned by Between when no key of the alphabet fits strictly
// between the bounds (equal bounds, or bounds that differ only in bytes
// outside the alphabet); Place resolves it by renormalising.
var ErrNoRoom = errors.New("no key fits between the neighbours")

// Bias says where in a gap to place a key.
type Bias int

const (
	// Mid places the key in the middle of the gap.
	Mid Bias = iota
	// NearLo places the key just above the lower neighbour (zig-zag: the
	// upper neighbour is the newest and the next edit goes above the key).
	NearLo
	// NearHi places the key just below the upper neighbour (zig-zag: the
	// lower neighbour is the newest and the next edit goes below the key).
	NearHi
	// Next continues a run downwards from the lower neighbour (typing down:
	// the next edit goes right after the key), counting up in steps that
	// leave room for later inserts between the run's bullets.
	Next
	// Prev continues a run upwards from the upper neighbour (inserting again
	// and again after the same bullet), counting down likewise.
	Prev
)

// runStep is how far Next and Prev count on an open side: a gap of 61 keys
// of the same length is left between a run's bullets for later inserts.
const runStep = 62

// BiasFor returns the bias for inserting before sibs[at], given the indices
// of the newest and second-newest siblings (-1 when there are none; record
// keys are TIDs, so the snapshot says which they are). When the newest
// sibling borders the gap and the second newest is next to it, an edit run is
// under way: typing down a list (Next), inserting again after the same bullet
// (Prev), zig-zagging between the two newest (NearLo, NearHi: the key goes
// next to the older neighbour, so the gap the next edit will use stays wide).
// Otherwise Mid.
func BiasFor(at, newest, second int) Bias {
	switch {
	case newest >= 0 && newest == at-1 && second == at-2:
		return Next
	case newest >= 0 && newest == at-1 && second == at:
		return NearHi
	case newest >= 0 && newest == at && second == at+1:
		return Prev
	case newest >= 0 && newest == at && second == at-1:
		return NearLo
	case newest >= 0 && newest == at-1:
		return Next
	case newest >= 0 && newest == at:
		return Prev
	}
	return Mid
}

// stepIn is the step of a run into a bounded gap of width w (≥ 2).
func stepIn(w int64) int64 {
	return max(1, min(runStep, w/64))
}

// Valid reports whether k is acceptable as a stored sortKey (1..512 bytes).
func Valid(k string) bool { return len(k) > 0 && len(k) <= MaxKey }

// Generated reports whether k is made only of Alphabet bytes.
func Generated(k string) bool {
	for i := 0; i < len(k); i++ {
		if !isDigit(k[i]) {
			return false
		}
	}
	return len(k) > 0
}

func isDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
}

func digitVal(c byte) int64 {
	switch {
	case c >= '0' && c <= '9':
		return int64(c - '0')
	case c >= 'A' && c <= 'Z':
		return int64(c-'A') + 10
	case c >= 'a' && c <= 'z':
		return int64(c-'a') + 36
	}
	return -1
}

const maxDigits = 10 // 62^10 < 2^63

var pow62 = func() (p [maxDigits + 1]int64) {
	p[0] = 1
	for i := 1; i <= maxDigits; i++ {
		p[i] = p[i-1] * 62
	}
	return p
}()

// Smallest and largest integers an element can hold.
var (
	minInt = -pow62[maxDigits]
	maxInt = pow62[maxDigits] - 1
)

// enc writes n as one element.
func enc(n int64) string {
	var b [maxDigits + 1]byte
	return string(encTo(&b, n))
}

// encTo writes n as one element into b and returns the used part.
func encTo(b *[maxDigits + 1]byte, n int64) []byte {
	var d int
	var v int64
	var head byte
	if n >= 0 {
		d = 1
		for n >= pow62[d] {
			d++
		}
		v = n
		head = byte('a' + d - 1)
	} else {
		m := -n
		d = 1
		for m > pow62[d] {
			d++
		}
		v = pow62[d] - m
		head = byte('Z' - (d - 1))
	}
	b[0] = head
	for i := d; i >= 1; i-- {
		b[i] = Alphabet[v%62]
		v /= 62
	}
	return b[:d+1]
}

// encCmp compares enc(n) with s as bytes, without allocating.
func encCmp(n int64, s string) int {
	var b [maxDigits + 1]byte
	return strings.Compare(string(encTo(&b, n)), s)
}

// dec reads one element at the start of s.
func dec(s string) (n int64, size int, ok bool) {
	if s == "" {
		return 0, 0, false
	}
	h := s[0]
	var d int
	neg := false
	switch {
	case h >= 'a' && h <= 'z':
		d = int(h-'a') + 1
	case h >= 'A' && h <= 'Z':
		d = int('Z'-h) + 1
		neg = true
	default:
		return 0, 0, false
	}
	if d > maxDigits || len(s) < d+1 {
		return 0, 0, false
	}
	var v int64
	for i := 1; i <= d; i++ {
		x := digitVal(s[i])
		if x < 0 {
			return 0, 0, false
		}
		v = v*62 + x
	}
	if !neg {
		if d > 1 && v < pow62[d-1] {
			return 0, 0, false
		}
		return v, d + 1, true
	}
	m := pow62[d] - v
	if d > 1 && m <= pow62[d-1] {
		return 0, 0, false
	}
	return -m, d + 1, true
}

// floorInt returns the largest n with enc(n) <= s, or false if none.
func floorInt(s string) (int64, bool) {
	if n, _, ok := dec(s); ok {
		// enc(n) is a prefix of s, and enc(n+1) differs from it within
		// the element (elements are prefix-free), so it is above s.
		return n, true
	}
	if encCmp(minInt, s) > 0 {
		return 0, false
	}
	lo, hi := minInt, maxInt // invariant: enc(lo) <= s
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if encCmp(mid, s) <= 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, true
}

// ceilInt returns the smallest n with enc(n) >= s, or false if none.
func ceilInt(s string) (int64, bool) {
	if n, size, ok := dec(s); ok {
		if size == len(s) {
			return n, true
		}
		// enc(n) is a proper prefix of s, so below it; enc(n+1) is above.
		if n < maxInt {
			return n + 1, true
		}
		return 0, false
	}
	if encCmp(maxInt, s) < 0 {
		return 0, false
	}
	lo, hi := minInt, maxInt // invariant: enc(hi) >= s
	for lo < hi {
		mid := lo + (hi-lo)/2
		if encCmp(mid, s) >= 0 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi, true
}

// Between returns a key strictly between lo and hi ("" means an open end).
func Between(lo, hi string, bias Bias) (string, error) {
	if lo != "" && hi != "" && lo >= hi {
		return "", ErrNoRoom
	}
	if k, ok := structured(lo, hi, lo == "", hi == "", bias, true, 0, 0); ok && inside(lo, hi, k) {
		return k, nil
	}
	if bias == Mid && lo != "" && hi != "" {
		// Neighbours that are not element sequences (midpoints, foreign
		// keys): a memoryless midpoint, unless it leaves no room below it.
		if k, err := midKey(lo, hi); err == nil && inside(lo, hi, k) && Generated(k) && !dead(k) {
			return k, nil
		}
	}
	if bias != Mid {
		if k, ok := suffixed(lo, hi, bias); ok {
			return k, nil
		}
	}
	k, err := raw(lo, hi)
	if err == nil && !inside(lo, hi, k) {
		return "", ErrNoRoom
	}
	return k, err
}

// dead reports a key whose fractional part ends in the smallest digit: no
// key fits between it and its prefix, so it would leave no room below it.
func dead(k string) bool {
	_, frac := intPart(k)
	return frac != "" && frac[len(frac)-1] == Alphabet[0]
}

// sameLen returns the range [lo, hi] of integers whose elements have as
// many digits, and the same sign, as n.
func sameLen(n int64) (int64, int64) {
	d := len(enc(n)) - 1
	if n >= 0 {
		l := int64(0)
		if d > 1 {
			l = pow62[d-1]
		}
		return l, pow62[d] - 1
	}
	h := int64(-1)
	if d > 1 {
		h = -pow62[d-1] - 1
	}
	return max(-pow62[d], minInt), h
}

func inside(lo, hi, k string) bool {
	return (lo == "" || lo < k) && (hi == "" || k < hi)
}

// structured places a key as a sequence of elements between lo and hi (the
// remainders under a common prefix of pre bytes; loOpen/hiOpen say a side is
// unbounded at this level). top is the first level of the key.
func structured(lo, hi string, loOpen, hiOpen bool, bias Bias, top bool, depth, pre int) (string, bool) {
	if depth > MaxKey/2 {
		return "", false
	}
	aInf, bInf := loOpen, hiOpen
	var a, b int64
	if !loOpen {
		var ok bool
		if a, ok = floorInt(lo); !ok {
			aInf = true
		} else if len(enc(a)) > len(lo)+1 {
			return "", false
		}
	}
	if !hiOpen {
		var ok bool
		if b, ok = ceilInt(hi); !ok {
			bInf = true
		} else if len(enc(b)) > len(hi)+1 {
			return "", false
		}
	}
	j := jumpAt(pre)
	var m int64
	switch {
	case aInf && bInf:
		switch {
		case top:
			m = 0
		case bias == NearLo:
			m = -j
		case bias == NearHi:
			m = j
		default:
			m = 0
		}
	case aInf:
		if b <= minInt+runStep {
			return "", false
		}
		m = b - 1
		switch {
		case bias == Prev:
			m = b - runStep
		case !top && bias == NearLo && b > 0:
			m = -j // leave the negative half to this run
		case !top && bias == Mid:
			// the middle of the integers as long as b-1, so that later
			// edits here find room on both sides at the same length
			l, _ := sameLen(b - 1)
			m = b - 1 - (b-1-l)/2
		}
	case bInf:
		if a >= maxInt-runStep {
			return "", false
		}
		m = a + 1
		switch {
		case bias == Next:
			m = a + runStep
		case !top && bias == NearHi && a < 0:
			m = j // leave the negative half to the other run
		case !top && bias == Mid:
			_, h := sameLen(a + 1)
			m = a + 1 + (h-a-1)/2
		}
	case b-a >= 2:
		switch bias {
		case NearLo:
			m = a + 1
		case NearHi:
			m = b - 1
		case Next:
			m = a + stepIn(b-a)
		case Prev:
			m = b - stepIn(b-a)
		default:
			m = a + (b-a)/2
		}
	default:
		e := enc(a)
		if loOpen || !strings.HasPrefix(lo, e) {
			return "", false
		}
		restLo := lo[len(e):]
		restHi, restHiOpen := "", true
		if !hiOpen && strings.HasPrefix(hi, e) {
			restHi, restHiOpen = hi[len(e):], false
		}
		sub, ok := structured(restLo, restHi, restLo == "", restHiOpen, bias, false, depth+1, pre+len(e))
		if !ok {
			return "", false
		}
		return e + sub, true
	}
	return enc(m), true
}

// suffixed handles keys that do not parse as elements from the start
// (midpoints of fractional parts, foreign keys): it takes as the anchor of a
// level either lo itself or lo or hi without its last element, and places the
// key at that level as structured does, so runs there grow logarithmically
// too. Every candidate is checked to lie strictly between the bounds; the
// shortest wins.
func suffixed(lo, hi string, bias Bias) (string, bool) {
	best := ""
	try := func(p string) {
		var restLo, restHi string
		loOpen, hiOpen := false, false
		switch {
		case strings.HasPrefix(lo, p):
			restLo, loOpen = lo[len(p):], lo == p
		case lo == "" || lo < p:
			loOpen = true
		default:
			return
		}
		switch {
		case hi != "" && strings.HasPrefix(hi, p):
			if restHi = hi[len(p):]; restHi == "" {
				return
			}
		case hi == "" || hi > p:
			hiOpen = true
		default:
			return
		}
		sub, ok := structured(restLo, restHi, loOpen, hiOpen, bias, false, 0, len(p))
		if !ok {
			return
		}
		k := p + sub
		if inside(lo, hi, k) && Generated(k) && len(k) <= MaxKey && (best == "" || len(k) < len(best)) {
			best = k
		}
	}
	for _, key := range []string{lo, hi} {
		for s := 2; s <= maxDigits+1 && s <= len(key); s++ {
			if _, size, ok := dec(key[len(key)-s:]); ok && size == s {
				try(key[:len(key)-s])
			}
		}
	}
	if lo != "" {
		try(lo)
	}
	return best, best != ""
}

// raw finds a short alphabet key strictly between lo and hi byte by byte.
func raw(lo, hi string) (string, error) {
	var out []byte
	hiBound := hi != ""
	loBound := true
	for i := 0; i <= MaxKey; i++ {
		cl := -1
		if loBound && i < len(lo) {
			cl = int(lo[i])
		}
		ch := 256
		if hiBound && i < len(hi) {
			ch = int(hi[i])
		} else if hiBound {
			// hi is a prefix of our output so far: nothing can be smaller
			return "", ErrNoRoom
		}
		// candidates: alphabet bytes c with cl < c < ch
		var cands []byte
		for j := 0; j < len(Alphabet); j++ {
			c := int(Alphabet[j])
			if c > cl && c < ch {
				cands = append(cands, Alphabet[j])
			}
		}
		if len(cands) > 0 {
			pick := cands[len(cands)/2]
			if cl >= 0 && !hiBound {
				pick = cands[0] // just above lo keeps appends short
			}
			return string(append(out, pick)), nil
		}
		// follow lo (or hi) one byte deeper
		switch {
		case cl >= 0 && isDigit(byte(cl)):
			out = append(out, byte(cl))
			if cl < ch {
				hiBound = false
			}
		case cl < 0 && ch < 256 && isDigit(byte(ch)):
			out = append(out, byte(ch))
			loBound = false
		default:
			return "", ErrNoRoom
		}
		if !loBound && !hiBound {
			return string(append(out, Alphabet[len(Alphabet)/2])), nil
		}
	}
	return "", ErrNoRoom
}

// Spread returns n keys, strictly increasing, strictly between lo and hi,
// short and evenly spread.
func Spread(lo, hi string, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	if lo != "" && hi != "" && lo >= hi {
		return nil, ErrNoRoom
	}
	if ks, ok := spreadLevel(lo, hi, n); ok {
		return ks, nil
	}
	mid, err := Between(lo, hi, Mid)
	if err != nil {
		return nil, err
	}
	left, err := Spread(lo, mid, (n-1)/2)
	if err != nil {
		return nil, err
	}
	right, err := Spread(mid, hi, n-1-(n-1)/2)
	if err != nil {
		return nil, err
	}
	out := append(left, mid)
	return append(out, right...), nil
}

// spreadLevel places n keys as single elements when the first level has room.
func spreadLevel(lo, hi string, n int) ([]string, bool) {
	aInf, bInf := lo == "", hi == ""
	var a, b int64
	if !aInf {
		var ok bool
		if a, ok = floorInt(lo); !ok {
			aInf = true
		} else if len(enc(a)) > len(lo)+1 {
			return nil, false
		}
	}
	if !bInf {
		var ok bool
		if b, ok = ceilInt(hi); !ok {
			bInf = true
		} else if len(enc(b)) > len(hi)+1 {
			return nil, false
		}
	}
	N := int64(n)
	var first, step int64 = 0, 1
	switch {
	case aInf && bInf:
		first = -N / 2
	case aInf:
		first = b - N
		if first <= minInt {
			return nil, false
		}
	case bInf:
		first = a + 1
		if a+N >= maxInt {
			return nil, false
		}
	default:
		if b-a-1 < N {
			return nil, false
		}
		step = (b - a) / (N + 1)
		first = a + step
	}
	out := make([]string, n)
	for i := range out {
		out[i] = enc(first + int64(i)*step)
	}
	// guard: the first level may not bracket foreign bounds exactly
	if (lo != "" && out[0] <= lo) || (hi != "" && out[n-1] >= hi) {
		return nil, false
	}
	return out, true
}

// Respace is an existing sibling whose key must change.
type Respace struct {
	Index int    // index in the sibling list given to Place
	Key   string // its new key
}

// Plan is the outcome of Place: keys for the new items, in order, and the
// siblings to rewrite (renormalisation), each an update.
type Plan struct {
	Keys    []string
	Respace []Respace
}

// Place chooses keys for n new items inserted before sibs[at] (at == len(sibs)
// appends). sibs are the sibling keys in display order (sortKey bytes, then
// record key). bias is used for a single insert; see BiasFor. All siblings
// are treated as this client's own; see PlaceOpt.
func Place(sibs []string, at, n int, bias Bias) (Plan, error) {
	return PlaceOpt(sibs, at, n, bias, Options{})
}

// Options tune PlaceOpt.
type Options struct {
	// Foreign reports whether sibs[i] was last written by another client
	// (the planner can tell from the record's TID clock identifier, or from
	// the set of records it wrote itself). Place rewrites foreign siblings
	// only when no key of at most MaxGen bytes fits otherwise, and then as
	// few as it can: rewriting them races that client's own edits. nil means
	// none is foreign.
	Foreign func(i int) bool
}

// PlaceOpt is Place with options. It generates, in order of preference:
//
//  1. keys straight between the neighbours, when they are at most Threshold
//     bytes;
//  2. a respacing of a window of at most Window siblings, none foreign, with
//     the fewest rewrites that brings every key to at most Threshold bytes;
//  3. keys straight between the neighbours up to MaxGen bytes (a longer key
//     rather than a rewrite);
//  4. a respacing of a window of at most Window siblings with keys of at most
//     MaxGen bytes, fewest foreign siblings first, then fewest rewrites;
//  5. keys straight between the neighbours longer than MaxGen, up to
//     MaxKey, so that no insert rewrites more than Window siblings;
//  6. only when the neighbours are equal, invalid or have no printable key
//     between them: a respacing of windows doubling around the insertion
//     point, up to the whole list with open ends (which always fits). Only
//     this step can rewrite more than Window siblings.
//
// When no alphabet key fits between the neighbours at all (another client's
// keys such as "a" and "a!"), a printable key between them (Wide) comes
// before step 4 when it is at most MaxGen bytes, and with step 5 otherwise:
// it rewrites nothing.
//
// Respaced keys are spread evenly over their window, leaving room between
// them. The visible order never changes.
func PlaceOpt(sibs []string, at, n int, bias Bias, opt Options) (Plan, error) {
	if at < 0 || at > len(sibs) || n < 0 {
		return Plan{}, errors.New("order: position out of range")
	}
	if n == 0 {
		return Plan{}, nil
	}
	foreign := func(i int) bool { return opt.Foreign != nil && opt.Foreign(i) }
	var direct, long []string
	lo, okLo := bound(sibs, at-1)
	hi, okHi := bound(sibs, at)
	if okLo && okHi {
		var err error
		if n == 1 {
			var k string
			k, err = Between(lo, hi, bias)
			direct = []string{k}
		} else {
			direct, err = Spread(lo, hi, n)
		}
		if err != nil || !fits(direct, MaxKey) {
			direct = nil
		}
		if direct != nil && !fits(direct, MaxGen) {
			long, direct = direct, nil
		}
		if direct != nil && fits(direct, Threshold) {
			return Plan{Keys: direct}, nil
		}
	}
	if p, ok := bestWindow(sibs, at, n, Threshold, false, foreign); ok {
		return p, nil
	}
	if direct != nil {
		return Plan{Keys: direct}, nil
	}
	// No alphabet key fits between the neighbours (foreign keys such as
	// "a" / "a!"): a printable key between them rewrites nothing, so it is
	// preferred to rewriting another client's keys.
	var wideLong []string
	if okLo && okHi && direct == nil && long == nil {
		if ks, ok := Wide(lo, hi, n); ok {
			if fitsLen(ks, MaxGen) {
				return Plan{Keys: ks}, nil
			}
			wideLong = ks
		}
	}
	if p, ok := bestWindow(sibs, at, n, MaxGen, true, foreign); ok {
		return p, nil
	}
	if long == nil {
		long = wideLong
	}
	if long != nil {
		// No window of Window siblings fits: a key over MaxGen bytes keeps
		// this insert's cost bounded (later inserts respace it back when a
		// window fits again).
		return Plan{Keys: long}, nil
	}
	for w := 1; ; w *= 2 {
		a, b := max(at-w, 0), min(at+w, len(sibs))
		if p, ok := respace(sibs, at, n, a, b, MaxGen); ok {
			return p, nil
		}
		if a == 0 && b == len(sibs) {
			// unreachable: open ends always fit
			return Plan{}, errors.New("order: cannot place keys even across the whole list")
		}
	}
}

// bestWindow tries windows [a, b) around at of at most Window siblings and
// returns the cheapest respacing whose keys are at most limit bytes: with
// allowForeign false only windows without foreign siblings, otherwise the
// fewest foreign siblings first; then the fewest rewrites, then the shortest
// keys.
func bestWindow(sibs []string, at, n, limit int, allowForeign bool, foreign func(int) bool) (Plan, bool) {
	var best Plan
	bestF, bestW, bestL := -1, 0, 0
	seen := map[[2]int]bool{}
	for t := 2; t <= Window; t *= 2 {
		for q := 0; q <= 4; q++ {
			a := max(at-t*q/4, 0)
			b := min(a+t, len(sibs))
			a = max(min(a, b-t), 0)
			if seen[[2]int{a, b}] || a == b {
				continue
			}
			seen[[2]int{a, b}] = true
			f := 0
			for i := a; i < b; i++ {
				if foreign(i) {
					f++
				}
			}
			if f > 0 && !allowForeign {
				continue
			}
			p, ok := respace(sibs, at, n, a, b, limit)
			if !ok {
				continue
			}
			l := 0
			for _, k := range p.Keys {
				l = max(l, len(k))
			}
			for _, r := range p.Respace {
				l = max(l, len(r.Key))
			}
			w := len(p.Respace)
			if bestF < 0 || f < bestF || (f == bestF && (w < bestW || (w == bestW && l < bestL))) {
				best, bestF, bestW, bestL = p, f, w, l
			}
		}
	}
	return best, bestF >= 0
}

// respace spreads fresh keys over siblings a..b-1 and the n new items
// (inserted before at), all of at most limit bytes.
func respace(sibs []string, at, n, a, b, limit int) (Plan, bool) {
	lo, okLo := bound(sibs, a-1)
	hi, okHi := bound(sibs, b)
	if !okLo || !okHi {
		return Plan{}, false
	}
	keys, err := Spread(lo, hi, (b-a)+n)
	if err != nil || !fits(keys, limit) {
		return Plan{}, false
	}
	p := Plan{}
	idx := 0
	for i := a; i < at; i++ {
		if sibs[i] != keys[idx] {
			p.Respace = append(p.Respace, Respace{Index: i, Key: keys[idx]})
		}
		idx++
	}
	p.Keys = append([]string(nil), keys[idx:idx+n]...)
	idx += n
	for i := at; i < b; i++ {
		if sibs[i] != keys[idx] {
			p.Respace = append(p.Respace, Respace{Index: i, Key: keys[idx]})
		}
		idx++
	}
	return p, true
}

// bound returns sibs[i] as a bound ("" for an open end), and false when the
// key cannot serve as one (invalid: empty or over 512 bytes).
func bound(sibs []string, i int) (string, bool) {
	if i < 0 || i >= len(sibs) {
		return "", true
	}
	if !Valid(sibs[i]) {
		return "", false
	}
	return sibs[i], true
}

func fitsLen(keys []string, limit int) bool {
	for _, k := range keys {
		if len(k) > limit {
			return false
		}
	}
	return true
}

func fits(keys []string, limit int) bool {
	for _, k := range keys {
		if len(k) > limit || !Generated(k) {
			return false
		}
	}
	return true
}

// Sorted reports whether keys are in strictly increasing byte order.
func Sorted(keys []string) bool {
	return sort.SliceIsSorted(keys, func(i, j int) bool { return keys[i] < keys[j] }) && strictly(keys)
}

func strictly(keys []string) bool {
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			return false
		}
	}
	return true
}

// Graphic reports whether c may appear in a key that Wide places: the
// lexicon allows any string as a sortKey (compared as bytes); printable
// ASCII without the space ('!' to '~') keeps the key valid UTF-8, readable,
// and whole in a client that trims keys (a key "a V" trimmed is "a V" no
// more). Existing keys with spaces still bound and order as bytes.
func Graphic(c byte) bool { return c > ' ' && c <= '~' }

// Wide returns n keys, strictly increasing, strictly between lo and hi (""
// for an open end), using graphic ASCII (Graphic) where no Alphabet key
// fits: it is for foreign neighbours such as "a!" and "a0", which leave
// room only for bytes outside the Alphabet ("a(V" between them). The keys
// share a prefix of bytes copied from the neighbours and one byte strictly
// between theirs (an Alphabet byte when one fits); a single key ends there
// if that byte is in the Alphabet, and otherwise in one more Alphabet byte,
// so it never ends in punctuation and leaves room on both sides. false when
// no graphic key fits (neighbours equal, or apart only in spaces, control
// or non-ASCII bytes: "a" and "a!", where every key between starts "a ").
func Wide(lo, hi string, n int) ([]string, bool) {
	if n <= 0 || (lo != "" && hi != "" && lo >= hi) {
		return nil, false
	}
	var out []byte
	loOn, hiOn := lo != "", hi != ""
	for i := 0; i < MaxKey; i++ {
		cl, ch := -1, 256
		if loOn && i < len(lo) {
			cl = int(lo[i])
		}
		if hiOn {
			if i >= len(hi) {
				return nil, false // out is hi: nothing below it from here
			}
			ch = int(hi[i])
		}
		var cands, alpha []byte
		for c := int('!'); c <= '~'; c++ {
			if c > cl && c < ch {
				cands = append(cands, byte(c))
				if isDigit(byte(c)) {
					alpha = append(alpha, byte(c))
				}
			}
		}
		if len(cands) > 0 {
			pick := cands[len(cands)/2]
			if len(alpha) > 0 {
				pick = alpha[len(alpha)/2]
			}
			base := string(append(out, pick))
			if n == 1 {
				if isDigit(pick) {
					return []string{base}, true
				}
				return []string{base + "V"}, true
			}
			sub, err := Spread("", "", n)
			if err != nil {
				return nil, false
			}
			ks := make([]string, n)
			for j, s := range sub {
				ks[j] = base + s
			}
			return ks, len(ks[n-1]) <= MaxKey
		}
		switch {
		case cl >= 0 && Graphic(byte(cl)):
			// follow lo: once below hi's byte, hi no longer bounds
			out = append(out, byte(cl))
			if cl < ch {
				hiOn = false
			}
		case ch < 256 && Graphic(byte(ch)) && cl < ch:
			// lo is a prefix of out (or open), or its byte is one no key
			// may copy (a space) just below hi's: follow hi
			out = append(out, byte(ch))
			loOn = false
		default:
			return nil, false
		}
	}
	return nil, false
}
