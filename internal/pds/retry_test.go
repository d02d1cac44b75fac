package pds

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A server's pause is bounded by what its limit can mean.
func TestRetryAfterCapped(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name    string
		headers map[string]string
		want    time.Duration
		note    string // a part of the notice ("": none)
	}{
		{"seconds", map[string]string{"Retry-After": "1"}, time.Second, ""},
		// without a RateLimit-Policy: at most the budget's hour, then probe
		{"a day, no policy", map[string]string{"Retry-After": "86400"}, time.Hour, "asked to wait 86400 s without naming its limit (no RateLimit-Policy); capped at 1 h"},
		{"ten years", map[string]string{"Retry-After": "315360000"}, time.Hour, "no RateLimit-Policy"},
		{"ten years, hourly policy", map[string]string{"Retry-After": "315360000", "RateLimit-Policy": "5000;w=3600"}, time.Hour, "longer than the 1 h window its RateLimit-Policy names"},
		{"two days, daily policy", map[string]string{"Retry-After": "172800", "RateLimit-Policy": "35000;w=86400"}, 24 * time.Hour, "24 h window"},
		{"daily policy", map[string]string{"RateLimit-Reset": "7200", "RateLimit-Policy": "35000;w=86400"}, 2 * time.Hour, ""},
		{"reset epoch far away", map[string]string{"RateLimit-Reset": "4102444800", "RateLimit-Policy": "5000;w=3600"}, time.Hour, "RateLimit-Policy"},
		{"in the past", map[string]string{"Retry-After": "Mon, 01 Jan 2001 00:00:00 GMT"}, 0, ""},
		{"overflowing", map[string]string{"Retry-After": "99999999999999999"}, time.Hour, "no RateLimit-Policy"},
		{"garbage", map[string]string{"Retry-After": "soon"}, time.Minute, ""},
		{"nothing", map[string]string{}, time.Minute, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.headers {
				h.Set(k, v)
			}
			until, note := retryAfter(h, now)
			if got := until.Sub(now); got != c.want {
				t.Fatalf("pause %s, want %s", got, c.want)
			}
			if (c.note == "") != (note == "") || !strings.Contains(note, c.note) {
				t.Fatalf("notice %q, want one with %q", note, c.note)
			}
		})
	}
}
