package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestServerJSON holds server.json (the MCP registry's description of the
// package) against the registry's published schema (testdata/registry, its
// source in the README there) and against the binary: its package runs a
// command this CLI has, over the transport that command serves by default
// (stdio), and every environment variable it names is one serve reads
// (serve --help names each); the Dockerfile runs the same command. The
// container keeps the outline: the package's runtime arguments run docker
// with -i (stdio), mount a volume on the directory the image's ENV gives
// serve as its store, which the Dockerfile declares a VOLUME, and forward
// each environment variable the package names; the image's ownership label
// is server.json's name.
func TestServerJSON(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../server.json")
	if err != nil {
		t.Fatal(err)
	}
	validateRegistrySchema(t, raw)
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
			RuntimeHint      string `json:"runtimeHint"`
			RuntimeArguments []struct {
				Type      string `json:"type"`
				Name      string `json:"name"`
				Value     string `json:"value"`
				Variables map[string]struct {
					Default string `json:"default"`
				} `json:"variables"`
			} `json:"runtimeArguments"`
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
	df := parseDockerfile(string(docker))
	if got := df.labels["io.modelcontextprotocol.server.name"]; got != sj.Name {
		t.Errorf("the Dockerfile's LABEL io.modelcontextprotocol.server.name is %q; server.json's name is %q (the registry checks them against each other)", got, sj.Name)
	}
	// the image's store: serve's --store reads BULLETED_MCP_STORE, the
	// image sets it, and that directory is a volume
	if !strings.Contains(help.String(), "env BULLETED_MCP_STORE") {
		t.Error("serve --help does not say that --store is read from BULLETED_MCP_STORE")
	}
	store := df.env["BULLETED_MCP_STORE"]
	if store == "" || !slices.Contains(df.volumes, store) {
		t.Errorf("the Dockerfile's store (ENV BULLETED_MCP_STORE=%q) is not among its VOLUMEs %q: each container would start on an empty outline", store, df.volumes)
	}
	for _, p := range sj.Packages {
		if p.RegistryType != "oci" {
			continue
		}
		if p.RuntimeHint != "docker" {
			t.Errorf("%s: runtimeHint %q, want docker", p.Identifier, p.RuntimeHint)
		}
		var interactive bool
		var mounts []string
		forwarded := map[string]bool{}
		for _, a := range p.RuntimeArguments {
			switch {
			case a.Type == "positional" && (a.Value == "-i" || a.Value == "--interactive"),
				a.Type == "named" && (a.Name == "-i" || a.Name == "--interactive") && a.Value == "":
				interactive = true
			case a.Type == "named" && (a.Name == "-v" || a.Name == "--volume"):
				// the target is what follows the source (a variable or a
				// name) and its colon: src:dst[:opts]
				parts := strings.Split(a.Value, ":")
				if len(parts) < 2 {
					t.Errorf("%s: volume %q has no target", p.Identifier, a.Value)
					continue
				}
				mounts = append(mounts, parts[1])
				for v, in := range a.Variables {
					if !strings.Contains(a.Value, "{"+v+"}") || in.Default == "" {
						t.Errorf("%s: volume variable %q is not used in %q or has no default", p.Identifier, v, a.Value)
					}
				}
			case a.Type == "named" && (a.Name == "-e" || a.Name == "--env"):
				name, _, _ := strings.Cut(a.Value, "=")
				forwarded[name] = true
				if !readByServe[name] {
					t.Errorf("%s: the container is given %s, which serve does not read", p.Identifier, name)
				}
			}
		}
		if !interactive {
			t.Errorf("%s: the runtime arguments lack -i: docker would close the container's stdin, the stdio transport", p.Identifier)
		}
		if !slices.Contains(mounts, store) {
			t.Errorf("%s: no runtime argument mounts a volume on the image's store %q (mounts: %q): the outline would be lost with the container", p.Identifier, store, mounts)
		}
		for _, e := range p.EnvironmentVariables {
			if e.Name == "BULLETED_MCP_STORE" {
				t.Errorf("%s: offers BULLETED_MCP_STORE, which the image fixes to its volume (a value from the client would put the outline outside it)", p.Identifier)
			}
			if !forwarded[e.Name] {
				t.Errorf("%s: names %s, but no --env runtime argument passes it into the container", p.Identifier, e.Name)
			}
		}
	}
}

// validateRegistrySchema fails t unless raw (server.json) is valid against
// the registry's published schema, the one its $schema names.
func validateRegistrySchema(t *testing.T, raw []byte) {
	t.Helper()
	f, err := os.Open("testdata/registry/server.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := doc.(map[string]any)["$id"].(string)
	var named struct {
		Schema string `json:"$schema"`
	}
	if err := json.Unmarshal(raw, &named); err != nil {
		t.Fatal(err)
	}
	if id == "" || id != named.Schema {
		t.Fatalf("server.json names the schema %q; testdata/registry holds %q (replace the copy and its README with the schema server.json names)", named.Schema, id)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(id, doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile(id)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(v); err != nil {
		t.Errorf("server.json is not valid against the registry's schema: %v", err)
	}
}

// dockerfile is what TestServerJSON reads of the Dockerfile's final stage.
type dockerfile struct {
	labels  map[string]string
	env     map[string]string
	volumes []string
}

// parseDockerfile reads LABEL, ENV and VOLUME from the last stage (from its
// FROM on): the forms this repository's Dockerfile uses, KEY="value" or
// KEY=value pairs and a JSON array or bare paths.
func parseDockerfile(text string) dockerfile {
	text = strings.ReplaceAll(text, "\\\n", " ")
	df := dockerfile{labels: map[string]string{}, env: map[string]string{}}
	pair := regexp.MustCompile(`([A-Za-z0-9_.\-]+)=("(?:[^"\\]|\\.)*"|\S+)`)
	for _, line := range strings.Split(text, "\n") {
		instr, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch strings.ToUpper(instr) {
		case "FROM":
			df = dockerfile{labels: map[string]string{}, env: map[string]string{}}
		case "LABEL", "ENV":
			m := df.labels
			if strings.ToUpper(instr) == "ENV" {
				m = df.env
			}
			for _, p := range pair.FindAllStringSubmatch(rest, -1) {
				v := p[2]
				if u, err := strconv.Unquote(v); err == nil {
					v = u
				}
				m[p[1]] = v
			}
		case "VOLUME":
			var vs []string
			if err := json.Unmarshal([]byte(rest), &vs); err != nil {
				vs = strings.Fields(rest)
			}
			df.volumes = append(df.volumes, vs...)
		}
	}
	return df
}
