package faults_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

var srv *pdstest.Server

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
