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
		ldVersion, ldCommit string
		bi                  *debug.BuildInfo
		ok                  bool
		want                string
	}{
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.4.0"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "false"}}},
			true, "bulleted-mcp v1.4.0 (commit abc123, go1.26.8)"},
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			true, "bulleted-mcp (devel) (commit abc123, modified, go1.26.8)"},
		{"", "", &debug.BuildInfo{GoVersion: "go1.26.8"}, true, "bulleted-mcp (devel) (commit unknown, go1.26.8)"},
		{"", "", nil, false, "bulleted-mcp (unknown version: built without module information)"},
		// The release build's -X values win over the build info (a
		// -buildvcs=false or -trimpath build has no vcs settings).
		{"0.9.0", "3fb693d1e2a4", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}},
			true, "bulleted-mcp 0.9.0 (commit 3fb693d1e2a4, go1.26.8)"},
		{"0.9.0-rc.1", "3fb693d1e2a4-dirty", &debug.BuildInfo{GoVersion: "go1.26.8",
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}},
			true, "bulleted-mcp 0.9.0-rc.1 (commit 3fb693d1e2a4-dirty, go1.26.8)"},
		{"0.9.0", "", nil, false, "bulleted-mcp 0.9.0 (commit unknown, unknown Go)"},
	}
	for _, c := range cases {
		if got := versionLine(c.ldVersion, c.ldCommit, c.bi, c.ok); got != c.want {
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
