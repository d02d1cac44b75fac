package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// appsDeclared is the Apps extension as a host declares it.
func appsDeclared() map[string]any {
	return map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app"}}}
}

// appsServer is the environment of a server on a fresh embedded store.
func appsServer(t *testing.T) *tools.Env {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &tools.Env{Engine: outline.New(l)}
}

// appsClient is an initialised in-process client of a server exposing the
// tool families given (all when none), on protocol version (the modern
// 2026-07-28 goes through server/discover and sends the capabilities with
// every request), declaring extensions (nil: none).
func appsClient(t *testing.T, version string, extensions map[string]any, families ...string) (*client.Client, *mcp.InitializeResult) {
	t.Helper()
	s, err := server.NewWithOptions(appsServer(t), server.Options{Families: families})
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
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "apps-test", Version: "1"}
	init.Params.Capabilities.Extensions = extensions
	res, err := c.Initialize(ctx, init)
	if err != nil {
		t.Fatal(err)
	}
	if res.ProtocolVersion != version {
		t.Fatalf("negotiated %s, want %s", res.ProtocolVersion, version)
	}
	return c, res
}

// wantView is the view a tool's results are shown in ("" none).
func wantView(tool mcp.Tool) string {
	switch {
	case tool.Name == "read_outline" || tool.Name == "search":
		return "ui://bulleted/outline.html"
	case !*tool.Annotations.ReadOnlyHint:
		return "ui://bulleted/diff.html"
	}
	return ""
}

// checkLinks checks tools/list as sent on the wire: with linked, every
// tool with a view names it in _meta.ui.resourceUri and no other _meta;
// without, no tool has _meta. Never the deprecated flat "ui/resourceUri".
// Every tool has a title (and annotations.title), both the same.
func checkLinks(t *testing.T, what string, list []json.RawMessage, linked bool) {
	t.Helper()
	if len(list) == 0 {
		t.Fatalf("%s: no tools", what)
	}
	views := 0
	for _, raw := range list {
		var tool mcp.Tool
		if err := json.Unmarshal(raw, &tool); err != nil {
			t.Fatal(err)
		}
		var wire struct {
			Title       string          `json:"title"`
			Meta        json.RawMessage `json:"_meta"`
			Annotations struct {
				Title string `json:"title"`
			} `json:"annotations"`
		}
		json.Unmarshal(raw, &wire)
		if wire.Title == "" || wire.Annotations.Title != wire.Title {
			t.Errorf("%s: %s: title %q, annotations.title %q", what, tool.Name, wire.Title, wire.Annotations.Title)
		}
		want := ""
		if v := wantView(tool); v != "" && linked {
			want = `{"ui":{"resourceUri":"` + v + `"}}`
			views++
		}
		if string(wire.Meta) != want {
			t.Errorf("%s: %s: _meta %s, want %q", what, tool.Name, wire.Meta, want)
		}
	}
	if linked && views == 0 {
		t.Errorf("%s: no tool links a view", what)
	}
}

// listTools is tools/list as the client received it, each tool as sent.
func listTools(t *testing.T, c *client.Client) []json.RawMessage {
	t.Helper()
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	for _, tool := range res.Tools {
		raw, err := json.Marshal(tool)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw)
	}
	return out
}

// TestAppsCapability: the server declares io.modelcontextprotocol/ui with
// the view MIME type in capabilities.extensions, at initialize (protocol
// 2025-11-25) and at server/discover (2026-07-28), whatever the client
// declared; the capabilities are exactly these.
func TestAppsCapability(t *testing.T) {
	const want = `{"completions":{},"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}},"prompts":{},"resources":{"subscribe":true},"tools":{}}`
	for _, version := range []string{mcp.LATEST_LEGACY_PROTOCOL_VERSION, mcp.LATEST_PROTOCOL_VERSION} {
		for _, ext := range []map[string]any{nil, appsDeclared()} {
			_, res := appsClient(t, version, ext)
			raw, _ := json.Marshal(res.Capabilities)
			var norm any // keys in order
			json.Unmarshal(raw, &norm)
			got, _ := json.Marshal(norm)
			if string(got) != want {
				t.Errorf("%s, client extensions %v: capabilities\n%s\nwant\n%s", version, ext, got, want)
			}
		}
	}
}

// TestAppsViews: the views are listed and read as MCP Apps resources (MIME
// text/html;profile=mcp-app, _meta.ui.csp declaring no origin, on the
// listing and the contents), for every client; read_outline and search
// link the outline view, every writing tool the diff view, through
// _meta.ui.resourceUri, only for a client that declared the extension with
// text/html;profile=mcp-app, on either protocol; a server without the read
// tools lists the views too.
func TestAppsViews(t *testing.T) {
	clients := []struct {
		name   string
		ext    map[string]any
		linked bool
	}{
		{"no extensions", nil, false},
		{"declared", appsDeclared(), true},
		{"declared, the MIME type spelt otherwise", map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{"image/png", "Text/HTML; Profile=mcp-app"}}}, true},
		{"declared without mimeTypes", map[string]any{server.AppsExtension: map[string]any{}}, false},
		{"declared with other types only", map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{"text/html", "text/html;profile=mcp-ui", "text/uri-list"}}}, false},
		{"mimeTypes not a list", map[string]any{server.AppsExtension: map[string]any{"mimeTypes": "text/html;profile=mcp-app"}}, false},
		{"another extension", map[string]any{"io.modelcontextprotocol/tasks": map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app"}}}, false},
	}
	for _, version := range []string{mcp.LATEST_LEGACY_PROTOCOL_VERSION, mcp.LATEST_PROTOCOL_VERSION} {
		for _, families := range [][]string{nil, {"edit"}} {
			for _, cl := range clients {
				what := version + ", " + strings.Join(families, ",") + ", " + cl.name
				c, _ := appsClient(t, version, cl.ext, families...)
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
						t.Fatalf("%s: listed as %s", what, raw)
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
					t.Fatalf("%s: views listed %v", what, found)
				}
				checkLinks(t, what, listTools(t, c), cl.linked)
			}
		}
	}
}

// TestAppsDeclared: AppsDeclared at the edges of a client's declaration.
func TestAppsDeclared(t *testing.T) {
	caps := func(ext map[string]any) *mcp.ClientCapabilities { return &mcp.ClientCapabilities{Extensions: ext} }
	for _, c := range []struct {
		name string
		caps *mcp.ClientCapabilities
		want bool
	}{
		{"nil", nil, false},
		{"no extensions", caps(nil), false},
		{"null settings", caps(map[string]any{server.AppsExtension: nil}), false},
		{"empty settings", caps(map[string]any{server.AppsExtension: map[string]any{}}), false},
		{"empty list", caps(map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{}}}), false},
		{"a Go []string", caps(map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []string{server.AppsMIMEType}}}), true},
		{"a typed struct", caps(map[string]any{server.AppsExtension: struct {
			MIMETypes []string `json:"mimeTypes"`
		}{[]string{server.AppsMIMEType}}}), true},
		{"spaces and case", caps(map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{"TEXT/HTML ; PROFILE=\"mcp-app\""}}}), true},
		{"not a string among them", caps(map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{42, nil, server.AppsMIMEType}}}), true},
		{"the HTML type without the profile", caps(map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{"text/html"}}}), false},
		{"another profile", caps(map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{"text/html;profile=mcp-apps"}}}), false},
		{"an extra parameter", caps(map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{"text/html;profile=mcp-app;charset=utf-8"}}}), false},
		{"not a MIME type", caps(map[string]any{server.AppsExtension: map[string]any{"mimeTypes": []any{"mcp-app", ";;", ""}}}), false},
		{"settings not an object", caps(map[string]any{server.AppsExtension: []any{server.AppsMIMEType}}), false},
		{"the identifier in another case", caps(map[string]any{"io.modelcontextprotocol/UI": map[string]any{"mimeTypes": []any{server.AppsMIMEType}}}), false},
	} {
		if got := server.AppsDeclared(c.caps); got != c.want {
			t.Errorf("%s: AppsDeclared = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAppsPerSession: over streamable HTTP, each session's tools/list
// follows what its own client declared at initialize (two sessions of
// one server, interleaved), and a stateless 2026-07-28 request what it
// carries itself: a request without the extension after one with it on
// the same connection gets no links.
func TestAppsPerSession(t *testing.T) {
	s, err := server.NewWithOptions(appsServer(t), server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(server.HTTPHandler(s, server.HTTPOptions{}))
	defer ts.Close()
	c := rawClient{t, ts.URL}
	v := map[string]string{"MCP-Protocol-Version": "2025-06-18"}
	open := func(caps string) string {
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":` + caps + `,"clientInfo":{"name":"test","version":"1"}}}`
		r := c.do(http.MethodPost, "", init, nil)
		expect(t, "initialize", r, http.StatusOK, `"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}`)
		expect(t, "initialized", c.do(http.MethodPost, r.session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, v), http.StatusAccepted, "")
		return r.session
	}
	list := func(what string, r rawResp) []json.RawMessage {
		t.Helper()
		expect(t, what, r, http.StatusOK, "")
		body := r.body
		if i := strings.Index(body, "data: "); i >= 0 { // an SSE answer
			body = strings.TrimSpace(body[i+len("data: "):])
		}
		var resp struct {
			Result struct {
				Tools []json.RawMessage `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatalf("%s: %v: %.300s", what, err, r.body)
		}
		return resp.Result.Tools
	}
	with := open(`{"extensions":{"io.modelcontextprotocol/ui":{"mimeTypes":["text/html;profile=mcp-app"]}}}`)
	without := open(`{}`)
	for i := 0; i < 2; i++ {
		checkLinks(t, "session with the extension", list("tools/list", c.do(http.MethodPost, with, toolsList, v)), true)
		checkLinks(t, "session without", list("tools/list", c.do(http.MethodPost, without, toolsList, v)), false)
	}
	modern := func(caps string) string {
		return `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"test","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	}
	m := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
	for i := 0; i < 2; i++ {
		checkLinks(t, "2026-07-28 request with the extension", list("tools/list", c.do(http.MethodPost, "", modern(`{"extensions":`+mustJSON(appsDeclared())+`}`), m)), true)
		checkLinks(t, "2026-07-28 request without", list("tools/list", c.do(http.MethodPost, "", modern(`{}`), m)), false)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
