// Package faults holds the fault matrix of the PDS backend (internal/pds):
// every operation of the matrix under every fault the fault proxy
// (pdstest.FaultProxy) can arm, each run on a fresh account of the
// reference PDS and checked against it (TestFaultMatrix).
//
// It is a package of its own, with no code but this comment, so that the
// matrix is a test binary of its own: cmd/go kills a package's test binary
// 11 minutes after it starts (the default -timeout of 10 minutes, plus one;
// a TestMain raising test.timeout does not move that kill), and on a busy
// two-core machine the matrix alone (70 parallel runs) takes most of that,
// so beside the rest of internal/pds's tests `go test ./...` with no flags
// was killed there.
package faults
