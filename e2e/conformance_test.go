package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted/pgtest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// The official MCP conformance suite (@modelcontextprotocol/conformance,
// pinned in package.json) runs its server scenarios against `bulleted-mcp
// serve --http` and its authorization-server scenario against the hosted
// server. Only the scenarios that apply to a server without the suite's
// fixture tools, prompts and resources run; the few checks inside them
// that need a fixture tool are named, each with the reason, in
// conformance-baseline.yml (the suite fails the run if one of them passes,
// or if any other check fails).

// check is one entry of the suite's checks.json.
type check struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  string `json:"errorMessage"`
}

// scenario is one run of the suite's CLI.
type scenario struct {
	name     string   // the suite's scenario name
	spec     string   // --spec-version, "" for the scenario's own
	mustPass []string // check ids that must be SUCCESS (not skipped)
}

// serverScenarios apply to bulleted-mcp's streamable HTTP transport.
var serverScenarios = []scenario{
	{name: "server-initialize"},
	{name: "server-session-lifecycle", mustPass: []string{"server-session-delete-accepted", "server-session-terminated-returns-404"}},
	{name: "server-stateless", spec: "2026-07-28"},
	{name: "ping"},
	{name: "tools-list"},
	{name: "tools-list", spec: "2026-07-28"},
	{name: "dns-rebinding-protection"},
	{name: "dns-rebinding-protection", spec: "2026-07-28"},
	{name: "http-header-validation", spec: "2026-07-28"},
	{name: "server-sse-multiple-streams"},
	// the outline as resources (server/resources.go); the suite's
	// resources-read-*, resources-templates-read and resources-(un)subscribe
	// name its fixture's resources (test://…), which this server refuses
	{name: "resources-list", mustPass: []string{"resources-list"}},
	{name: "resources-list", spec: "2026-07-28", mustPass: []string{"resources-list"}},
	{name: "completion-complete", mustPass: []string{"completion-complete"}},
	{name: "completion-complete", spec: "2026-07-28", mustPass: []string{"completion-complete"}},
	{name: "sep-2164-resource-not-found", spec: "2026-07-28", mustPass: []string{"sep-2164-no-empty-contents", "sep-2164-error-code", "sep-2164-data-uri"}},
	// the prompts (server/prompts.go); prompts-get-simple, -with-args,
	// -embedded-resource and -with-image get the suite's fixture prompts
	// (test_simple_prompt, …), which this server does not have
	{name: "prompts-list", mustPass: []string{"prompts-list"}},
	{name: "prompts-list", spec: "2026-07-28", mustPass: []string{"prompts-list"}},
	// caching hints (SEP-2549) on tools/list, prompts/list, resources/list,
	// resources/templates/list and resources/read
	{name: "caching", spec: "2026-07-28", mustPass: []string{"sep-2549-tools-list-caching-hints", "sep-2549-prompts-list-caching-hints",
		"sep-2549-resources-list-caching-hints", "sep-2549-resources-templates-list-caching-hints", "sep-2549-resources-read-caching-hints"}},
}

// suite returns the e2e directory, the Node binary and the suite's CLI.
func suite(t *testing.T) (dir, node, cli string) {
	t.Helper()
	dir, node, err := pdstest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	cli = filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the conformance suite is not installed (e2e/setup.sh): %v", err)
	}
	return dir, node, cli
}

// runSuite runs the suite's CLI with args and returns the checks it wrote
// under out; it fails the test when the suite exits non-zero.
func runSuite(t *testing.T, dir, node, cli string, args ...string) []check {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(node, append([]string{cli}, append(args, "--output-dir", out)...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	text, err := cmd.CombinedOutput()
	checks := readChecks(t, out)
	var lines []string
	for _, c := range checks {
		lines = append(lines, fmt.Sprintf("  %-8s %s %s", c.Status, c.ID, c.Error))
	}
	t.Logf("conformance %s\n%s", strings.Join(args, " "), strings.Join(lines, "\n"))
	if err != nil {
		t.Errorf("the suite failed: %v\n%s", err, tail(string(text), 6000))
	}
	return checks
}

func readChecks(t *testing.T, out string) []check {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	var all []check
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cs []check
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		all = append(all, cs...)
	}
	return all
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// judge fails the test unless the scenario ran (some check passed), the
// checks it must pass did, and every failure is one the baseline names.
func judge(t *testing.T, sc scenario, checks []check, baseline map[string]bool) {
	t.Helper()
	passed := map[string]bool{}
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			passed[c.ID] = true
		case "FAILURE":
			if !baseline[sc.name+":"+c.ID] {
				t.Errorf("check %s failed: %s", c.ID, c.Error)
			}
		}
	}
	if len(passed) == 0 {
		t.Errorf("no check passed: the scenario did not run (%d checks)", len(checks))
	}
	for _, id := range sc.mustPass {
		if !passed[id] {
			t.Errorf("check %s did not pass", id)
		}
	}
}

// loadBaseline reads the per-check entries of conformance-baseline.yml
// ("- scenario:check-id" lines under server:).
func loadBaseline(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if e, ok := strings.CutPrefix(l, "- "); ok {
			e, _, _ = strings.Cut(e, "#")
			m[strings.TrimSpace(e)] = true
		}
	}
	return m
}

// startServe starts `bin serve args...` and returns its URL, read from the
// line it prints once listening (pattern's first group).
func startServe(t *testing.T, env []string, pattern string, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute): // a guard, not a timing assertion
			cmd.Process.Kill()
			<-done
		}
	})
	re := regexp.MustCompile(pattern)
	found := make(chan string, 1)
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		close(found)
		io.Copy(io.Discard, stderr)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("serve exited before listening:\n%s", log.String())
		}
		return u
	case <-time.After(2 * time.Minute): // a guard, not a timing assertion
		t.Fatalf("serve did not start listening")
	}
	return ""
}

// The server scenarios against serve --http on an embedded store.
func TestConformanceServer(t *testing.T) {
	dir, node, cli := suite(t)
	baseline := loadBaseline(t, filepath.Join(dir, "conformance-baseline.yml"))
	bin := build(t)
	url := startServe(t, nil, `on (http://\S+/mcp)`, bin, "--store", t.TempDir(), "--http", "127.0.0.1:0")
	for _, sc := range serverScenarios {
		name := sc.name
		args := []string{"server", "--url", url, "--scenario", sc.name, "--expected-failures", filepath.Join(dir, "conformance-baseline.yml")}
		if sc.spec != "" {
			name += "@" + sc.spec
			args = append(args, "--spec-version", sc.spec)
		}
		t.Run(name, func(t *testing.T) {
			judge(t, sc, runSuite(t, dir, node, cli, args...), baseline)
		})
	}
}

// The authorization-server metadata scenario against the hosted server
// (serve --database on a throwaway PostgreSQL). Its public URL is plain
// http on loopback, which the hosted server accepts for tests only (in
// production it must be https); the issuer the suite checks is that URL.
func TestConformanceHostedAuthorization(t *testing.T) {
	dir, node, cli := suite(t)
	pg, err := pgtest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pg.Stop)
	bin := build(t)
	key := make([]byte, 32)
	rand.Read(key)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	public := "http://" + addr
	env := []string{"BULLETED_MCP_SEAL_KEY=" + base64.StdEncoding.EncodeToString(key)}
	startServe(t, env, `hosted on (http://\S+)`, bin, "--database", pg.NewDatabase(t), "--http", addr,
		"--public-url", public, "--store", t.TempDir())

	for _, sc := range []scenario{{name: "authorization-server-metadata-endpoint", mustPass: []string{"authorization-server-metadata", "authorization-server-metadata-cimd"}}} {
		t.Run(sc.name, func(t *testing.T) {
			checks := runSuite(t, dir, node, cli, "authorization", "--url", public, "--scenario", sc.name)
			judge(t, sc, checks, nil)
		})
	}
}
