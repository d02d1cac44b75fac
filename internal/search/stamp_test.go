package search

import (
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestStampKeepsOrder: a time kept in 8 bytes compares with a query's
// bounds as the time.Time did, including times int64 nanoseconds cannot
// hold (kept at the nearest bound), and none is never in a range.
func TestStampKeepsOrder(t *testing.T) {
	at := func(s string) time.Time {
		x, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	times := []string{"0001-01-01T00:00:00.000000001Z", "1500-06-01T00:00:00Z", "1969-12-31T23:59:59.999999999Z",
		"1970-01-01T00:00:00Z", "2026-03-10T09:00:00.123456789Z", "2026-03-10T09:00:00.123456790Z", "2300-01-01T00:00:00Z", "9999-12-31T23:59:59Z"}
	bounds := []string{"1700-01-01T00:00:00Z", "1970-01-01T00:00:00Z", "2026-03-10T09:00:00.123456789Z", "2262-01-01T00:00:00Z"}
	for _, ts := range times {
		for _, fs := range bounds {
			for _, us := range bounds {
				x, from, to := at(ts), at(fs), at(us)
				want := !x.Before(from) && !x.After(to)
				if got := inRange(stampOf(x), stampOf(from), stampOf(to)); got != want {
					t.Errorf("%s in [%s, %s]: %v, want %v", ts, fs, us, got, want)
				}
			}
		}
		if !inRange(stampOf(at(ts)), minStamp, maxStamp) {
			t.Errorf("%s is not within the unbounded range", ts)
		}
	}
	if inRange(stampOf(time.Time{}), minStamp, maxStamp) {
		t.Error("no time is within a range")
	}
}

// An entry stays one 48-byte allocation a bullet (issue #26): its text
// lives in its block's corpus only, its layout is an index, its note's CID
// is with its facets (most bullets have neither).
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 48 {
		t.Fatalf("an entry is %d bytes, more than 48", n)
	}
}

// appendLower is strings.ToLower, appended.
func FuzzAppendLower(f *testing.F) {
	for _, s := range []string{"", "Budget REVIEW", "ÀÉÎ straße İstanbul", "\xff\xfeA", "ǅungla", "K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := string(appendLower([]byte("x"), s)); got != "x"+strings.ToLower(s) {
			t.Fatalf("appendLower(%q) = %q, want %q", s, got[1:], strings.ToLower(s))
		}
	})
}
