package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeCommandLines: every "bulleted-mcp serve …" command line the
// README gives (the deploy command, the container's) and the Dockerfile's
// CMD parse with serve's flags: an option renamed or removed fails here
// rather than for a reader.
func TestReadmeCommandLines(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// a command may go on over lines ending in a backslash
	text := strings.ReplaceAll(string(raw), "\\\n", " ")
	var lines [][]string
	for _, m := range regexp.MustCompile(`(?m)(?:bulleted-mcp|IMAGE) (serve(?: [^\x60\n#…]*)?)`).FindAllStringSubmatch(text, -1) {
		args := strings.Fields(m[1])
		lines = append(lines, args)
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`CMD \["([^"]+)"\]`).FindSubmatch(docker); m != nil {
		lines = append(lines, []string{string(m[1])})
	} else {
		t.Fatal("the Dockerfile has no CMD")
	}
	withDeploy := false
	for _, args := range lines {
		if strings.Contains(strings.Join(args, " "), "--database") {
			withDeploy = true
		}
		var out bytes.Buffer
		// --help at the end: the flags before it are parsed, nothing runs
		if code := run(append(args, "--help"), nil, &out, &out); code != 0 || strings.Contains(out.String(), "not defined") {
			t.Errorf("README command line %q does not parse: exit %d: %.200s", strings.Join(args, " "), code, out.String())
		}
	}
	if len(lines) < 4 || !withDeploy {
		t.Fatalf("found %d serve command lines in the README and Dockerfile (the deploy command among them: %v)", len(lines), withDeploy)
	}
}
