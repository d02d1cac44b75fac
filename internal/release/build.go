package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Options for Build.
type Options struct {
	Root    string    // the repository (go.mod's directory)
	Out     string    // where to write; created, and must be empty if it exists
	Version string    // "": from git (gitVersion)
	Log     io.Writer // progress, one line per step; nil: none
}

// OutNotEmptyError is an out directory that already holds files: a
// release never mixes with an earlier one's artefacts.
type OutNotEmptyError struct{ Dir string }

func (e *OutNotEmptyError) Error() string {
	return fmt.Sprintf("%s is not empty: remove it or give another -out (a release never mixes with an earlier one's files)", e.Dir)
}

// BuildError is a go build that failed for one target.
type BuildError struct {
	Target Target
	Err    error
	Output string
}

func (e *BuildError) Error() string {
	return fmt.Sprintf("go build for %s: %v\n%s", e.Target, e.Err, strings.TrimSpace(e.Output))
}

func (e *BuildError) Unwrap() error { return e.Err }

// Build runs the release build: the six binaries, their archives, the
// .mcpb and SHA256SUMS, in o.Out.
func Build(ctx context.Context, o Options) (*Result, error) {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	d, err := readDeclared(o.Root)
	if err != nil {
		return nil, err
	}
	res := &Result{Version: o.Version, Archives: map[Target]string{}}
	if res.Version == "" {
		if res.Version, res.Commit, err = gitVersion(o.Root, d.ServerJSON); err != nil {
			return nil, err
		}
	} else if res.Commit, err = gitCommit(o.Root); err != nil {
		return nil, err
	}
	if err := checkVersion(res.Version, d); err != nil {
		return nil, err
	}
	if err := emptyDir(o.Out); err != nil {
		return nil, err
	}
	bins, err := os.MkdirTemp("", "bulleted-release-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(bins)

	built, err := buildAll(ctx, o.Root, bins, res.Version, res.Commit, logf)
	if err != nil {
		return nil, err
	}
	readme, err := os.ReadFile(filepath.Join(o.Root, "docs", "install-release.md"))
	if err != nil {
		return nil, fmt.Errorf("the archives carry docs/install-release.md: %w", err)
	}
	var files []string
	for _, t := range Targets {
		name, err := writeArchive(o.Out, res.Version, t, built[t], readme)
		if err != nil {
			return nil, err
		}
		res.Archives[t] = name
		files = append(files, name)
		logf("wrote %s", name)
	}
	if res.Bundle, err = writeBundle(o.Root, o.Out, res.Version, built); err != nil {
		return nil, err
	}
	files = append(files, res.Bundle)
	logf("wrote %s", res.Bundle)
	if res.Sums, err = writeSums(o.Out, files); err != nil {
		return nil, err
	}
	return res, nil
}

// gitCommit is HEAD's short commit, with -dirty for uncommitted changes.
func gitCommit(root string) (string, error) {
	rev, err := git(root, "rev-parse", "--short=12", "HEAD")
	if err != nil {
		return "", err
	}
	status, err := git(root, "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", err
	}
	if status != "" {
		rev += "-dirty"
	}
	return rev, nil
}

func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return &OutNotEmptyError{dir}
	}
	return nil
}

// parallel is how many go builds run at once. Two: a go build alone
// leaves a core idle for much of a cold build (linking, the big packages
// compiled one after another), and the release test runs on 2-core CI.
const parallel = 2

// buildAll builds every target into bins/GOOS-GOARCH/, parallel at a time;
// the first failure cancels the others.
func buildAll(ctx context.Context, root, bins, version, commit string, logf func(string, ...any)) (map[Target]string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		built = map[Target]string{}
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, parallel)
	)
	for _, t := range Targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				return
			}
			start := time.Now()
			path := filepath.Join(bins, t.GOOS+"-"+t.GOARCH, t.exe())
			err := goBuild(ctx, root, t, version, commit, path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
					cancel()
				}
				return
			}
			built[t] = path
			logf("built %s in %s", t, time.Since(start).Round(100*time.Millisecond))
		}()
	}
	wg.Wait()
	if first != nil {
		return nil, first
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return built, nil
}

// goBuild builds cmd/bulleted-mcp for t: static (CGO_ENABLED=0), without
// local paths (-trimpath), stripped, with the version and commit set. It
// uses the ordinary build cache, so a second release build (or one after
// the tests) compiles nothing again.
func goBuild(ctx context.Context, root string, t Target, version, commit, out string) error {
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", version, commit)
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", out, "./cmd/bulleted-mcp")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+t.GOOS, "GOARCH="+t.GOARCH)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return &BuildError{Target: t, Err: err, Output: output.String()}
	}
	return nil
}
