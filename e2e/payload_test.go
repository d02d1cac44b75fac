package e2e

import (
	"os/exec"
	"testing"
)

// TestSDKClientPayload: serve --payload with the official MCP TypeScript
// SDK client, which validates structured content against output schemas
// (payload.mjs does the calls and checks) on the demo outline: auto gives
// a client named claude-code the structured mode and another client both
// parts; --payload text declares no output schemas and sends no structured
// content, and the SDK client takes that.
func TestSDKClientPayload(t *testing.T) {
	bin := build(t)
	store := t.TempDir()
	if out, err := exec.Command(bin, "demo", "--store", store).CombinedOutput(); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, c := range []struct {
		name, mode string
		flags      []string
	}{
		{"claude-code", "structured", nil},
		{"bulleted-e2e", "both", nil},
		{"bulleted-e2e", "text", []string{"--payload", "text"}},
	} {
		runScript(t, "payload.mjs", nil, append([]string{c.name, c.mode, bin, "--store", store}, c.flags...)...)
	}
}
