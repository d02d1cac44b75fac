package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// build compiles the server binary once per test.
func build(t *testing.T) string {
	t.Helper()
	root, err := pdstest.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "bulleted-mcp")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/bulleted-mcp")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// runClient runs the SDK client script against `bin serve args...`.
func runClient(t *testing.T, env []string, bin string, args ...string) {
	t.Helper()
	runScript(t, "client.mjs", env, append([]string{bin}, args...)...)
}

// runScript runs one of e2e's Node scripts with args and env (beside the
// test's own); it must exit 0 and print a line starting "OK ".
func runScript(t *testing.T, script string, env []string, args ...string) {
	t.Helper()
	dir, node, err := pdstest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK ") {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

func TestSDKClientEmbeddedStore(t *testing.T) {
	bin := build(t)
	runClient(t, nil, bin, "--store", t.TempDir())
}

func TestSDKClientOnReferencePDS(t *testing.T) {
	bin := build(t)
	srv := pdstest.Start(t, pdstest.Options{})
	a, err := srv.CreateAccount(context.Background(), "agent")
	if err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	env := []string{"BULLETED_APP_PASSWORD=" + a.AppPassword}
	runClient(t, env, bin, "--store", store, "--pds", srv.URL, "--identifier", a.Handle, "--plc", srv.PLCURL)

	// the data directory keeps the session, the budget ledger and the read
	// cache; a later run (here the CLI) starts from them
	name := strings.ReplaceAll(a.DID.String(), ":", "_")
	for f, private := range map[string]bool{"session.json": true, "budget-" + name + ".json": false, "repo-" + name + ".car": true} {
		fi, err := os.Stat(filepath.Join(store, f))
		if err != nil {
			t.Fatalf("data directory: %v", err)
		}
		if private && fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s has mode %v", f, fi.Mode().Perm())
		}
	}
	cmd := exec.Command(bin, "call", "--store", store, "--pds", srv.URL, "--identifier", a.Handle, "--plc", srv.PLCURL,
		"read_outline", `{"format":"text"}`)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Groceries") || !strings.Contains(string(out), "Coffee") {
		t.Fatalf("call read_outline after the session: %v\n%s", err, out)
	}
}
