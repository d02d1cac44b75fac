package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// runVersion prints the module version and the commit the binary was built
// from, as the Go toolchain recorded them (debug.ReadBuildInfo).
func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: bulleted-mcp version")
		return 2
	}
	fmt.Fprintln(stdout, versionLine(debug.ReadBuildInfo()))
	return 0
}

// versionLine is "bulleted-mcp VERSION (commit REV[, modified], GO)":
// "(devel)" is a build from a checkout (go build, go run), whose commit
// comes from the vcs settings when the build had them.
func versionLine(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "bulleted-mcp (unknown version: built without module information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("bulleted-mcp %s (commit %s%s, %s)", v, rev, modified, bi.GoVersion)
}
