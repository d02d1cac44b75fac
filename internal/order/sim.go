package order

import (
	"fmt"
	"math/rand/v2"
)

// Patterns are the editing patterns the benchmark measures:
//
//   - append, prepend: at the end or the start of the list;
//   - after-fixed: again and again right after the same bullet;
//   - typing-down: right after the bullet just inserted;
//   - typing-runs: runs of 1-40 bullets typed down, each run at a random place;
//   - random: at a uniformly random place;
//   - middle: at the middle of the list;
//   - zigzag: between the two newest bullets;
//   - mixed: segments of 1-3,000 inserts of the patterns above, each segment
//     anchored at a random bullet, with a quarter of the bullets written by
//     another client (foreign).
var Patterns = []string{"append", "prepend", "after-fixed", "typing-down", "typing-runs", "random", "middle", "zigzag", "mixed"}

// Bound is the most extra writes a single insert should need.
const Bound = 32

// Generator chooses keys for one insert: Place for this package, or a
// baseline for comparison. foreign reports which siblings another client
// wrote.
type Generator func(sibs []string, at int, bias Bias, foreign func(i int) bool) (Plan, error)

// PlaceGen is this package's generator.
func PlaceGen(sibs []string, at int, bias Bias, foreign func(i int) bool) (Plan, error) {
	return PlaceOpt(sibs, at, 1, bias, Options{Foreign: foreign})
}

// Stats summarises one simulated pattern.
type Stats struct {
	Pattern       string
	N             int
	MaxLen        int     // longest key ever generated or rewritten
	MeanLen       float64 // mean key length of the final list
	ExtraWrites   int     // respaced siblings, in total
	Worst         int     // most respaced siblings for one insert
	OverBound     int     // inserts that respaced more than Bound siblings
	ForeignWrites int     // respaced siblings that another client wrote
	LongKeys      int     // keys generated or rewritten over MaxGen bytes
}

// Simulate runs n single inserts of a pattern through gen and checks the
// invariants after each: strict order around every changed key (and over
// the whole list every 4,096 inserts and at the end), and with strict also
// ≤ 512 bytes (the baseline has no renormalisation, so it is run without).
func Simulate(pattern string, n int, gen Generator, strict bool) (Stats, error) {
	return SimulateSeed(pattern, n, 1, gen, strict)
}

// SimulateSeed is Simulate with a seed for the random choices.
func SimulateSeed(pattern string, n int, seed uint64, gen Generator, strict bool) (Stats, error) {
	var keys []string
	var ages []int
	var foreign []bool
	age := 0
	last, prev, fixed := -1, -1, -1 // indices of the two newest and of the anchor
	push := func(at int, k string, f bool) {
		keys = append(keys, "")
		copy(keys[at+1:], keys[at:])
		keys[at] = k
		ages = append(ages, 0)
		copy(ages[at+1:], ages[at:])
		ages[at] = age
		foreign = append(foreign, false)
		copy(foreign[at+1:], foreign[at:])
		foreign[at] = f
		age++
		for _, p := range []*int{&last, &prev, &fixed} {
			if *p >= at {
				*p++
			}
		}
		prev, last = last, at
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	st := Stats{Pattern: pattern, N: n}
	switch pattern {
	case "after-fixed", "typing-down", "zigzag", "middle", "mixed":
		push(0, "a0", pattern == "mixed")
		push(1, "a1", pattern == "mixed")
		fixed = 0
		if pattern == "typing-down" {
			prev, last = 1, 0 // start typing below the first bullet
		}
	}
	cur, left := pattern, 0 // mixed: current pattern and inserts left in it
	run := 0                // typing-runs: inserts left in the run
	isForeign := func(i int) bool { return foreign[i] }
	for i := 0; i < n; i++ {
		if pattern == "mixed" && left == 0 {
			cur = Patterns[rng.IntN(len(Patterns)-1)]
			left = 1 + rng.IntN(3000)
			fixed = rng.IntN(len(keys))
			run = 0
		}
		left--
		var at int
		switch cur {
		case "append":
			at = len(keys)
		case "prepend":
			at = 0
		case "after-fixed":
			at = fixed + 1
		case "typing-down":
			at = last + 1
		case "typing-runs":
			if run == 0 {
				run = 1 + rng.IntN(40)
				at = rng.IntN(len(keys) + 1)
			} else {
				at = last + 1
			}
			run--
		case "random":
			at = rng.IntN(len(keys) + 1)
		case "middle":
			at = len(keys) / 2
		case "zigzag":
			at = min(last, prev) + 1
			if prev < 0 {
				at = len(keys)
			}
		default:
			return st, fmt.Errorf("unknown pattern %q", pattern)
		}
		p, err := gen(keys, at, BiasFor(at, last, prev), isForeign)
		if err != nil {
			return st, fmt.Errorf("%s step %d: %w", pattern, i, err)
		}
		if len(p.Keys) != 1 {
			return st, fmt.Errorf("%s step %d: %d keys for one insert", pattern, i, len(p.Keys))
		}
		for _, r := range p.Respace {
			keys[r.Index] = r.Key
			st.MaxLen = max(st.MaxLen, len(r.Key))
			if len(r.Key) > MaxGen {
				st.LongKeys++
			}
			if foreign[r.Index] {
				st.ForeignWrites++
			}
			foreign[r.Index] = false // rewritten by us
		}
		st.ExtraWrites += len(p.Respace)
		st.Worst = max(st.Worst, len(p.Respace))
		if len(p.Respace) > Bound {
			st.OverBound++
		}
		push(at, p.Keys[0], pattern == "mixed" && rng.IntN(4) == 0)
		st.MaxLen = max(st.MaxLen, len(p.Keys[0]))
		if len(p.Keys[0]) > MaxGen {
			st.LongKeys++
		}
		if strict && st.MaxLen > MaxKey {
			return st, fmt.Errorf("%s step %d: key of %d bytes", pattern, i, st.MaxLen)
		}
		check := func(j int) error {
			if j > 0 && j < len(keys) && keys[j-1] >= keys[j] {
				return fmt.Errorf("%s step %d: order broken at %d: %q >= %q", pattern, i, j, keys[j-1], keys[j])
			}
			return nil
		}
		if err := check(at); err != nil {
			return st, err
		}
		if err := check(at + 1); err != nil {
			return st, err
		}
		for _, r := range p.Respace {
			j := r.Index
			if j >= at {
				j++
			}
			if err := check(j); err != nil {
				return st, err
			}
			if err := check(j + 1); err != nil {
				return st, err
			}
		}
		if i%4096 == 4095 || i == n-1 {
			for j := 1; j < len(keys); j++ {
				if err := check(j); err != nil {
					return st, err
				}
			}
		}
	}
	sum := 0
	for _, k := range keys {
		sum += len(k)
		st.MaxLen = max(st.MaxLen, len(k))
	}
	if len(keys) > 0 {
		st.MeanLen = float64(sum) / float64(len(keys))
	}
	return st, nil
}

// Midpoint is the baseline: rocicorp/fractional-indexing's scheme (an
// integer head, then a memoryless base-62 midpoint of the fractional parts),
// with no renormalisation. It ignores bias.
func Midpoint(sibs []string, at int, _ Bias, _ func(int) bool) (Plan, error) {
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
