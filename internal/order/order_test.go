package order

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

func TestEncodingRoundTripAndOrder(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
			if !(Generated(k) || wideKey(p, k)) || len(k) > MaxGen {
				t.Fatalf("generated key %q invalid (Place(%q, %d, %d, %d))", k, sibs, at, n, bias)
			}
		}
	}
	if !strictly(out) {
		t.Fatalf("Place(%q, %d, %d) gives unordered %q", sibs, at, n, out)
	}
	return out
}

// wideKey: a new key outside the Alphabet is allowed only where no
// Alphabet key fits between the neighbours (Wide): graphic ASCII (no
// space), ending in an Alphabet byte, and placed without rewriting any sibling.
func wideKey(p Plan, k string) bool {
	if len(p.Respace) > 0 || k == "" || !isDigit(k[len(k)-1]) {
		return false
	}
	for _, r := range p.Keys {
		if r == k {
			for i := 0; i < len(k); i++ {
				if !Graphic(k[i]) {
					return false
				}
			}
			return true
		}
	}
	return false
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
	t.Parallel()
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
	t.Parallel()
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
	const pool = "0aAzZ9!~bV "
	n := 1 + rng.IntN(6)
	b := make([]byte, n)
	for i := range b {
		b[i] = pool[rng.IntN(len(pool))]
	}
	return string(b)
}

func TestPatternsShort(t *testing.T) {
	t.Parallel()
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

// TestBoundedRespacing is the re-spacing bound as a property, at 100,000
// inserts into one list (20,000 with -short): every pattern, and twelve
// random mixes of them anchored at random bullets with a quarter of the
// bullets foreign. No insert rewrites more than Bound siblings, at most 0.1
// rewrites per insert on average, order checked after every insert
// (Simulate), and no key over MaxGen bytes except in the mixes. There nested
// campaigns (middle, zigzag, typing down at one spot, again inside each
// other) can pack more than Window siblings under one long prefix, where no
// window of Window siblings fits keys of MaxGen bytes; the insert then takes
// a longer key rather than rewriting more (doc.go). Such keys stay under
// 2*MaxGen bytes (over these seeds: none in 8 mixes, 9 to 6,595 of the
// 100,000 in the other 4, the longest 47 bytes).
func TestBoundedRespacing(t *testing.T) {
	t.Parallel()
	n := 100000
	if testing.Short() {
		n = 20000
	}
	type run struct {
		pattern string
		seed    uint64
	}
	var runs []run
	for _, p := range Patterns {
		runs = append(runs, run{p, 1})
	}
	for seed := uint64(2); seed <= 3; seed++ {
		runs = append(runs, run{"typing-runs", seed}, run{"random", seed})
	}
	for seed := uint64(2); seed <= 12; seed++ {
		runs = append(runs, run{"mixed", seed})
	}
	for _, r := range runs {
		t.Run(fmt.Sprintf("%s/seed=%d", r.pattern, r.seed), func(t *testing.T) {
			t.Parallel()
			s, err := SimulateSeed(r.pattern, n, r.seed, PlaceGen, true)
			if err != nil {
				t.Fatal(err)
			}
			if s.Worst > Bound {
				t.Errorf("worst insert rewrote %d siblings (%d inserts over %d)", s.Worst, s.OverBound, Bound)
			}
			if per := float64(s.ExtraWrites) / float64(s.N); per > 0.1 {
				t.Errorf("%.3f extra writes per insert", per)
			}
			limit := MaxGen
			if r.pattern == "mixed" {
				limit = 2 * MaxGen
			}
			if s.MaxLen > limit {
				t.Errorf("key of %d bytes", s.MaxLen)
			}
			t.Logf("max key %d, mean %.2f, %.4f extra writes per insert, worst %d, %d foreign rewritten, %d keys over %d bytes", s.MaxLen, s.MeanLen, float64(s.ExtraWrites)/float64(s.N), s.Worst, s.ForeignWrites, s.LongKeys, MaxGen)
		})
	}
}

// TestDenseClusterBounded: 100 siblings with keys of 32 bytes, consecutive
// under one 29-byte prefix, so no window of Window siblings around an insert
// in the middle fits keys of MaxGen bytes. The insert takes a longer key and
// rewrites at most Window siblings (it used to respace the whole cluster).
func TestDenseClusterBounded(t *testing.T) {
	t.Parallel()
	pre := "a0" + strings.Repeat("V", 27)
	sibs := []string{pre}
	for i := int64(62); i < 162; i++ {
		sibs = append(sibs, pre+enc(i))
	}
	sibs = append(sibs, pre+"d")
	if !strictly(sibs) {
		t.Fatalf("fixture unordered")
	}
	for _, at := range []int{40, 50, 51, 61} {
		p, err := Place(sibs, at, 1, Mid)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Respace) > Window {
			t.Fatalf("at %d: respaced %d siblings, want at most %d", at, len(p.Respace), Window)
		}
		out := append([]string(nil), sibs...)
		for _, r := range p.Respace {
			out[r.Index] = r.Key
		}
		out = append(out[:at], append([]string{p.Keys[0]}, out[at:]...)...)
		if !strictly(out) {
			t.Fatalf("at %d: not strictly ordered around %q", at, p.Keys[0])
		}
		if k := p.Keys[0]; !Generated(k) || len(k) > MaxKey || len(k) <= MaxGen {
			t.Fatalf("at %d: key %q (%d bytes), want a longer key over %d bytes", at, k, len(k), MaxGen)
		}
	}
}

// TestFloorCeil checks the direct reading of floor and ceiling elements
// against a binary search over the element order.
func TestFloorCeil(t *testing.T) {
	t.Parallel()
	slowFloor := func(s string) (int64, bool) {
		if enc(minInt) > s {
			return 0, false
		}
		lo, hi := minInt, maxInt
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if enc(mid) <= s {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo, true
	}
	slowCeil := func(s string) (int64, bool) {
		if enc(maxInt) < s {
			return 0, false
		}
		lo, hi := minInt, maxInt
		for lo < hi {
			mid := lo + (hi-lo)/2
			if enc(mid) >= s {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return hi, true
	}
	rng := rand.New(rand.NewPCG(3, 4))
	inputs := []string{"", "a0", "a00", "az", "b10", "Zz", "Z", "z", "zzzz", "A", "jzzzzzzzzzz", "jzzzzzzzzzzz", "Q00000000000", "!", "~"}
	for i := 0; i < 20000; i++ {
		switch i % 3 {
		case 0:
			inputs = append(inputs, randKey(rng))
		case 1:
			inputs = append(inputs, enc(rng.Int64N(maxInt)-rng.Int64N(maxInt))+randKey(rng)[:rng.IntN(2)])
		default:
			inputs = append(inputs, enc(int64(rng.IntN(8000)-4000)))
		}
	}
	for _, s := range inputs {
		f, fok := floorInt(s)
		sf, sfok := slowFloor(s)
		if f != sf || fok != sfok {
			t.Fatalf("floorInt(%q) = %d,%v, want %d,%v", s, f, fok, sf, sfok)
		}
		c, cok := ceilInt(s)
		sc, scok := slowCeil(s)
		if c != sc || cok != scok {
			t.Fatalf("ceilInt(%q) = %d,%v, want %d,%v", s, c, cok, sc, scok)
		}
	}
}

// TestBiasFor: the newest sibling bordering the gap continues a run even
// when the second newest is elsewhere.
func TestBiasFor(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name               string
		at, newest, second int
		want               Bias
	}{
		{"typing down", 3, 2, 1, Next},
		{"after the same bullet", 3, 3, 4, Prev},
		{"zigzag below", 3, 2, 3, NearHi},
		{"zigzag above", 3, 3, 2, NearLo},
		{"after the newest, second elsewhere", 3, 2, 7, Next},
		{"before the newest, second elsewhere", 3, 3, 0, Prev},
		{"away from both", 5, 1, 2, Mid},
		{"no siblings", 0, -1, -1, Mid},
	}
	for _, c := range cases {
		if got := BiasFor(c.at, c.newest, c.second); got != c.want {
			t.Errorf("%s: BiasFor(%d,%d,%d) = %d, want %d", c.name, c.at, c.newest, c.second, got, c.want)
		}
	}
}

// TestForeignSiblingsKept checks that a key longer than Threshold is taken
// rather than rewriting another client's siblings, and that the same
// neighbours of our own are respaced instead.
func TestForeignSiblingsKept(t *testing.T) {
	t.Parallel()
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
// Run: go test ./internal/order -run '^$' -bench Patterns -benchtime 1x
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
					b.ReportMetric(float64(s.LongKeys), "over32B")
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

// TestWideBetweenForeign: another client's keys "a", "a!", "a0" leave no
// Alphabet key between "a!" and "a0": an insert there takes a graphic key
// that fits ("a(V") and rewrites none of them (it used to respace two).
// Between "a" and "a!" every key starts "a " (a space, which a client that
// trims keys misorders: "a V" was minted there): the insert respaces
// instead, at most Window siblings, every key minted without a space and
// the order kept.
func TestWideBetweenForeign(t *testing.T) {
	t.Parallel()
	sibs := []string{"a", "a!", "a0"}
	all := func(int) bool { return true }
	for _, at := range []int{1, 2} {
		for _, n := range []int{1, 3} {
			p, err := PlaceOpt(sibs, at, n, Mid, Options{Foreign: all})
			if err != nil {
				t.Fatal(err)
			}
			if at == 2 && len(p.Respace) != 0 {
				t.Fatalf("insert of %d at %d rewrote %d foreign keys: %+v", n, at, len(p.Respace), p.Respace)
			}
			if len(p.Respace) > Window {
				t.Fatalf("insert of %d at %d rewrote %d keys", n, at, len(p.Respace))
			}
			out := append([]string(nil), sibs...)
			minted := append([]string(nil), p.Keys...)
			for _, r := range p.Respace {
				out[r.Index] = r.Key
				minted = append(minted, r.Key)
			}
			out = append(append(append([]string(nil), out[:at]...), p.Keys...), out[at:]...)
			if !strictly(out) {
				t.Fatalf("insert of %d at %d: not strictly ordered: %q", n, at, out)
			}
			for _, k := range minted {
				if len(k) > MaxGen || !isDigit(k[len(k)-1]) {
					t.Fatalf("key %q: over %d bytes or ends outside the Alphabet", k, MaxGen)
				}
				for i := 0; i < len(k); i++ {
					if !Graphic(k[i]) {
						t.Fatalf("minted key %q has a byte that is not graphic ASCII (a space, a control byte)", k)
					}
				}
			}
		}
	}
	// between neighbours that share or straddle a space: no key minted
	// holds one, and it still sorts between them
	// (none fits where every key between starts with a space)
	for _, c := range []struct {
		lo, hi string
		fits   bool
	}{{"a", "a!", false}, {"a ", "a!", false}, {"a b", "a c", false}, {"a b", "b", true}, {"a!", "a0", true},
		{"", " ", false}, {" x", "!", false}, {" x", "!b", true}, {"a", "a\x01", false}} {
		for _, n := range []int{1, 3} {
			ks, ok := Wide(c.lo, c.hi, n)
			for _, k := range ks {
				if strings.ContainsRune(k, ' ') || !inside(c.lo, c.hi, k) {
					t.Fatalf("Wide(%q, %q, %d) = %q", c.lo, c.hi, n, ks)
				}
			}
			if ok != c.fits {
				t.Errorf("Wide(%q, %q, %d): %v, %q", c.lo, c.hi, n, ok, ks)
			}
		}
	}
	// no printable key between "a" and "a " (only control bytes): none
	if ks, ok := Wide("a", "a ", 1); ok {
		t.Fatalf("Wide(a, a space) = %q", ks)
	}
}
