package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// A budget ledger deleted while the operations journal shows writes landed
// in the last hour is said (stderr and the session's first tool result),
// with the points the journal counts, not silently started from zero.
func TestMissingLedgerNotice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	srv := pdstest.Start(t, pdstest.Options{})
	ctx := context.Background()
	a, err := srv.CreateAccount(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pds.PasswordEnv, a.AppPassword)
	dir := t.TempDir()
	pdsURL, ident, plc := srv.URL, a.Handle, srv.PLCURL
	rf := remoteFlags{pds: &pdsURL, identifier: &ident, plc: &plc}
	text := resultText
	b, err := openBackend(ctx, dir, rf)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.notices) != 0 {
		t.Fatalf("a new directory has notices: %q", b.notices)
	}
	res, err := callTool(ctx, b.env, "insert_after", `{"nodes":[{"text":"one"},{"text":"two"},{"text":"three"}]}`)
	if err != nil || res.IsError {
		t.Fatalf("insert: %v %s", err, text(res))
	}
	b.close()
	ledgers, _ := filepath.Glob(filepath.Join(dir, "budget-*.json"))
	if len(ledgers) != 1 {
		t.Fatalf("ledgers %v", ledgers)
	}
	if err := os.Remove(ledgers[0]); err != nil {
		t.Fatal(err)
	}
	b, err = openBackend(ctx, dir, rf)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	var stderr strings.Builder
	b.tell(&stderr)
	want := "The write budget ledger " + filepath.Base(ledgers[0]) + " is missing, but the operations journal (ops/) records 1 operation(s) started in the last 24 hours that landed writes worth at least 9 points (9 in the last hour)"
	if !strings.Contains(stderr.String(), "bulleted-mcp: notice: "+want) {
		t.Fatalf("stderr %q", stderr.String())
	}
	res, err = callTool(ctx, b.env, "read_outline", "")
	if err != nil || res.IsError {
		t.Fatalf("read: %v", err)
	}
	if got := text(res); !strings.HasPrefix(got, "Notice: "+want) || !strings.Contains(got, "three") {
		t.Fatalf("the first result does not say the ledger is missing:\n%.500s", got)
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc == nil || sc["notices"] == nil {
		t.Fatalf("no structured notices: %v", res.StructuredContent)
	}
}
