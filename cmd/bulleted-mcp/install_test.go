package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestInstallCommand runs install through the CLI against a temporary
// file per client: added with serve and the flags after --, a second run
// "already configured", --dry-run a diff and no file, a malformed file an
// error and no change, Claude Code's own command printed, serve flags that
// serve does not take refused before anything is written.
func TestInstallCommand(t *testing.T) {
	t.Parallel()
	const exe = "/opt/bulleted/bulleted-mcp"
	inst := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(append([]string{"install"}, args...), nil, &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, client := range []string{"claude-desktop", "claude-code", "vscode", "cursor"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "config.json")
		// --dry-run: the diff, no file
		code, out, errs := inst(client, "--config", path, "--command", exe, "--dry-run", "--", "--read-only")
		if code != 0 || !strings.Contains(out, "+++ "+path) || !strings.Contains(out, `+      "command": "`+exe+`"`) || !strings.Contains(errs, "not written") {
			t.Fatalf("%s --dry-run: exit %d\n%s\n%s", client, code, out, errs)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("%s --dry-run wrote %s: %v", client, path, err)
		}
		// flags before and after the client
		code, out, errs = inst("--config", path, client, "--command", exe, "--", "--read-only")
		if code != 0 || !strings.Contains(out, "added bulleted to "+path) {
			t.Fatalf("%s: exit %d\n%s\n%s", client, code, out, errs)
		}
		raw, _ := os.ReadFile(path)
		var f map[string]map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v\n%s", client, err, raw)
		}
		key := "mcpServers"
		if client == "vscode" {
			key = "servers"
		}
		if e := f[key]["bulleted"]; e.Command != exe || !slices.Equal(e.Args, []string{"serve", "--read-only"}) {
			t.Fatalf("%s: entry %+v\n%s", client, e, raw)
		}
		code, out, _ = inst(client, "--config", path, "--command", exe, "--", "--read-only")
		if after, _ := os.ReadFile(path); code != 0 || !strings.Contains(out, "already configured") || !bytes.Equal(after, raw) {
			t.Fatalf("%s second run: exit %d %q; file changed %v", client, code, out, !bytes.Equal(after, raw))
		}
		if m, _ := filepath.Glob(path + ".bak-*"); len(m) != 0 {
			t.Fatalf("%s: backups of a file that was missing, or of an unchanged one: %q", client, m)
		}
		// malformed: exit 1, the file as it was
		bad := filepath.Join(dir, "bad.json")
		os.WriteFile(bad, []byte(`{"mcpServers": `), 0o600)
		code, _, errs = inst(client, "--config", bad, "--command", exe)
		if got, _ := os.ReadFile(bad); code != 1 || !strings.Contains(errs, "cannot parse") || !strings.Contains(errs, "nothing written") || string(got) != `{"mcpServers": ` {
			t.Fatalf("%s malformed: exit %d %q; file %q", client, code, errs, got)
		}
	}
	// Claude Code without --config: its own command, no file
	code, out, errs := inst("claude-code", "--command", exe, "--", "--pds", "https://pds.example")
	if want := "claude mcp add --scope user bulleted -- " + exe + " serve --pds https://pds.example\n"; code != 0 || out != want {
		t.Fatalf("claude-code: exit %d %q %q, want %q", code, out, errs, want)
	}
	dir := t.TempDir()
	for _, args := range [][]string{
		{"cursor", "--config", filepath.Join(dir, "a.json"), "--command", exe, "--", "--no-such-flag"},
		{"cursor", "--config", filepath.Join(dir, "b.json"), "--command", exe, "--", "--http"},
		{"cursor", "--config", filepath.Join(dir, "c.json"), "--command", exe, "--", "--help"},
		{"cursor", "--config", filepath.Join(dir, "d.json"), "--command", exe, "--", "stray"},
		{"cursor", "--config", filepath.Join(dir, "e.json"), "--command", exe, "stray"},
		{"emacs", "--config", filepath.Join(dir, "f.json"), "--command", exe},
		{},
	} {
		if code, out, errs := inst(args...); code != 2 {
			t.Errorf("install %q: exit %d, want 2\n%s%s", args, code, out, errs)
		}
	}
	// a word after the client, not after --: said so
	if _, _, errs := inst("cursor", "--config", filepath.Join(dir, "e.json"), "--command", exe, "stray"); !strings.Contains(errs, "serve's flags go after --") {
		t.Errorf("a stray word: %q", errs)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused installs wrote %d files", len(entries))
	}
	if code, out, errs := inst("cursor", "--config", filepath.Join(dir, "g.json"), "--command", "/tmp/go-build42/b001/exe/bulleted-mcp"); code != 1 || !strings.Contains(errs, "go run") {
		t.Errorf("a go run binary: exit %d %s%s", code, out, errs)
	}
	var help bytes.Buffer
	if code := run([]string{"--help"}, nil, &help, &help); code != 0 || !strings.Contains(help.String(), "  install ") {
		t.Errorf("usage does not list install: %s", help.String())
	}
}

// TestInstallDocs: every "bulleted-mcp install CLIENT …" line that
// docs/install.md gives runs (as a dry run against a temporary file): a
// client renamed or a serve flag removed fails here rather than for a
// reader.
func TestInstallDocs(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := regexp.MustCompile(`(?m)^bulleted-mcp install (\S+)([^#\n]*)`).FindAllStringSubmatch(string(raw), -1)
	if len(lines) < 4 {
		t.Fatalf("found %d install command lines in docs/install.md", len(lines))
	}
	for i, m := range lines {
		args := append([]string{"install", m[1], "--config", filepath.Join(t.TempDir(), "c.json"), "--command", "/opt/bulleted-mcp", "--dry-run"}, strings.Fields(m[2])...)
		var out bytes.Buffer
		if code := run(args, nil, &out, &out); code != 0 {
			t.Errorf("docs/install.md line %d %q: exit %d: %s", i, m[0], code, out.String())
		}
	}
}
