package order

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

func TestEncodingRoundTripAndOrder(t *testing.T) {
	vals := []int64{minInt, -pow62[5] - 1, -3845, -3844, -63, -62, -61, -2, -1, 0, 1, 61, 62, 3843, 3844, pow62[5], maxInt}
	prev := ""
	for _, n := range vals {
		e := enc(n)
		d, size, ok := dec(e)
		if !ok || d != n || size != len(e) {
			t.Fatalf("dec(enc(%d)=%q) = %d,%d,%v", n, e, d, size, ok)
		}
		if prev != "" && prev >= e {
			t.Fatalf("enc not increasing: %q >= %q", prev, e)
		}
		prev = e
	}
}

func TestBetweenVectors(t *testing.T) {
	cases := []struct{ lo, hi string }{
		{"", ""}, {"a", "b"}, {"a", "ba"}, {"b", "ba"}, {"a0", "a0V"}, {"a0V", "a1"}, {"a", ""}, {"", "a"},
		{"!", "~"}, {"z", ""}, {"zzzz", ""}, {"Zz", "a0"},
		{strings.Repeat("a", 511), strings.Repeat("a", 511) + "b"}, {"a0", "a0000001"},
	}
	for _, c := range cases {
		for _, b := range []Bias{Mid, NearLo, NearHi, Next, Prev} {
			k, err := Between(c.lo, c.hi, b)
			if err != nil {
				t.Fatalf("Between(%q,%q,%d): %v", c.lo, c.hi, b, err)
			}
			if !inside(c.lo, c.hi, k) || !Generated(k) || len(k) > MaxKey {
				t.Fatalf("Between(%q,%q,%d) = %q", c.lo, c.hi, b, k)
			}
		}
	}
	for _, c := range []struct{ lo, hi string }{{"a", "a"}, {"b", "a"}, {"a", "a\x01"}, {"a!", "a#"}, {"", "0"}} {
		if _, err := Between(c.lo, c.hi, Mid); err == nil {
			t.Fatalf("Between(%q,%q) should have no room", c.lo, c.hi)
		}
	}
}

func checkPlace(t testing.TB, sibs []string, at, n int, bias Bias) []string {
	t.Helper()
	p, err := Place(sibs, at, n, bias)
	if err != nil {
		t.Fatalf("Place(%q, %d, %d): %v", sibs, at, n, err)
	}
	out := append([]string(nil), sibs...)
	for _, r := range p.Respace {
		out[r.Index] = r.Key
	}
	out = append(out[:at], append(append([]string(nil), p.Keys...), out[at:]...)...)
	for i, k := range out {
		if i >= at && i < at+n || changed(p, i) {
			if !Generated(k) || len(k) > MaxGen {
				t.Fatalf("generated key %q invalid", k)
			}
		}
	}
	if !strictly(out) {
		t.Fatalf("Place(%q, %d, %d) gives unordered %q", sibs, at, n, out)
	}
	return out
}

func changed(p Plan, i int) bool {
	for _, r := range p.Respace {
		if r.Index == i {
			return true
		}
	}
	return false
}

func TestPlaceRenormalises(t *testing.T) {
	// equal neighbours (ties broken by record key), invalid neighbours, keys
	// with no alphabet key between them, and a long key at the threshold.
	long := strings.Repeat("m", 600)
	cases := []struct {
		name string
		sibs []string
		at   int
	}{
		{"equal", []string{"a", "b", "b", "c"}, 2},
		{"empty neighbour", []string{"a", "", "c"}, 2},
		{"over 512", []string{"a", long, "z"}, 1},
		{"no alphabet room", []string{"a", "a\x01", "b"}, 1},
		{"long", []string{"a0", "a0" + strings.Repeat("0", 30) + "1", "a1"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Place(c.sibs, c.at, 1, Mid)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Respace) == 0 {
				t.Fatal("expected renormalisation")
			}
			out := append([]string(nil), c.sibs...)
			for _, r := range p.Respace {
				out[r.Index] = r.Key
			}
			out = append(out[:c.at], append([]string{p.Keys[0]}, out[c.at:]...)...)
			// sorted, so visible order (by index) is preserved
			if !strictly(out) {
				t.Fatalf("not strictly ordered: %q", out)
			}
		})
	}
}

func TestPlaceProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for trial := 0; trial < 300; trial++ {
		var sibs []string
		for i := 0; i < rng.IntN(8); i++ {
			sibs = append(sibs, randKey(rng))
		}
		sort.Strings(sibs)
		sibs = dedupe(sibs)
		for step := 0; step < 30; step++ {
			at := rng.IntN(len(sibs) + 1)
			n := 1 + rng.IntN(3)
			sibs = checkPlace(t, sibs, at, n, Bias(rng.IntN(5)))
		}
	}
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, k := range s {
		if i == 0 || k != s[i-1] {
			out = append(out, k)
		}
	}
	return out
}

func randKey(rng *rand.Rand) string {
	const pool = "0aAzZ9!~bV"
	n := 1 + rng.IntN(6)
	b := make([]byte, n)
	for i := range b {
		b[i] = pool[rng.IntN(len(pool))]
	}
	return string(b)
}

func TestPatternsShort(t *testing.T) {
	for _, p := range Patterns {
		s, err := Simulate(p, 2000, PlaceGen, true)
		if err != nil {
			t.Fatal(err)
		}
		if s.MaxLen > Threshold {
			t.Errorf("%s: max key %d > %d", p, s.MaxLen, Threshold)
		}
		if float64(s.ExtraWrites)/float64(s.N) > 0.1 {
			t.Errorf("%s: %d extra writes", p, s.ExtraWrites)
		}
	}
}

// TestBoundedRespacing is the re-spacing bound as a property: every pattern,
// and mixes of them anchored at random bullets with a quarter of the bullets
// foreign, at 20,000 inserts into one list: no insert rewrites more than
// Bound siblings, at most 0.1 rewrites per insert on average, no key over
// MaxGen bytes, order checked after every insert (Simulate).
func TestBoundedRespacing(t *testing.T) {
	type run struct {
		pattern string
		seed    uint64
	}
	var runs []run
	for _, p := range Patterns {
		runs = append(runs, run{p, 1})
	}
	for seed := uint64(2); seed <= 4; seed++ {
		runs = append(runs, run{"mixed", seed}, run{"typing-runs", seed}, run{"random", seed})
	}
	for _, r := range runs {
		t.Run(fmt.Sprintf("%s/seed=%d", r.pattern, r.seed), func(t *testing.T) {
			s, err := SimulateSeed(r.pattern, 20000, r.seed, PlaceGen, true)
			if err != nil {
				t.Fatal(err)
			}
			if s.Worst > Bound {
				t.Errorf("worst insert rewrote %d siblings (%d inserts over %d)", s.Worst, s.OverBound, Bound)
			}
			if per := float64(s.ExtraWrites) / float64(s.N); per > 0.1 {
				t.Errorf("%.3f extra writes per insert", per)
			}
			if s.MaxLen > MaxGen {
				t.Errorf("key of %d bytes", s.MaxLen)
			}
		})
	}
}

// TestForeignSiblingsKept checks that a key longer than Threshold is taken
// rather than rewriting another client's siblings, and that the same
// neighbours of our own are respaced instead.
func TestForeignSiblingsKept(t *testing.T) {
	base := "a0" + strings.Repeat("V", 22) // 24 bytes
	sibs := []string{"a0", base + "1", base + "2", "a1"}
	all := func(int) bool { return true }
	cases := []struct {
		name        string
		foreign     func(int) bool
		wantRespace bool
	}{
		{"foreign neighbours: longer key", all, false},
		{"own neighbours: respaced", nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := PlaceOpt(sibs, 2, 1, Mid, Options{Foreign: c.foreign})
			if err != nil {
				t.Fatal(err)
			}
			out := append([]string(nil), sibs...)
			for _, r := range p.Respace {
				out[r.Index] = r.Key
			}
			out = append(out[:2], append([]string{p.Keys[0]}, out[2:]...)...)
			if !strictly(out) {
				t.Fatalf("not strictly ordered: %q", out)
			}
			for _, k := range out {
				if len(k) > MaxGen || !Valid(k) {
					t.Fatalf("key %q over %d bytes", k, MaxGen)
				}
			}
			if got := len(p.Respace) > 0; got != c.wantRespace {
				t.Fatalf("respaced %d siblings, want respacing %v (keys %q)", len(p.Respace), c.wantRespace, out)
			}
			if c.wantRespace && len(out[2]) > Threshold {
				t.Fatalf("respaced but the new key %q is still over %d bytes", out[2], Threshold)
			}
		})
	}
}

func FuzzBetween(f *testing.F) {
	f.Add("a", "b", 0)
	f.Add("a0", "a0V", 1)
	f.Add("", "", 2)
	f.Add("Zz", "a0", 1)
	f.Fuzz(func(t *testing.T, lo, hi string, b int) {
		if len(lo) > MaxKey || len(hi) > MaxKey {
			return
		}
		bias := Bias(((b % 5) + 5) % 5)
		k, err := Between(lo, hi, bias)
		if lo != "" && hi != "" && lo >= hi {
			if err == nil {
				t.Fatalf("Between(%q,%q) = %q, want no room", lo, hi, k)
			}
			return
		}
		if err == nil {
			if !inside(lo, hi, k) || !Generated(k) || len(k) > MaxKey {
				t.Fatalf("Between(%q,%q,%d) = %q", lo, hi, bias, k)
			}
		}
		// Place must always succeed, whatever the neighbours.
		var sibs []string
		if lo != "" {
			sibs = append(sibs, lo)
		}
		at := len(sibs)
		if hi != "" {
			sibs = append(sibs, hi)
		}
		if !sort.StringsAreSorted(sibs) {
			return
		}
		checkPlace(t, sibs, at, 1+((b%4)+4)%4, bias)
	})
}

// BenchmarkPatterns reports key lengths and extra writes for every pattern at
// 1,000, 10,000 and 100,000 insertions into one list, for this package and
// (up to 10,000) the midpoint baseline.
// Run: go test ./order -run '^$' -bench Patterns -benchtime 1x
func BenchmarkPatterns(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		for _, p := range Patterns {
			for _, g := range []struct {
				name string
				gen  Generator
			}{{"place", PlaceGen}, {"midpoint", Midpoint}} {
				if g.name == "midpoint" && n > 10000 {
					continue // its keys grow linearly: megabytes of keys
				}
				b.Run(fmt.Sprintf("%s/n=%d/%s", p, n, g.name), func(b *testing.B) {
					var s Stats
					for i := 0; i < b.N; i++ {
						var err error
						if s, err = Simulate(p, n, g.gen, g.name == "place"); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(s.MaxLen), "maxlen")
					b.ReportMetric(s.MeanLen, "meanlen")
					b.ReportMetric(float64(s.ExtraWrites)/float64(n), "extra/ins")
					b.ReportMetric(float64(s.Worst), "worst")
					b.ReportMetric(float64(s.OverBound), "over32")
					b.ReportMetric(float64(s.ForeignWrites), "foreign")
				})
			}
		}
	}
}

func BenchmarkBetween(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_, _ = Between("a0Xyzzbzz", "a0Y00", NearLo)
	}
}
