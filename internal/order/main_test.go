package order_test

import (
	"flag"
	"os"
	"testing"
	"time"
)

// TestMain gives the property tests room on a busy machine: go test's
// default 10-minute timeout is raised to 30 (an explicit -timeout other
// than 10m is kept), as pdstest.RoomOnBusyMachine does for the server
// packages.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.timeout"); f != nil && f.Value.String() == (10*time.Minute).String() {
		f.Value.Set((30 * time.Minute).String())
	}
	os.Exit(m.Run())
}
