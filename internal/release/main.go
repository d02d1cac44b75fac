// Command release is the release build: it cross-compiles bulleted-mcp for
// linux, darwin and windows on amd64 and arm64 (static, CGO_ENABLED=0,
// -trimpath, the version set with -ldflags -X), writes an archive per
// platform (tar.gz; zip for windows), packs the Claude Desktop extension
// (bulleted-mcp-VERSION.mcpb, from the manifest.json template at the
// repository's top) and writes SHA256SUMS over all of them. It publishes
// nothing.
//
//	go run ./internal/release -out dist [-version 0.9.0]
//
// Without -version the version comes from git: the v-tag on HEAD (v0.9.0
// gives 0.9.0), else server.json's version with "-dev+REV" (a build between
// releases). Either way its major.minor.patch must be server.json's and
// manifest.json's version, so the registry entry, the image tag, the
// desktop extension and the binary say the same.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// Target is one platform of the release.
type Target struct{ GOOS, GOARCH string }

func (t Target) String() string { return t.GOOS + "/" + t.GOARCH }

// exe is the binary's file name on the target.
func (t Target) exe() string {
	if t.GOOS == "windows" {
		return "bulleted-mcp.exe"
	}
	return "bulleted-mcp"
}

// Targets are the six platforms released.
var Targets = []Target{
	{"linux", "amd64"}, {"linux", "arm64"},
	{"darwin", "amd64"}, {"darwin", "arm64"},
	{"windows", "amd64"}, {"windows", "arm64"},
}

// Result lists what a release build wrote, as paths under its out
// directory.
type Result struct {
	Version  string
	Commit   string
	Archives map[Target]string
	Bundle   string // the .mcpb
	Sums     string // SHA256SUMS
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("release", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "", "directory to write the archives, the .mcpb and SHA256SUMS to (created; must be empty if it exists)")
	ver := fs.String("version", "", "version to build (semver, no leading v); default: from the git tag on HEAD, else server.json's version with -dev+REV")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: go run ./internal/release -out DIR [-version VERSION]\n\nCross-compiles bulleted-mcp for linux, darwin, windows x amd64, arm64,\nwrites archives, a .mcpb desktop extension and SHA256SUMS to DIR.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		fs.Usage()
		return 2
	}
	root, err := repoRoot()
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return 1
	}
	start := time.Now()
	res, err := Build(ctx, Options{Root: root, Out: *out, Version: *ver, Log: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return 1
	}
	fmt.Fprintf(stdout, "bulleted-mcp %s (commit %s) in %s, %s:\n", res.Version, res.Commit, *out, time.Since(start).Round(time.Second))
	sums, err := os.ReadFile(filepath.Join(*out, res.Sums))
	if err != nil {
		fmt.Fprintln(stderr, "release:", err)
		return 1
	}
	stdout.Write(sums)
	return 0
}

// repoRoot is the directory holding go.mod, at or above the working
// directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s: run the release build inside the repository", dir)
		}
	}
}
