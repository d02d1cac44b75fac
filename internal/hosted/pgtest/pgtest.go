// Package pgtest starts a throwaway PostgreSQL server for tests: initdb in a
// temporary directory, pg_ctl start on a free loopback port (TCP only, no
// Unix socket in a shared place), stopped and removed at cleanup. Docker is
// not needed; the server binaries of the Debian package are (apt-get install
// postgresql). When they are missing the test fails, saying so: it is never
// skipped.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// BinDir finds the directory holding initdb and pg_ctl: $PG_BINDIR, the
// newest /usr/lib/postgresql/N/bin, or the PATH.
func BinDir() (string, error) {
	if d := os.Getenv("PG_BINDIR"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin or PATH: install them (apt-get install postgresql) or set PG_BINDIR")
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// Server is a running test PostgreSQL.
type Server struct {
	URL  string // postgres://… of the database "test"
	dir  string
	bin  string
	cred *syscall.Credential
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// credential: initdb refuses to run as root, so as root the server runs as
// the postgres user (or nobody).
func credential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, -1, -1, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
	}
	return nil, 0, 0, fmt.Errorf("running as root, and there is no postgres or nobody user to run PostgreSQL as")
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// Start starts a server for the test binary; stop it with Stop.
func Start() (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	s := &Server{dir: dir, bin: bin, cred: cred}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "test", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	var last error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories= -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=32MB", port)
		out, err := s.run("pg_ctl", "start", "-D", data, "-w", "-t", "60", "-l", filepath.Join(dir, "log"), "-o", opts)
		if err != nil {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			last = fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
			if strings.Contains(string(log), "already in use") {
				continue
			}
			break
		}
		s.URL = fmt.Sprintf("postgres://test@127.0.0.1:%d/postgres?sslmode=disable", port)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, s.URL)
		if err != nil {
			s.Stop()
			return nil, err
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "CREATE DATABASE test"); err != nil {
			s.Stop()
			return nil, err
		}
		s.URL = fmt.Sprintf("postgres://test@127.0.0.1:%d/test?sslmode=disable", port)
		return s, nil
	}
	os.RemoveAll(dir)
	return nil, last
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	s.run("pg_ctl", "stop", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "-t", "30")
	os.RemoveAll(s.dir)
}

// NewDatabase creates a fresh database on s and returns its URL.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.URL)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(ctx)
	name := fmt.Sprintf("t%d", time.Now().UnixNano())
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatal(err)
	}
	return strings.Replace(s.URL, "/test?", "/"+name+"?", 1)
}
