package main

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"
)

// archiveName is bulleted-mcp_VERSION_GOOS_GOARCH.tar.gz (.zip for
// windows): the version is a file-name-safe semver ('+' stays, as GitHub
// release assets allow it).
func archiveName(version string, t Target) string {
	ext := ".tar.gz"
	if t.GOOS == "windows" {
		ext = ".zip"
	}
	return fmt.Sprintf("bulleted-mcp_%s_%s_%s%s", version, t.GOOS, t.GOARCH, ext)
}

// entry is one file of an archive.
type entry struct {
	name string
	mode os.FileMode
	path string // read from here, or
	data []byte // this
}

func (e entry) open() (io.ReadCloser, int64, error) {
	if e.path == "" {
		return io.NopCloser(bytes.NewReader(e.data)), int64(len(e.data)), nil
	}
	f, err := os.Open(e.path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// modTime stamps every archive entry, so that a release's archives depend
// only on the binaries and texts in them.
var modTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// writeArchive writes t's archive to dir: a directory named like the
// archive holding the binary and INSTALL.md (docs/install-release.md).
func writeArchive(dir, version string, t Target, bin string, install []byte) (string, error) {
	name := archiveName(version, t)
	top := fmt.Sprintf("bulleted-mcp_%s_%s_%s/", version, t.GOOS, t.GOARCH)
	entries := []entry{
		{name: top + t.exe(), mode: 0o755, path: bin},
		{name: top + "INSTALL.md", mode: 0o644, data: install},
	}
	var err error
	if t.GOOS == "windows" {
		err = writeZip(filepath.Join(dir, name), entries)
	} else {
		err = writeTarGz(filepath.Join(dir, name), entries)
	}
	return name, err
}

func writeTarGz(path string, entries []entry) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw, _ := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		r, size, err := e.open()
		if err != nil {
			return err
		}
		err = tw.WriteHeader(&tar.Header{Name: e.name, Mode: int64(e.mode), Size: size, ModTime: modTime, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		if err == nil {
			_, err = io.Copy(tw, r)
		}
		r.Close()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func writeZip(path string, entries []entry) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	zw := zip.NewWriter(f)
	for _, e := range entries {
		r, _, err := e.open()
		if err != nil {
			return err
		}
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate, Modified: modTime}
		h.SetMode(e.mode) // the unix mode in the external attributes: unzip and mcpb unpack keep the binary executable
		w, err := zw.CreateHeader(h)
		if err == nil {
			_, err = io.Copy(w, r)
		}
		r.Close()
		if err != nil {
			return fmt.Errorf("%s: %s: %w", path, e.name, err)
		}
	}
	return zw.Close()
}

// writeSums writes SHA256SUMS over files (names in dir), in the format
// sha256sum --check reads: "HEX  NAME".
func writeSums(dir string, files []string) (string, error) {
	const name = "SHA256SUMS"
	sorted := append([]string(nil), files...)
	sort.Strings(sorted)
	out, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return "", err
	}
	w := bufio.NewWriter(out)
	for _, f := range sorted {
		sum, err := fileSHA256(filepath.Join(dir, f))
		if err != nil {
			out.Close()
			return "", err
		}
		fmt.Fprintf(w, "%s  %s\n", sum, f)
	}
	if err := w.Flush(); err != nil {
		out.Close()
		return "", err
	}
	return name, out.Close()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
