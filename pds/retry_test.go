package pds

import (
	"net/http"
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
	}{
		{"seconds", map[string]string{"Retry-After": "1"}, time.Second},
		{"ten years", map[string]string{"Retry-After": "315360000"}, 24 * time.Hour},
		{"ten years, hourly policy", map[string]string{"Retry-After": "315360000", "RateLimit-Policy": "5000;w=3600"}, time.Hour},
		{"daily policy", map[string]string{"RateLimit-Reset": "7200", "RateLimit-Policy": "35000;w=86400"}, 2 * time.Hour},
		{"reset epoch far away", map[string]string{"RateLimit-Reset": "4102444800", "RateLimit-Policy": "5000;w=3600"}, time.Hour},
		{"in the past", map[string]string{"Retry-After": "Mon, 01 Jan 2001 00:00:00 GMT"}, 0},
		{"overflowing", map[string]string{"Retry-After": "99999999999999999"}, 24 * time.Hour},
		{"garbage", map[string]string{"Retry-After": "soon"}, time.Minute},
		{"nothing", map[string]string{}, time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range c.headers {
				h.Set(k, v)
			}
			if got := retryAfter(h, now).Sub(now); got != c.want {
				t.Fatalf("pause %s, want %s", got, c.want)
			}
		})
	}
}
