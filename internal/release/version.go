package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// semver is a semantic version without a leading v (semver.org's grammar,
// loosely): MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD].
var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// core is MAJOR.MINOR.PATCH of a semantic version.
func core(v string) string {
	m := semver.FindStringSubmatch(v)
	if m == nil {
		return ""
	}
	return m[1] + "." + m[2] + "." + m[3]
}

// BadVersionError is a version that is no semantic version.
type BadVersionError struct{ Version, From string }

func (e *BadVersionError) Error() string {
	return fmt.Sprintf("version %q (%s) is not a semantic version MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD] (no leading v: tag v0.9.0 builds 0.9.0)", e.Version, e.From)
}

// VersionMismatchError is a release version whose MAJOR.MINOR.PATCH is
// not the one a file of the repository declares.
type VersionMismatchError struct {
	Version string // the version being built
	File    string // server.json or manifest.json
	Says    string // the file's version
}

func (e *VersionMismatchError) Error() string {
	if e.File == "manifest.json" {
		return fmt.Sprintf("manifest.json (the .mcpb template) says version %s, server.json says %s: set manifest.json's version to %s (the two change together)", e.Says, e.Version, e.Version)
	}
	return fmt.Sprintf("building %s, but %s says version %s: set the version in server.json (and its image tag) and manifest.json to %s before tagging v%s, or build a version of %s (such as %s-rc.1)",
		e.Version, e.File, e.Says, core(e.Version), core(e.Version), e.Says, e.Says)
}

// declared are the versions the repository's release files declare.
type declared struct {
	ServerJSON string // server.json "version"
	Image      string // server.json's OCI package identifier
	Manifest   string // manifest.json "version"
}

func readDeclared(root string) (declared, error) {
	var d declared
	var sj struct {
		Version  string `json:"version"`
		Packages []struct {
			RegistryType string `json:"registryType"`
			Identifier   string `json:"identifier"`
		} `json:"packages"`
	}
	if err := readJSON(filepath.Join(root, "server.json"), &sj); err != nil {
		return d, err
	}
	d.ServerJSON = sj.Version
	for _, p := range sj.Packages {
		if p.RegistryType == "oci" {
			d.Image = p.Identifier
		}
	}
	var mf struct {
		Version string `json:"version"`
	}
	if err := readJSON(filepath.Join(root, "manifest.json"), &mf); err != nil {
		return d, err
	}
	d.Manifest = mf.Version
	return d, nil
}

func readJSON(path string, v any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// checkVersion holds version against the repository's declared versions:
// server.json's version is a release (MAJOR.MINOR.PATCH), its image is
// tagged with it, manifest.json's template says the same, and version is
// that release or a pre-release or build of it.
func checkVersion(version string, d declared) error {
	if core(d.ServerJSON) == "" || core(d.ServerJSON) != d.ServerJSON {
		return &BadVersionError{d.ServerJSON, "server.json's version, which must be MAJOR.MINOR.PATCH"}
	}
	if d.Manifest != d.ServerJSON {
		return &VersionMismatchError{Version: d.ServerJSON, File: "manifest.json", Says: d.Manifest}
	}
	if d.Image != "" && !strings.HasSuffix(d.Image, ":"+d.ServerJSON) {
		return fmt.Errorf("server.json's image %s is not tagged with its version %s: tag it :%s", d.Image, d.ServerJSON, d.ServerJSON)
	}
	if core(version) == "" {
		return &BadVersionError{version, "the version to build"}
	}
	if core(version) != d.ServerJSON {
		return &VersionMismatchError{Version: version, File: "server.json", Says: d.ServerJSON}
	}
	return nil
}

// gitVersion derives the version and commit from git: the v-tag on HEAD
// (v0.9.0: 0.9.0), else fallback (server.json's version) with -dev+REV.
// A tree with uncommitted changes gets -dirty on the commit (and .dirty on
// a dev version's build metadata).
func gitVersion(root, fallback string) (version, commit string, err error) {
	if commit, err = gitCommit(root); err != nil {
		return "", "", err
	}
	rev, dirty := strings.CutSuffix(commit, "-dirty")
	tags, err := git(root, "tag", "--points-at", "HEAD", "--list", "v[0-9]*")
	if err != nil {
		return "", "", err
	}
	var found []string
	for _, t := range strings.Fields(tags) {
		if core(strings.TrimPrefix(t, "v")) != "" {
			found = append(found, strings.TrimPrefix(t, "v"))
		}
	}
	switch {
	case len(found) > 1:
		return "", "", fmt.Errorf("HEAD has several version tags (%s): build one with -version", strings.Join(found, ", "))
	case len(found) == 1 && !dirty:
		return found[0], commit, nil
	case len(found) == 1:
		return "", "", fmt.Errorf("HEAD is tagged v%s but the tree has uncommitted changes: commit or stash them, or build another version with -version", found[0])
	}
	version = fallback + "-dev+" + rev
	if dirty {
		version += ".dirty"
	}
	return version, commit, nil
}

// GitError is a git command that failed.
type GitError struct {
	Args   []string
	Err    error
	Stderr string
}

func (e *GitError) Error() string {
	return fmt.Sprintf("git %s: %v: %s (the release build reads the version from git; or give -version)", strings.Join(e.Args, " "), e.Err, strings.TrimSpace(e.Stderr))
}

func (e *GitError) Unwrap() error { return e.Err }

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", &GitError{Args: args, Err: err, Stderr: errb.String()}
	}
	return strings.TrimSpace(out.String()), nil
}
