package main

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// version and commit are set by the release build (internal/release):
// -ldflags "-X main.version=0.9.0 -X main.commit=REV". A go install or go
// build leaves them empty, and the version comes from the build info.
var version, commit string

func init() {
	bi, ok := debug.ReadBuildInfo()
	server.Version = versionOf(version, bi, ok)
}

// runVersion prints the version and the commit the binary was built from:
// the release build's, else the Go toolchain's record (debug.ReadBuildInfo).
func runVersion(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: bulleted-mcp version")
		return 2
	}
	bi, ok := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(version, commit, bi, ok))
	return 0
}

// versionOf is the version the server reports (serverInfo.version): the
// release build's, else the module version go install recorded, else
// "(devel)" (go build or go run in a checkout).
func versionOf(ldVersion string, bi *debug.BuildInfo, ok bool) string {
	if ldVersion != "" {
		return ldVersion
	}
	if ok && bi != nil && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "(devel)"
}

// versionLine is "bulleted-mcp VERSION (commit REV[, modified], GO)". The
// release build sets VERSION and REV (ldVersion, ldCommit); otherwise they
// come from the build info: "(devel)" is a build from a checkout (go build,
// go run), whose commit comes from the vcs settings when the build had them.
func versionLine(ldVersion, ldCommit string, bi *debug.BuildInfo, ok bool) string {
	if ldVersion == "" && (!ok || bi == nil) {
		return "bulleted-mcp (unknown version: built without module information)"
	}
	v := versionOf(ldVersion, bi, ok)
	rev, modified, goVersion := ldCommit, "", "unknown Go"
	if ok && bi != nil {
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if rev == "" {
					rev = s.Value
				}
			case "vcs.modified":
				if s.Value == "true" && ldCommit == "" {
					modified = ", modified"
				}
			}
		}
	}
	if rev == "" {
		rev = "unknown"
	}
	return fmt.Sprintf("bulleted-mcp %s (commit %s%s, %s)", v, rev, modified, goVersion)
}
