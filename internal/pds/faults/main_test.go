package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

var (
	srv      *pdstest.Server
	accounts atomic.Int64
)

// TestMain starts the reference PDS as internal/pds's tests do.
func TestMain(m *testing.M) {
	pdstest.RoomOnBusyMachine()
	s, err := pdstest.StartServer(pdstest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv = s
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

func account(t testing.TB, s *pdstest.Server) *pdstest.Account {
	t.Helper()
	a, err := s.CreateAccount(context.Background(), fmt.Sprintf("user%d", accounts.Add(1)))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// login opens a Repo for a as the server would: app password, session kept
// in dir.
func login(t testing.TB, s *pdstest.Server, a *pdstest.Account, dir string, hc *http.Client) *pds.Repo {
	t.Helper()
	c, did, err := pds.Login{PDS: s.URL, Identifier: a.Handle, Password: a.AppPassword, Dir: dir, HTTP: hc}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if did != a.DID {
		t.Fatalf("logged in as %s, want %s", did, a.DID)
	}
	return pds.New(c, did)
}
