package order

import (
	"fmt"
	"math/rand/v2"
)

// Patterns are the editing patterns the benchmark measures.
var Patterns = []string{"append", "prepend", "after-fixed", "typing-down", "random", "middle", "zigzag"}

// Generator chooses keys for one insert: Place for this package, or a
// baseline for comparison.
type Generator func(sibs []string, at int, bias Bias) (Plan, error)

// PlaceGen is this package's generator.
func PlaceGen(sibs []string, at int, bias Bias) (Plan, error) { return Place(sibs, at, 1, bias) }

// Stats summarises one simulated pattern.
type Stats struct {
	Pattern     string
	N           int
	MaxLen      int
	MeanLen     float64
	ExtraWrites int // respaced siblings
}

// Simulate runs n single inserts of a pattern through gen and checks the
// invariants after each: strict order, and with strict also ≤ 512 bytes (the
// baseline has no renormalisation, so it is run without).
func Simulate(pattern string, n int, gen Generator, strict bool) (Stats, error) {
	type sib struct {
		key string
		age int
	}
	var sibs []sib
	age := 0
	push := func(at int, k string) {
		sibs = append(sibs, sib{})
		copy(sibs[at+1:], sibs[at:])
		sibs[at] = sib{k, age}
		age++
	}
	rng := rand.New(rand.NewPCG(1, 2))
	st := Stats{Pattern: pattern, N: n}
	var last, prev int = -1, -1 // ages of the two newest
	switch pattern {
	case "after-fixed", "typing-down", "zigzag", "middle":
		push(0, "a0")
		push(1, "a1")
		prev, last = 0, 1
		if pattern == "typing-down" {
			prev, last = 1, 0 // start typing below the first bullet
		}
	}
	idxOf := func(a int) int {
		for i, s := range sibs {
			if s.age == a {
				return i
			}
		}
		return -1
	}
	for i := 0; i < n; i++ {
		var at int
		switch pattern {
		case "append":
			at = len(sibs)
		case "prepend":
			at = 0
		case "after-fixed":
			at = idxOf(0) + 1
		case "typing-down":
			at = idxOf(last) + 1
		case "random":
			at = rng.IntN(len(sibs) + 1)
		case "middle":
			at = len(sibs) / 2
		case "zigzag":
			a, b := idxOf(last), idxOf(prev)
			if a > b {
				a = b
			}
			at = a + 1
		default:
			return st, fmt.Errorf("unknown pattern %q", pattern)
		}
		keys := make([]string, len(sibs))
		for j, s := range sibs {
			keys[j] = s.key
		}
		newest, second := -1, -1
		for j, s := range sibs {
			if s.age == age-1 {
				newest = j
			}
			if s.age == age-2 {
				second = j
			}
		}
		p, err := gen(keys, at, BiasFor(at, newest, second))
		if err != nil {
			return st, fmt.Errorf("%s step %d: %w", pattern, i, err)
		}
		for _, r := range p.Respace {
			sibs[r.Index].key = r.Key
		}
		st.ExtraWrites += len(p.Respace)
		push(at, p.Keys[0])
		prev, last = last, age-1
		l := len(p.Keys[0])
		if l > st.MaxLen {
			st.MaxLen = l
		}
		if l > MaxKey && strict {
			return st, fmt.Errorf("%s step %d: key of %d bytes", pattern, i, l)
		}
		for j := 1; j < len(sibs); j++ {
			if sibs[j-1].key >= sibs[j].key {
				return st, fmt.Errorf("%s step %d: order broken at %d: %q >= %q", pattern, i, j, sibs[j-1].key, sibs[j].key)
			}
		}
	}
	// mean over the final list
	sum := 0
	for _, s := range sibs {
		sum += len(s.key)
		if len(s.key) > st.MaxLen {
			st.MaxLen = len(s.key)
		}
	}
	st.MeanLen = float64(sum) / float64(len(sibs))
	return st, nil
}

// Midpoint is the baseline: rocicorp/fractional-indexing's scheme (an
// integer head, then a memoryless base-62 midpoint of the fractional parts),
// with no renormalisation. It ignores bias.
func Midpoint(sibs []string, at int, _ Bias) (Plan, error) {
	var a, b string
	if at > 0 {
		a = sibs[at-1]
	}
	if at < len(sibs) {
		b = sibs[at]
	}
	k, err := midKey(a, b)
	return Plan{Keys: []string{k}}, err
}

func intPart(k string) (string, string) {
	if _, size, ok := dec(k); ok {
		return k[:size], k[size:]
	}
	return "", k
}

func midKey(a, b string) (k string, err error) {
	defer func() {
		if r := recover(); r != nil {
			k, err = "", ErrNoRoom
		}
	}()
	switch {
	case a == "" && b == "":
		return "a0", nil
	case a == "":
		ib, fb := intPart(b)
		n, _, _ := dec(ib)
		if fb != "" {
			return ib, nil
		}
		return enc(n - 1), nil
	case b == "":
		ia, _ := intPart(a)
		n, _, _ := dec(ia)
		return enc(n + 1), nil
	}
	ia, fa := intPart(a)
	ib, fb := intPart(b)
	if ia == ib {
		return ia + midpoint(fa, fb, true), nil
	}
	n, _, _ := dec(ia)
	if i := enc(n + 1); i < b {
		return i, nil
	}
	return ia + midpoint(fa, "", false), nil
}

// midpoint is rocicorp's digit-wise midpoint (hasB false: no upper bound).
// It panics on bytes outside the alphabet; midKey recovers and reports it.
func midpoint(a, b string, hasB bool) string {
	if len(a) > 1<<14 {
		panic("midpoint: runaway")
	}
	if hasB {
		n := 0
		for {
			var ca byte = '0'
			if n < len(a) {
				ca = a[n]
			}
			if n >= len(b) || ca != b[n] {
				break
			}
			n++
		}
		if n > 0 {
			ra := ""
			if n < len(a) {
				ra = a[n:]
			}
			return b[:n] + midpoint(ra, b[n:], true)
		}
	}
	da := int64(0)
	if a != "" {
		da = digitVal(a[0])
	}
	db := int64(62)
	if hasB {
		if b == "" {
			panic("midpoint: empty upper bound")
		}
		db = digitVal(b[0])
	}
	if da < 0 || db < 0 {
		panic("midpoint: byte outside the alphabet")
	}
	if db-da > 1 {
		return string(Alphabet[(da+db+1)/2])
	}
	if hasB && len(b) > 1 {
		return b[:1]
	}
	ra := ""
	if len(a) > 1 {
		ra = a[1:]
	}
	return string(Alphabet[da]) + midpoint(ra, "", false)
}
