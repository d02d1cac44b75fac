package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeFiles are the README and the docs pages it links (the reference
// moved there), as paths from this package.
func readmeFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md pages: %v", err)
	}
	return append([]string{"../../README.md"}, docs...)
}

// TestReadmeCommandLines: every "bulleted-mcp serve …" command line the
// README and the docs pages give (the deploy command, the container's) and
// the Dockerfile's CMD parse with serve's flags: an option renamed or
// removed fails here rather than for a reader.
func TestReadmeCommandLines(t *testing.T) {
	t.Parallel()
	type line struct {
		file string
		args []string
	}
	var lines []line
	for _, f := range readmeFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// a command may go on over lines ending in a backslash
		text := strings.ReplaceAll(string(raw), "\\\n", " ")
		for _, m := range regexp.MustCompile(`(?m)(?:bulleted-mcp|IMAGE) (serve(?: [^\x60\n#…]*)?)`).FindAllStringSubmatch(text, -1) {
			lines = append(lines, line{filepath.Base(f), strings.Fields(m[1])})
		}
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`CMD \["([^"]+)"\]`).FindSubmatch(docker); m != nil {
		lines = append(lines, line{"Dockerfile", []string{string(m[1])}})
	} else {
		t.Fatal("the Dockerfile has no CMD")
	}
	withDeploy, inReadme := false, 0
	for _, l := range lines {
		if strings.Contains(strings.Join(l.args, " "), "--database") {
			withDeploy = true
		}
		if l.file == "README.md" {
			inReadme++
		}
		var out bytes.Buffer
		// --help at the end: the flags before it are parsed, nothing runs
		if code := run(append(l.args, "--help"), nil, &out, &out); code != 0 || strings.Contains(out.String(), "not defined") {
			t.Errorf("%s: command line %q does not parse: exit %d: %.200s", l.file, strings.Join(l.args, " "), code, out.String())
		}
	}
	if len(lines) < 4 || !withDeploy || inReadme == 0 {
		t.Fatalf("found %d serve command lines in the README, docs and Dockerfile, %d in the README (the deploy command among them: %v)", len(lines), inReadme, withDeploy)
	}
}

// readmeMaxBytes: the README is read in two minutes; the reference is in
// docs/.
const readmeMaxBytes = 15_000

func TestReadmeSize(t *testing.T) {
	t.Parallel()
	fi, err := os.Stat("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > readmeMaxBytes {
		t.Fatalf("README.md is %d bytes, over %d: move reference text to a docs/ page and link it", fi.Size(), readmeMaxBytes)
	}
}

// TestReadmeTestCommand: the README's test command is the one .ci/run runs
// ("CI runs exactly this"), and its serve command is the one given first.
func TestReadmeTestCommand(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## The two commands\n\n```sh\n(.*?)```").FindSubmatch(raw)
	if m == nil {
		t.Fatal("the README has no \"The two commands\" block")
	}
	var cmds []string
	for _, l := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		cmd, _, _ := strings.Cut(l, "#")
		cmds = append(cmds, strings.Join(strings.Fields(cmd), " "))
	}
	if len(cmds) != 2 || cmds[0] != "go run ./cmd/bulleted-mcp serve" || !strings.HasPrefix(cmds[1], "go test ") {
		t.Fatalf("the README's two commands are %q", cmds)
	}
	ci, err := os.ReadFile("../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	for _, l := range strings.Split(string(ci), "\n") {
		if l = strings.Join(strings.Fields(l), " "); strings.HasPrefix(l, "go test") {
			tests = append(tests, l)
		}
	}
	if len(tests) != 1 || tests[0] != cmds[1] {
		t.Fatalf(".ci/run runs %q; the README says CI runs exactly %q", tests, cmds[1])
	}
}

// pendingDocs are pages other branches are writing, linked already; remove
// each from this list when its page lands.
var pendingDocs = map[string]bool{}

// TestDocLinks: every relative link and image in README.md and docs/*.md
// names a file of the repository (pendingDocs aside), and a #fragment on a
// Markdown page names one of its headings.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	// Markdown links and images, and the HTML ones (<img src="…">)
	link := regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)|<(?:img|a)\s[^>]*?(?:src|href)="([^"]+)"`)
	for _, f := range readmeFiles(t) {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		links := link.FindAllSubmatch(stripCode(raw), -1)
		if f == "../../README.md" && len(links) < 10 {
			t.Errorf("the README links only %d pages and pictures", len(links))
		}
		for _, m := range links {
			target := string(m[1]) + string(m[2])
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			file := f
			if path != "" {
				file = filepath.Join(filepath.Dir(f), path)
			}
			rel, _ := filepath.Rel("../..", file)
			rel = filepath.ToSlash(rel)
			if strings.HasPrefix(rel, "../") {
				t.Errorf("%s: link %q leaves the repository", f, target)
				continue
			}
			body, err := os.ReadFile(file)
			if err != nil {
				if os.IsNotExist(err) && pendingDocs[rel] {
					continue
				}
				if _, serr := os.Stat(file); serr == nil { // a directory
					continue
				}
				t.Errorf("%s: link %q: %v", f, target, err)
				continue
			}
			if frag != "" && strings.HasSuffix(file, ".md") && !headingAnchors(body)[frag] {
				t.Errorf("%s: link %q: %s has no heading #%s", f, target, rel, frag)
			}
		}
	}
}

// stripCode blanks fenced code blocks and inline code, where a [x](y) is
// not a link.
func stripCode(b []byte) []byte {
	b = regexp.MustCompile("(?s)```.*?```").ReplaceAll(b, nil)
	return regexp.MustCompile("`[^`\n]*`").ReplaceAll(b, nil)
}

// headingAnchors are the fragments GitHub gives a page's headings.
func headingAnchors(b []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#{1,6} (.+)$`).FindAllSubmatch(regexp.MustCompile("(?s)```.*?```").ReplaceAll(b, nil), -1) {
		var a strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(string(m[1]))) {
			switch {
			case r == ' ':
				a.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				a.WriteRune(r)
			}
		}
		out[a.String()] = true
	}
	return out
}
