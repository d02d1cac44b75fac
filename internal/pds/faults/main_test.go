package faults_test

import (
	"os"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

var srv *pdstest.Server

// TestMain starts the reference PDS as internal/pds's tests do.
func TestMain(m *testing.M) {
	os.Exit(pdstest.Main(m, &srv))
}
