package e2e

import (
	"cmp"
	"context"
	"os"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// TestSDKSubscriptions: the official TypeScript SDK client subscribes to a
// subtree and gets exactly one update per commit that touches it, by this
// session, another server on the same directory or a shell's call, and
// none for commits elsewhere or after unsubscribing (subscribe.mjs).
func TestSDKSubscriptions(t *testing.T) {
	bin := build(t)
	runScript(t, "subscribe.mjs", nil, bin, t.TempDir())
}

// TestSDKSubscriptionsOnReferencePDS: the same on the reference PDS, with
// the person's app writing straight to the PDS (createRecord, putRecord,
// deleteRecord): one update per such commit touching the subtree, heard
// without any call (the server follows the PDS's commit stream).
func TestSDKSubscriptionsOnReferencePDS(t *testing.T) {
	// the server follows the PDS's commit stream: every update must come
	// without a call; then this many more direct creates measure the
	// latency from the PDS's answer to the update (BULLETED_E2E_EDITS=100)
	edits := cmp.Or(os.Getenv("BULLETED_E2E_EDITS"), "10")
	bin := build(t)
	srv := pdstest.Start(t, pdstest.Options{})
	a, err := srv.CreateAccount(context.Background(), "agent")
	if err != nil {
		t.Fatal(err)
	}
	runScript(t, "subscribe.mjs", []string{"BULLETED_APP_PASSWORD=" + a.AppPassword,
		"SUBSCRIBE_PDS=" + srv.URL, "SUBSCRIBE_HANDLE=" + a.Handle, "SUBSCRIBE_PASSWORD=" + a.Password,
		"SUBSCRIBE_FOLLOW=1", "SUBSCRIBE_EDITS=" + edits}, bin, t.TempDir(), "--pds", srv.URL, "--identifier", a.Handle, "--plc", srv.PLCURL)
}

// TestSDKConfirmation: the elicitation flow with the official TypeScript
// SDK client (confirm.mjs): accept writes; decline, cancel and no answer
// write nothing (kind declined, read back); no capability: not asked.
func TestSDKConfirmation(t *testing.T) {
	bin := build(t)
	runScript(t, "confirm.mjs", nil, bin, t.TempDir())
}
