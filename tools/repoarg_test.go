package tools_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// A repo argument that is neither a handle nor a DID can never be read: the
// call is refused as invalid, naming the argument, not as unavailable (an
// agent would retry that); online (other repositories readable) and
// offline alike. A well-formed one that cannot be read stays unavailable.
func TestMalformedRepoArgument(t *testing.T) {
	online := inProcess(t, sharedEnv(t, openLocal(t), func(_ context.Context, ident string) (*outline.Tree, error) {
		return nil, errors.New("unknown identity " + ident)
	}))
	clients := map[string]*client.Client{"online": online, "offline": newClient(t, false)}
	kind := func(sc map[string]any) (string, any, string) {
		e, _ := sc["error"].(map[string]any)
		msg, _ := e["message"].(string)
		k, _ := e["kind"].(string)
		return k, e["retryable"], msg
	}
	for _, bad := range []string{"not a repo", "alice", "at://did:plc:abc/app.bulleted.node/x", "did:plc", "https://bsky.app/profile/alice.example.com"} {
		for name, c := range clients {
			for _, tool := range []string{"read_outline", "search"} {
				args := map[string]any{"repo": bad}
				if tool == "search" {
					args["text"] = "x"
				}
				res, sc := call(t, c, tool, args)
				k, retry, msg := kind(sc)
				if !res.IsError || k != "invalid" || retry != false || !strings.Contains(msg, "repo") || !strings.Contains(msg, bad) {
					t.Errorf("%s %s repo=%q: kind %q retryable %v: %s", name, tool, bad, k, retry, text(res))
				}
			}
		}
	}
	// well-formed but not readable: unavailable, as before
	res, sc := call(t, online, "read_outline", map[string]any{"repo": "nobody.example.com"})
	if k, _, _ := kind(sc); !res.IsError || k != "unavailable" {
		t.Errorf("an unreadable handle: kind %q: %s", k, text(res))
	}
}
