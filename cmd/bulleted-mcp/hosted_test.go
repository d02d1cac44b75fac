package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTrustedProxyFlag: --trusted-proxy takes addresses and CIDR prefixes,
// repeated or comma-separated, and refuses anything else; so does a
// malformed --rate-limit.
func TestTrustedProxyFlag(t *testing.T) {
	var l prefixList
	for _, v := range []string{"10.0.0.1", "192.168.0.0/16, ::1", "2001:db8::/32"} {
		if err := l.Set(v); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
	if got, want := l.String(), "10.0.0.1/32,192.168.0.0/16,::1/128,2001:db8::/32"; got != want {
		t.Fatalf("parsed %s, want %s", got, want)
	}
	for _, c := range []struct{ args, msg string }{
		{"--trusted-proxy proxy.example", "not an IP address or CIDR prefix"},
		{"--rate-limit token=lots", "the rate must be"},
	} {
		var stderr bytes.Buffer
		if code := runServe(strings.Fields(c.args), nil, &bytes.Buffer{}, &stderr); code != 2 || !strings.Contains(stderr.String(), c.msg) {
			t.Fatalf("%s: exit %d: %s", c.args, code, stderr.String())
		}
	}
}
