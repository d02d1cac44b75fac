package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}},
			true, "bulleted-mcp v1.4.0 (commit abc123, go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			true, "bulleted-mcp (devel) (commit abc123, modified, go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8"}, true, "bulleted-mcp (devel) (commit unknown, go1.26.8)"},
		{nil, false, "bulleted-mcp (unknown version: built without module information)"},
	}
	for _, c := range cases {
		if got := versionLine(c.bi, c.ok); got != c.want {
			t.Errorf("versionLine: %q, want %q", got, c.want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	t.Parallel()
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "bulleted-mcp ") {
		t.Fatalf("version printed %q", out.String())
	}
	if code := run([]string{"version", "extra"}, nil, &out, &errb); code != 2 {
		t.Fatalf("version with an argument: exit %d, want 2", code)
	}
}
