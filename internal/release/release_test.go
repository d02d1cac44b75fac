package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// mcpb runs the official MCPB CLI (@anthropic-ai/mcpb, pinned in
// e2e/package-lock.json and installed by e2e/setup.sh like the other
// Node.js parts) and returns its output; it fails the test when the CLI
// cannot be had or exits non-zero.
func mcpb(t *testing.T, args ...string) string {
	t.Helper()
	dir, node, err := pdstest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(dir, "node_modules", "@anthropic-ai", "mcpb", "dist", "cli", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the MCPB CLI is not installed (e2e/setup.sh, e2e/package.json devDependencies): %v", err)
	}
	out, err := exec.Command(node, append([]string{cli}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("mcpb %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func root(t *testing.T) string {
	t.Helper()
	r, err := pdstest.Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRelease runs the release build as CI does (without publishing) and
// checks what it wrote: six static binaries for their platforms in their
// archives, SHA256SUMS that verify (here and with sha256sum --check), and
// a .mcpb that the official CLI unpacks and validates, whose commands are
// the files the manifest names, and whose linux command runs `version`
// and prints the version built.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles six binaries")
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
		t.Fatalf("runs the linux/amd64 binary from the .mcpb: needs a linux/amd64 machine, not %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	r := root(t)
	d, err := readDeclared(r)
	if err != nil {
		t.Fatal(err)
	}
	version := d.ServerJSON + "-test.1+ci"
	out := filepath.Join(t.TempDir(), "dist")
	var stdout, stderr bytes.Buffer
	start := time.Now()
	if code := run(context.Background(), []string{"-out", out, "-version", version}, &stdout, &stderr); code != 0 {
		t.Fatalf("release build: exit %d\n%s", code, stderr.String())
	}
	t.Logf("release build in %s:\n%s%s", time.Since(start).Round(time.Second), stderr.String(), stdout.String())

	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// The six platforms, spelt out here rather than taken from Targets.
	six := []Target{
		{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"},
		{"darwin", "arm64"}, {"windows", "amd64"}, {"windows", "arm64"},
	}
	want := []string{"SHA256SUMS", bundleName(version)}
	for _, tg := range six {
		want = append(want, archiveName(version, tg))
	}
	if !sameSet(names, want) {
		t.Fatalf("release wrote %v, want %v", names, want)
	}

	// The checksums cover every artefact and verify.
	sums := checkSums(t, out)
	if len(sums) != len(want)-1 {
		t.Fatalf("SHA256SUMS lists %d files, want %d (every archive and the .mcpb)", len(sums), len(want)-1)
	}
	cmd := exec.Command("sha256sum", "--check", "--strict", "SHA256SUMS")
	cmd.Dir = out
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum --check: %v\n%s", err, b)
	}

	// Each archive holds its platform's binary.
	for _, tg := range six {
		bin := unarchive(t, filepath.Join(out, archiveName(version, tg)), tg)
		checkBinary(t, tg.String(), bin, tg)
	}

	// The .mcpb: the official CLI reads it and unpacks it; its manifest
	// validates; each platform's command is its binary; the linux command,
	// run as a host runs it, prints the version.
	bundle := filepath.Join(out, bundleName(version))
	mcpb(t, "info", bundle)
	unpacked := t.TempDir()
	mcpb(t, "unpack", bundle, unpacked)
	if got := mcpb(t, "validate", filepath.Join(unpacked, "manifest.json")); !strings.Contains(got, "validation passes") {
		t.Fatalf("mcpb validate: %s", got)
	}
	var m manifest
	raw, err := os.ReadFile(filepath.Join(unpacked, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != version || m.ManifestVersion != "0.3" {
		t.Fatalf("bundle manifest: version %q, manifest_version %q; want %q, 0.3", m.Version, m.ManifestVersion, version)
	}
	command := func(platform string) string {
		c := m.Server.MCPConfig.Command
		if o, ok := m.Server.MCPConfig.Overrides[platform]; ok && o.Command != "" {
			c = o.Command
		}
		return strings.ReplaceAll(c, "${__dirname}", unpacked)
	}
	darwin, err := os.ReadFile(command("darwin"))
	if err != nil {
		t.Fatal(err)
	}
	fat, err := macho.NewFatFile(bytes.NewReader(darwin))
	if err != nil {
		t.Fatalf("darwin command %s: not a universal binary: %v", command("darwin"), err)
	}
	var cpus []string
	for _, a := range fat.Arches {
		cpus = append(cpus, a.Cpu.String())
		if a.Type != macho.TypeExec {
			t.Errorf("darwin %s slice: type %v, want an executable", a.Cpu, a.Type)
		}
	}
	if !sameSet(cpus, []string{macho.CpuAmd64.String(), macho.CpuArm64.String()}) {
		t.Errorf("darwin universal binary holds %v, want amd64 and arm64", cpus)
	}
	checkBinary(t, "win32 command", command("win32"), Target{"windows", "amd64"})
	checkBinary(t, "linux amd64", filepath.Join(unpacked, "server/linux/amd64/bulleted-mcp"), Target{"linux", "amd64"})
	checkBinary(t, "linux arm64", filepath.Join(unpacked, "server/linux/arm64/bulleted-mcp"), Target{"linux", "arm64"})
	for _, c := range []string{command("linux"), filepath.Join(unpacked, "server/linux/amd64/bulleted-mcp")} {
		got, err := exec.Command(c, "version").CombinedOutput()
		if err != nil {
			t.Fatalf("%s version: %v\n%s", c, err, got)
		}
		if want := "bulleted-mcp " + version + " (commit "; !strings.HasPrefix(string(got), want) {
			t.Fatalf("%s version printed %q, want it to start %q", c, got, want)
		}
	}
}

type manifest struct {
	ManifestVersion string `json:"manifest_version"`
	Version         string `json:"version"`
	Server          struct {
		MCPConfig struct {
			Command   string                              `json:"command"`
			Args      []string                            `json:"args"`
			Env       map[string]string                   `json:"env"`
			Overrides map[string]struct{ Command string } `json:"platform_overrides"`
		} `json:"mcp_config"`
	} `json:"server"`
	UserConfig map[string]struct {
		Type      string  `json:"type"`
		Sensitive bool    `json:"sensitive"`
		Required  bool    `json:"required"`
		Default   *string `json:"default"`
	} `json:"user_config"`
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		if seen[x] == 0 {
			return false
		}
		seen[x]--
	}
	return true
}

// checkSums recomputes every file SHA256SUMS in dir lists.
func checkSums(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	line := regexp.MustCompile(`^([0-9a-f]{64})  (\S+)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			t.Fatalf("SHA256SUMS line %q is not \"HEX  NAME\"", sc.Text())
		}
		got, err := fileSHA256(filepath.Join(dir, m[2]))
		if err != nil {
			t.Fatal(err)
		}
		if got != m[1] {
			t.Errorf("%s: SHA-256 %s, SHA256SUMS says %s", m[2], got, m[1])
		}
		sums[m[2]] = m[1]
	}
	return sums
}

// unarchive extracts the binary from t's archive and checks the archive
// holds it executable, beside INSTALL.md.
func unarchive(t *testing.T, path string, tg Target) string {
	t.Helper()
	found := map[string]os.FileMode{}
	bin := filepath.Join(t.TempDir(), tg.exe())
	save := func(name string, mode os.FileMode, r io.Reader) {
		found[name] = mode
		if filepath.Base(name) != tg.exe() {
			return
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if tg.GOOS == "windows" {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			save(f.Name, f.Mode(), rc)
			rc.Close()
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			save(h.Name, h.FileInfo().Mode(), tr)
		}
	}
	dir := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".zip"), ".tar.gz") + "/"
	if len(found) != 2 || found[dir+tg.exe()]&0o111 == 0 || found[dir+"INSTALL.md"] == 0 {
		t.Fatalf("%s holds %v; want %s (executable) and %sINSTALL.md", filepath.Base(path), found, dir+tg.exe(), dir)
	}
	return bin
}

// checkBinary checks the file at path is a binary for tg, and for linux a
// static one (no interpreter, no shared libraries).
func checkBinary(t *testing.T, what, path string, tg Target) {
	t.Helper()
	switch tg.GOOS {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer f.Close()
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[tg.GOARCH]
		if f.Machine != want {
			t.Errorf("%s: ELF machine %v, want %v", what, f.Machine, want)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
				t.Errorf("%s: dynamically linked (%v); the release is static (CGO_ENABLED=0)", what, p.Type)
			}
		}
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer f.Close()
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[tg.GOARCH]
		if f.Cpu != want {
			t.Errorf("%s: Mach-O CPU %v, want %v", what, f.Cpu, want)
		}
	case "windows":
		f, err := pe.Open(path)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer f.Close()
		want := map[string]uint16{"amd64": pe.IMAGE_FILE_MACHINE_AMD64, "arm64": pe.IMAGE_FILE_MACHINE_ARM64}[tg.GOARCH]
		if f.Machine != want {
			t.Errorf("%s: PE machine %#x, want %#x", what, f.Machine, want)
		}
	}
	// -trimpath: no path of this machine's checkout in the binary.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := pdstest.Root(); r != "" && bytes.Contains(data, []byte(r)) {
		t.Errorf("%s holds the checkout's path %s: not built with -trimpath", what, r)
	}
}
