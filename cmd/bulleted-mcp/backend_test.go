package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// A mirror of a bullet on a PDS that never answers does not hang reading
// one's own outline: the read ends with a note about it, and a second read
// does not wait for that PDS again.
func TestMirrorOnHangingPDS(t *testing.T) {
	var requests atomic.Int64
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer func() { close(stop); hang.Close() }()
	const foreign = syntax.DID("did:plc:bbbbbbbbbbbbbbbbbbbbbbbb")
	dir := identity.NewMockDirectory()
	dir.Insert(identity.Identity{DID: foreign, Handle: "foreign.test",
		Services: map[string]identity.ServiceEndpoint{"atproto_pds": {Type: "AtprotoPersonalDataServer", URL: hang.URL}}})

	data := t.TempDir()
	l, err := store.OpenLocal(data)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	others := &pds.Others{Resolver: &pds.Resolver{Directory: dir}, Timeout: 300 * time.Millisecond}
	eng, err := outline.Open(l, outline.Options{Operations: data, Others: newOtherTrees(others.Snapshot).get})
	if err != nil {
		t.Fatal(err)
	}
	env := &tools.Env{Engine: eng}
	ctx := context.Background()
	call := func(name, args string) *mcp.CallToolResult {
		t.Helper()
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := callTool(ctx, env, name, args)
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		select {
		case res := <-done:
			if res == nil {
				t.FailNow()
			}
			if res.IsError {
				t.Fatalf("%s: %v", name, res.Content)
			}
			return res
		case <-time.After(time.Minute): // a guard against hanging, not a timing assertion
			t.Fatalf("%s hung", name)
			return nil
		}
	}
	call("insert_after", `{"text":"mine"}`)
	call("add_mirror", `{"original":"at://`+foreign.String()+`/app.bulleted.node/3kabcdefghijk"}`)
	for i := range 2 {
		res := call("read_outline", `{}`)
		txt := res.Content[0].(mcp.TextContent).Text
		if !strings.Contains(txt, "mine") || !strings.Contains(txt, "Note: could not read "+foreign.String()) || !strings.Contains(txt, "not done within 300ms") {
			t.Fatalf("read %d: %s", i+1, txt)
		}
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("the hanging PDS got %d requests, want 1", n)
	}
}
