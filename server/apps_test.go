package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// appsClient is an initialised in-process client of a server exposing the
// tool families given (all when none).
func appsClient(t *testing.T, families ...string) *client.Client {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s, err := server.NewWithOptions(&tools.Env{Engine: outline.New(l)}, server.Options{Families: families})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, init); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAppsViews: the views are listed and read as MCP Apps resources (MIME
// text/html;profile=mcp-app, _meta.ui.csp declaring no origin, on the
// listing and the contents); read_outline and search link the outline
// view, every writing tool the diff view, through _meta.ui.resourceUri (as
// sent on the wire); a server without the read tools lists them too.
func TestAppsViews(t *testing.T) {
	for _, families := range [][]string{nil, {"edit"}} {
		c := appsClient(t, families...)
		ctx := context.Background()
		list, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		found := map[string]bool{}
		for _, r := range list.Resources {
			if !strings.HasPrefix(r.URI, "ui://") {
				continue
			}
			raw, _ := json.Marshal(r)
			if r.MIMEType != "text/html;profile=mcp-app" || !strings.Contains(string(raw), `"_meta":{"ui":{"csp":{"baseUriDomains":[],"connectDomains":[],"frameDomains":[],"resourceDomains":[]}`) {
				t.Fatalf("%v: listed as %s", families, raw)
			}
			found[r.URI] = true
			req := mcp.ReadResourceRequest{}
			req.Params.URI = r.URI
			res, err := c.ReadResource(ctx, req)
			if err != nil || len(res.Contents) != 1 {
				t.Fatalf("read %s: %v %v", r.URI, err, res)
			}
			tc := res.Contents[0].(mcp.TextResourceContents)
			raw, _ = json.Marshal(tc)
			if tc.MIMEType != "text/html;profile=mcp-app" || !strings.HasPrefix(tc.Text, "<!doctype html>") || !strings.Contains(string(raw), `"_meta":{"ui":{"csp":{`) || len(tc.Text) > 60_000 {
				t.Fatalf("read %s: %.300s", r.URI, raw)
			}
		}
		if !found["ui://bulleted/outline.html"] || !found["ui://bulleted/diff.html"] {
			t.Fatalf("%v: views listed %v", families, found)
		}
		tl, err := c.ListTools(ctx, mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tl.Tools {
			raw, _ := json.Marshal(tool)
			var wire struct {
				Meta map[string]any `json:"_meta"`
			}
			json.Unmarshal(raw, &wire)
			got := ""
			if u, ok := wire.Meta["ui"].(map[string]any); ok {
				got, _ = u["resourceUri"].(string)
			}
			want := ""
			switch {
			case tool.Name == "read_outline" || tool.Name == "search":
				want = "ui://bulleted/outline.html"
			case !*tool.Annotations.ReadOnlyHint:
				want = "ui://bulleted/diff.html"
			}
			if got != want || (want != "" && wire.Meta["ui/resourceUri"] != want) {
				t.Fatalf("%s: _meta %v, want ui.resourceUri %q", tool.Name, wire.Meta, want)
			}
		}
	}
}
