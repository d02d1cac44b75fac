package main

import (
	"os"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// TestMain gives the release build room on a busy machine: six cold
// cross-compiles can pass go test's default 10-minute timeout on two
// cores (pdstest.RoomOnBusyMachine).
func TestMain(m *testing.M) {
	pdstest.RoomOnBusyMachine()
	os.Exit(m.Run())
}
