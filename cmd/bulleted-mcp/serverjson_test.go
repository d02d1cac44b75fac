package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestServerJSON holds server.json (the MCP registry's description of the
// package) against the binary: its package runs a command this CLI has,
// over the transport that command serves by default (stdio), and every
// environment variable it names is one serve reads (serve --help names
// each); the Dockerfile runs the same command.
func TestServerJSON(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../server.json")
	if err != nil {
		t.Fatal(err)
	}
	var sj struct {
		Schema      string `json:"$schema"`
		Name        string `json:"name"`
		Description string `json:"description"`
		Version     string `json:"version"`
		Packages    []struct {
			RegistryType string `json:"registryType"`
			Identifier   string `json:"identifier"`
			Transport    struct {
				Type string `json:"type"`
			} `json:"transport"`
			PackageArguments []struct {
				Type  string `json:"type"`
				Value string `json:"value"`
			} `json:"packageArguments"`
			EnvironmentVariables []struct {
				Name string `json:"name"`
			} `json:"environmentVariables"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &sj); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sj.Schema, "https://static.modelcontextprotocol.io/schemas/") || sj.Name == "" || sj.Version == "" {
		t.Fatalf("server.json lacks $schema, name or version: %+v", sj)
	}
	if n := len(sj.Description); n == 0 || n > 100 {
		t.Fatalf("description of %d characters (the registry takes 1 to 100)", n)
	}
	if len(sj.Packages) == 0 {
		t.Fatal("no package")
	}
	var help bytes.Buffer
	run([]string{"serve", "--help"}, nil, &help, &help)
	readByServe := map[string]bool{}
	for _, m := range regexp.MustCompile(`BULLETED_[A-Z_]+`).FindAllString(help.String(), -1) {
		readByServe[m] = true
	}
	for _, p := range sj.Packages {
		if p.Transport.Type != "stdio" {
			t.Errorf("%s: transport %q; serve's default transport is stdio", p.Identifier, p.Transport.Type)
		}
		if len(p.PackageArguments) == 0 || p.PackageArguments[0].Value != "serve" {
			t.Errorf("%s: the package does not run serve: %+v", p.Identifier, p.PackageArguments)
		}
		for _, a := range p.PackageArguments {
			if a.Type == "positional" && !slices.ContainsFunc(commands, func(c command) bool { return c.name == a.Value }) && a.Value != "serve" {
				t.Errorf("%s: argument %q is no command of this CLI", p.Identifier, a.Value)
			}
		}
		if p.RegistryType == "oci" && !strings.HasSuffix(p.Identifier, ":"+sj.Version) {
			t.Errorf("image %s is not tagged with the version %s", p.Identifier, sj.Version)
		}
		for _, e := range p.EnvironmentVariables {
			if !readByServe[e.Name] {
				t.Errorf("server.json names %s, which serve does not read (serve --help does not name it)", e.Name)
			}
		}
	}
	docker, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(docker), `CMD ["serve"]`) {
		t.Error(`the Dockerfile does not run serve (CMD ["serve"])`)
	}
}
