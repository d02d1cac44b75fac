package e2e

import (
	"os"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// TestMain gives the end-to-end tests (servers, browsers, a PDS) room on a
// busy machine (pdstest.RoomOnBusyMachine).
func TestMain(m *testing.M) {
	pdstest.RoomOnBusyMachine()
	os.Exit(m.Run())
}
