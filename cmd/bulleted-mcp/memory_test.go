package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestMemoryFlags: --memory takes 2GiB, 512MiB, bytes or off; a bad or
// tiny one is refused; none defaults to the container's limit or the RAM
// (said where from).
func TestMemoryFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
		from string
		bad  bool
	}{
		{[]string{"--memory", "2GiB"}, 2 << 30, "--memory", false},
		{[]string{"--memory", "512MiB", "--idle", "5m"}, 512 << 20, "--memory", false},
		{[]string{"--memory", "1073741824"}, 1 << 30, "--memory", false},
		{[]string{"--memory", "off"}, 0, "--memory", false},
		{[]string{"--memory", "1MiB"}, 0, "", true},
		{[]string{"--memory", "lots"}, 0, "", true},
		{nil, -1, "", false},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		m := addMemoryFlags(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		got, from, err := m.budget()
		switch {
		case c.bad:
			if err == nil {
				t.Errorf("%q: got %d, want an error", c.args, got)
			}
		case err != nil:
			t.Errorf("%q: %v", c.args, err)
		case c.want < 0:
			if got <= 0 || !(strings.Contains(from, "container") || strings.Contains(from, "RAM")) {
				t.Errorf("default: %d from %q; want the container's limit or a share of the RAM", got, from)
			}
		case got != c.want || !strings.Contains(from, c.from):
			t.Errorf("%q: %d from %q, want %d from %s", c.args, got, from, c.want, c.from)
		}
	}
}
