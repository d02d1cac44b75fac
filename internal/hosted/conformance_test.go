package hosted

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// The MCP conformance suite's authorization-server scenarios (the
// `authorization` command of @modelcontextprotocol/conformance, pinned in
// e2e/package.json) against a hosted instance: the metadata document, and
// the authorization code grant with PKCE for a client registered at
// /register whose redirect URI is the suite's loopback callback. The suite
// prints the authorization URL and waits for the browser to come back; the
// test is that browser (our consent page, sign-in and consent at the
// reference PDS, our callback, then the suite's callback), and the suite
// redeems the code at /token. The instance runs in-process because its
// upstream PDS is on plain http loopback, which only Config.AllowLoopback
// (tests) accepts; e2e.TestConformanceHostedAuthorization runs the metadata
// scenario against the built binary (serve --database).
func TestConformanceAuthorizationServer(t *testing.T) {
	dir, node, err := pdstest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	cli := filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the conformance suite is not installed (e2e/setup.sh): %v", err)
	}
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	in := e.start(t, nil)
	a := newAccount(t, p, fmt.Sprintf("conf%d", time.Now().UnixNano()%1e6))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", port)
	st, reg := postJSON(t, in.URL+"/register", map[string]any{"client_name": "MCP conformance suite", "redirect_uris": []string{redirect}, "token_endpoint_auth_method": "none"})
	if st != 201 {
		t.Fatalf("register: %d %v", st, reg)
	}
	cid, _ := reg["client_id"].(string)

	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a guard
	defer cancel()
	cmd := exec.CommandContext(ctx, node, cli, "authorization", "--url", in.URL, "--client-id", cid,
		"--port", fmt.Sprint(port), "--resource", in.Resource(), "--output-dir", out)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	browsed := make(chan error, 1)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	started := false
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if !started && strings.HasPrefix(strings.TrimSpace(line), in.URL+"/authorize?") {
			started = true
			authURL := strings.TrimSpace(line)
			go func() {
				back, err := authorizeInBrowser(ctx, authURL, a)
				if err != nil {
					browsed <- err
					return
				}
				// the browser lands on the suite's callback
				resp, err := noRedirect.Get(back.String())
				if err == nil {
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("the suite's callback %s: HTTP %d", back, resp.StatusCode)
					}
				}
				browsed <- err
			}()
		}
	}
	runErr := cmd.Wait()
	if !started {
		t.Fatalf("the suite printed no authorization URL of %s:\n%s", in.URL, log.String())
	}
	if err := <-browsed; err != nil {
		t.Errorf("authorizing in the browser: %v", err)
	}

	files, _ := filepath.Glob(filepath.Join(out, "*", "checks.json"))
	status := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cs []struct{ ID, Status, ErrorMessage string }
		if err := json.Unmarshal(b, &cs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, c := range cs {
			status[c.ID] = c.Status
			t.Logf("%-8s %s %s", c.Status, c.ID, c.ErrorMessage)
		}
	}
	if runErr != nil {
		t.Errorf("the suite failed: %v\n%s", runErr, log.String())
	}
	for _, id := range []string{"authorization-server-metadata", "authorization-server-metadata-cimd", "authorization-code-grant"} {
		t.Run(id, func(t *testing.T) {
			if status[id] != "SUCCESS" {
				t.Errorf("check %s: %q, want SUCCESS", id, status[id])
			}
		})
	}
}
