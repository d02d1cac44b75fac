package main

import (
	"bytes"
	"debug/macho"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
)

// The .mcpb desktop extension (MCPB manifest 0.3): a zip holding
// manifest.json and the binaries. A manifest chooses its command by
// operating system only (mcp_config.platform_overrides, keyed by Node's
// process.platform), not by architecture, so the bundle holds:
//
//	server/darwin/bulleted-mcp       both macOS binaries as one universal (fat) Mach-O file
//	server/win32/bulleted-mcp.exe    windows/amd64 (Windows on Arm runs it emulated)
//	server/linux/bulleted-mcp        a POSIX sh launcher that execs amd64/ or arm64/ by uname -m
//	server/linux/amd64/bulleted-mcp
//	server/linux/arm64/bulleted-mcp
//
// manifest.json at the repository's top is the template: the build sets
// its version and checks that its commands name these files.

// bundlePaths are the commands the manifest must name, per platform
// (process.platform), as paths in the bundle.
var bundlePaths = map[string]string{
	"darwin": "server/darwin/bulleted-mcp",
	"win32":  "server/win32/bulleted-mcp.exe",
	"linux":  "server/linux/bulleted-mcp",
}

// linuxLauncher picks the linux binary for the machine.
const linuxLauncher = `#!/bin/sh
# Runs the bulleted-mcp binary for this machine's architecture.
dir=$(dirname "$0")
case $(uname -m) in
x86_64 | amd64) exec "$dir/amd64/bulleted-mcp" "$@" ;;
aarch64 | arm64) exec "$dir/arm64/bulleted-mcp" "$@" ;;
*) echo "bulleted-mcp: no linux build for $(uname -m) in this extension (amd64 and arm64 only)" >&2; exit 1 ;;
esac
`

// ManifestError is a manifest.json template that does not fit the bundle.
type ManifestError struct{ Problem string }

func (e *ManifestError) Error() string {
	return "manifest.json (the .mcpb template): " + e.Problem
}

// bundleManifest is the template with version set, checked against
// bundlePaths.
func bundleManifest(template []byte, version string) ([]byte, error) {
	var m map[string]any
	if err := json.Unmarshal(template, &m); err != nil {
		return nil, &ManifestError{err.Error()}
	}
	if v, _ := m["manifest_version"].(string); v != "0.3" {
		return nil, &ManifestError{fmt.Sprintf("manifest_version %q; the release build packs MCPB 0.3", v)}
	}
	var mf struct {
		Server struct {
			Type       string `json:"type"`
			EntryPoint string `json:"entry_point"`
			MCPConfig  struct {
				Command   string                              `json:"command"`
				Overrides map[string]struct{ Command string } `json:"platform_overrides"`
			} `json:"mcp_config"`
		} `json:"server"`
	}
	if err := json.Unmarshal(template, &mf); err != nil {
		return nil, &ManifestError{err.Error()}
	}
	if mf.Server.Type != "binary" {
		return nil, &ManifestError{fmt.Sprintf("server.type %q, not binary", mf.Server.Type)}
	}
	for platform, path := range bundlePaths {
		cmd := mf.Server.MCPConfig.Command
		if o, ok := mf.Server.MCPConfig.Overrides[platform]; ok && o.Command != "" {
			cmd = o.Command
		}
		if cmd != "${__dirname}/"+path {
			return nil, &ManifestError{fmt.Sprintf("on %s the command is %q; the bundle has the binary at ${__dirname}/%s", platform, cmd, path)}
		}
	}
	if mf.Server.EntryPoint != bundlePaths["darwin"] {
		return nil, &ManifestError{fmt.Sprintf("server.entry_point %q; the default command's binary is %s", mf.Server.EntryPoint, bundlePaths["darwin"])}
	}
	// Set the version in the template's text, which keeps its order and
	// layout: the first "version" key is the top-level one (checked).
	loc := versionKey.FindIndex(template)
	if loc == nil {
		return nil, &ManifestError{"no \"version\""}
	}
	out := slices.Concat(template[:loc[0]], []byte(`"version": `+strconv.Quote(version)), template[loc[1]:])
	var check struct{ Version string }
	if err := json.Unmarshal(out, &check); err != nil || check.Version != version {
		return nil, &ManifestError{"its first \"version\" key is not the top-level one: put the top-level version before any other"}
	}
	return out, nil
}

// versionKey is a "version" key with its string value.
var versionKey = regexp.MustCompile(`"version"\s*:\s*"[^"]*"`)

// bundleName is the .mcpb's file name.
func bundleName(version string) string { return "bulleted-mcp-" + version + ".mcpb" }

// writeBundle packs the .mcpb into out from the built binaries.
func writeBundle(root, out, version string, built map[Target]string) (string, error) {
	template, err := os.ReadFile(filepath.Join(root, "manifest.json"))
	if err != nil {
		return "", err
	}
	manifest, err := bundleManifest(template, version)
	if err != nil {
		return "", err
	}
	darwin, err := universal(built[Target{"darwin", "amd64"}], built[Target{"darwin", "arm64"}])
	if err != nil {
		return "", err
	}
	name := bundleName(version)
	err = writeZip(filepath.Join(out, name), []entry{
		{name: "manifest.json", mode: 0o644, data: manifest},
		{name: bundlePaths["darwin"], mode: 0o755, data: darwin},
		{name: bundlePaths["win32"], mode: 0o755, path: built[Target{"windows", "amd64"}]},
		{name: bundlePaths["linux"], mode: 0o755, data: []byte(linuxLauncher)},
		{name: "server/linux/amd64/bulleted-mcp", mode: 0o755, path: built[Target{"linux", "amd64"}]},
		{name: "server/linux/arm64/bulleted-mcp", mode: 0o755, path: built[Target{"linux", "arm64"}]},
	})
	return name, err
}

// universal joins Mach-O binaries into one fat (universal) file, as lipo
// -create does: a big-endian header, one fat_arch record per binary, each
// binary at an offset aligned to 2^14 (the arm64 page size). Each slice
// keeps its own code signature (the Go linker signs darwin binaries ad
// hoc).
func universal(paths ...string) ([]byte, error) {
	const align = 14
	type slice struct {
		cpu, sub uint32
		data     []byte
	}
	var slices []slice
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		f, err := macho.NewFile(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s is no Mach-O binary: %w", p, err)
		}
		slices = append(slices, slice{uint32(f.Cpu), f.SubCpu, data})
	}
	sort.Slice(slices, func(i, j int) bool { return slices[i].cpu < slices[j].cpu })
	var b bytes.Buffer
	be := binary.BigEndian
	b.Write(be.AppendUint32(be.AppendUint32(nil, macho.MagicFat), uint32(len(slices))))
	offset := uint32(8 + 20*len(slices))
	var offsets []uint32
	for _, s := range slices {
		offset = (offset + 1<<align - 1) &^ (1<<align - 1)
		offsets = append(offsets, offset)
		rec := be.AppendUint32(nil, s.cpu)
		rec = be.AppendUint32(rec, s.sub)
		rec = be.AppendUint32(rec, offset)
		rec = be.AppendUint32(rec, uint32(len(s.data)))
		rec = be.AppendUint32(rec, align)
		b.Write(rec)
		offset += uint32(len(s.data))
	}
	for i, s := range slices {
		b.Write(make([]byte, int(offsets[i])-b.Len()))
		b.Write(s.data)
	}
	return b.Bytes(), nil
}
