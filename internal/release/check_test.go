package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestManifestTemplate holds manifest.json (the .mcpb template) to the
// official CLI's schema, to the bundle's layout, and to serve: it runs
// serve, every environment variable it sets is one server.json names (and
// TestServerJSON holds those to serve --help), the PDS URL, handle and app
// password come from user_config (the password masked), and every
// user_config value it uses has a default, since a host substitutes only
// values it has: an unset optional one would reach serve as the literal
// text ${user_config.KEY}.
func TestManifestTemplate(t *testing.T) {
	r := root(t)
	if got := mcpb(t, "validate", filepath.Join(r, "manifest.json")); !strings.Contains(got, "validation passes") {
		t.Fatalf("mcpb validate manifest.json: %s", got)
	}
	raw, err := os.ReadFile(filepath.Join(r, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bundleManifest(raw, "0.9.0"); err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var sj struct {
		Packages []struct {
			EnvironmentVariables []struct {
				Name     string `json:"name"`
				IsSecret bool   `json:"isSecret"`
			} `json:"environmentVariables"`
		} `json:"packages"`
	}
	if err := readJSON(filepath.Join(r, "server.json"), &sj); err != nil {
		t.Fatal(err)
	}
	secret := map[string]bool{}
	for _, p := range sj.Packages {
		for _, e := range p.EnvironmentVariables {
			secret[e.Name] = e.IsSecret
		}
	}
	if a := m.Server.MCPConfig.Args; len(a) != 1 || a[0] != "serve" {
		t.Errorf("mcp_config.args %v, want [serve]", a)
	}
	want := map[string]string{"BULLETED_PDS": "pds_url", "BULLETED_IDENTIFIER": "handle", "BULLETED_APP_PASSWORD": "app_password"}
	for name, key := range want {
		if got := m.Server.MCPConfig.Env[name]; got != "${user_config."+key+"}" {
			t.Errorf("mcp_config.env[%s] = %q, want ${user_config.%s}", name, got, key)
		}
	}
	for name, value := range m.Server.MCPConfig.Env {
		isSecret, ok := secret[name]
		if !ok {
			t.Errorf("mcp_config.env sets %s, which server.json does not name (so serve may not read it)", name)
		}
		key, ok := strings.CutPrefix(value, "${user_config.")
		if !ok {
			continue
		}
		key = strings.TrimSuffix(key, "}")
		uc, ok := m.UserConfig[key]
		switch {
		case !ok:
			t.Errorf("%s takes ${user_config.%s}, which user_config does not declare", name, key)
		case uc.Type != "string":
			t.Errorf("user_config.%s: type %q, want string", key, uc.Type)
		case !uc.Required && uc.Default == nil:
			t.Errorf("user_config.%s is optional without a default: unset, %s would be the literal %s", key, name, value)
		case uc.Sensitive != isSecret:
			t.Errorf("user_config.%s: sensitive %t, but server.json's %s has isSecret %t", key, uc.Sensitive, name, isSecret)
		}
	}
	if !m.UserConfig["app_password"].Sensitive {
		t.Error("user_config.app_password is not sensitive: the host would show and store it in the clear")
	}
}

func TestCheckVersion(t *testing.T) {
	t.Parallel()
	ok := declared{ServerJSON: "0.9.0", Image: "ghcr.io/x/y:0.9.0", Manifest: "0.9.0"}
	var mismatch *VersionMismatchError
	var bad *BadVersionError
	cases := []struct {
		version string
		d       declared
		want    any // nil, &mismatch or &bad
	}{
		{"0.9.0", ok, nil},
		{"0.9.0-rc.1", ok, nil},
		{"0.9.0-dev+3fb693d1e2a4.dirty", ok, nil},
		{"0.10.0", ok, &mismatch},
		{"1.0.0-rc.1", ok, &mismatch},
		{"v0.9.0", ok, &bad},
		{"0.9", ok, &bad},
		{"0.9.0", declared{ServerJSON: "0.9.0", Image: "ghcr.io/x/y:0.9.0", Manifest: "0.8.0"}, &mismatch},
		{"0.9.0", declared{ServerJSON: "0.9.0-rc.1", Image: "ghcr.io/x/y:0.9.0-rc.1", Manifest: "0.9.0-rc.1"}, &bad},
	}
	for _, c := range cases {
		err := checkVersion(c.version, c.d)
		switch w := c.want.(type) {
		case nil:
			if err != nil {
				t.Errorf("%s with %+v: %v", c.version, c.d, err)
			}
		case **VersionMismatchError:
			if !errors.As(err, w) {
				t.Errorf("%s with %+v: %v, want a VersionMismatchError", c.version, c.d, err)
			}
		case **BadVersionError:
			if !errors.As(err, w) {
				t.Errorf("%s with %+v: %v, want a BadVersionError", c.version, c.d, err)
			}
		}
	}
	if err := checkVersion("0.9.0", declared{ServerJSON: "0.9.0", Image: "ghcr.io/x/y:0.8.0", Manifest: "0.9.0"}); err == nil {
		t.Error("an image not tagged with server.json's version passed")
	}
	// The repository's own files agree.
	d, err := readDeclared(root(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkVersion(d.ServerJSON, d); err != nil {
		t.Errorf("the repository's release files: %v", err)
	}
}

// TestGitVersion derives versions in a scratch repository: untagged, a
// dev version of server.json's; tagged, the tag's; uncommitted changes
// mark the commit, and refuse a tagged build.
func TestGitVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gitT := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	gitT("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("1"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitT("add", "f")
	gitT("commit", "-q", "-m", "one")
	rev := gitT("rev-parse", "--short=12", "HEAD")

	check := func(wantV, wantC string) {
		t.Helper()
		v, c, err := gitVersion(dir, "0.9.0")
		if err != nil || v != wantV || c != wantC {
			t.Fatalf("gitVersion: %q, %q, %v; want %q, %q", v, c, err, wantV, wantC)
		}
	}
	check("0.9.0-dev+"+rev, rev)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	check("0.9.0-dev+"+rev+".dirty", rev+"-dirty")
	gitT("checkout", "-q", "f")
	gitT("tag", "v0.9.0")
	gitT("tag", "other")
	check("0.9.0", rev)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gitVersion(dir, "0.9.0"); err == nil || !strings.Contains(err.Error(), "uncommitted") {
		t.Fatalf("a tagged build of a changed tree: %v, want refused", err)
	}
	var ge *GitError
	if _, _, err := gitVersion(t.TempDir(), "0.9.0"); !errors.As(err, &ge) {
		t.Fatalf("outside a repository: %v, want a GitError", err)
	}
}

// TestBuildRefuses: the checks run before anything is built.
func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	r := root(t)
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "old.tar.gz"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var ne *OutNotEmptyError
	if _, err := Build(context.Background(), Options{Root: r, Out: out, Version: "0.0.0-x"}); errors.As(err, &ne) {
		t.Fatalf("a version not server.json's checked after the out directory: %v", err)
	}
	d, err := readDeclared(r)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Build(context.Background(), Options{Root: r, Out: out, Version: d.ServerJSON}); !errors.As(err, &ne) {
		t.Fatalf("non-empty out directory: %v, want an OutNotEmptyError", err)
	}
	var mm *VersionMismatchError
	if _, err := Build(context.Background(), Options{Root: r, Out: t.TempDir(), Version: "99.0.0"}); !errors.As(err, &mm) {
		t.Fatalf("version 99.0.0: %v, want a VersionMismatchError", err)
	}
}

func TestBundleManifestRefuses(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(root(t), "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var me *ManifestError
	for _, c := range []struct{ from, to string }{
		{`"manifest_version": "0.3"`, `"manifest_version": "0.2"`},
		{`${__dirname}/server/win32/bulleted-mcp.exe`, `server/win32/bulleted-mcp.exe`},
		{`${__dirname}/server/linux/bulleted-mcp`, `${__dirname}/server/linux/amd64/bulleted-mcp`},
		{`"type": "binary"`, `"type": "node"`},
	} {
		bad := strings.Replace(string(raw), c.from, c.to, 1)
		if bad == string(raw) {
			t.Fatalf("manifest.json has no %s", c.from)
		}
		if _, err := bundleManifest([]byte(bad), "0.9.0"); !errors.As(err, &me) {
			t.Errorf("%s instead of %s: %v, want a ManifestError", c.to, c.from, err)
		}
	}
}
