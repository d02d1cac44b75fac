package server

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/ui"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// The MCP Apps views (io.modelcontextprotocol/ui, docs/apps.md): ui://
// resources, always listed, and each tool's _meta.ui.resourceUri naming
// the view of its results, sent only to a client that declared the
// extension with the HTML profile (AppsDeclared). The server declares the
// extension in its capabilities.

// AppsExtension is the MCP Apps extension's identifier.
const AppsExtension = "io.modelcontextprotocol/ui"

// AppsMIMEType is the one view MIME type this server serves (a client
// must list it in its extension settings' mimeTypes).
const AppsMIMEType = ui.MIMEType

// ViewFor is the ui:// URI of the view of a tool's results ("" none): the
// outline view for read_outline and search, the diff view for every tool
// that writes.
func ViewFor(t tools.Tool) string {
	switch {
	case t.Name == "read_outline" || t.Name == "search":
		return ui.Outline.URI
	case !t.Ann.ReadOnly:
		return ui.Diff.URI
	}
	return ""
}

// AppsDeclared reports whether caps declare the Apps extension with
// text/html;profile=mcp-app among its mimeTypes (the media type compared
// as MIME types compare: type, subtype and parameter names in any case,
// spaces around the parameters ignored). An extension entry without
// mimeTypes, or with other types only, is not a declaration: the spec
// makes mimeTypes required and the views are of that type.
func AppsDeclared(caps *mcp.ClientCapabilities) bool {
	if caps == nil || caps.Extensions == nil {
		return false
	}
	v, ok := caps.Extensions[AppsExtension]
	if !ok || v == nil {
		return false
	}
	// the settings as sent (decoded JSON) or as a Go caller built them
	raw, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var settings struct {
		MIMETypes []any `json:"mimeTypes"`
	}
	if json.Unmarshal(raw, &settings) != nil {
		return false
	}
	for _, m := range settings.MIMETypes {
		if s, ok := m.(string); ok && sameMIME(s, AppsMIMEType) {
			return true
		}
	}
	return false
}

// sameMIME compares two media types with their parameters.
func sameMIME(a, b string) bool {
	ta, pa, err := mime.ParseMediaType(a)
	if err != nil {
		return false
	}
	tb, pb, err := mime.ParseMediaType(b)
	if err != nil || ta != tb || len(pa) != len(pb) {
		return false
	}
	for k, v := range pb {
		if !strings.EqualFold(pa[k], v) {
			return false
		}
	}
	return true
}

// appsFor reports whether the client of the request in ctx declared the
// extension: a request of protocol 2026-07-28 or later by the
// capabilities it carries itself (never a previous request's), any other
// by those its session declared at initialize.
func appsFor(ctx context.Context) bool {
	if info := mcpserver.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		return AppsDeclared(info.ClientCapabilities)
	}
	if s, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithClientInfo); ok {
		caps := s.GetClientCapabilities()
		return AppsDeclared(&caps)
	}
	return false
}

// appsExtension is the server's capabilities.extensions entry.
func appsExtension() map[string]any {
	return map[string]any{AppsExtension: map[string]any{"mimeTypes": []string{AppsMIMEType}}}
}

// appOptions gives the server the Apps extension in its capabilities, the
// tools/list filter that links the views for the clients that declared it,
// and the resources capability when the outline resources (resources.go)
// do not.
func appOptions(list []tools.Tool, haveResources bool) []mcpserver.ServerOption {
	views := map[string]string{}
	for _, t := range list {
		if uri := ViewFor(t); uri != "" {
			views[t.Name] = uri
		}
	}
	opts := []mcpserver.ServerOption{
		mcpserver.WithExtensions(appsExtension()),
		mcpserver.WithToolFilter(func(ctx context.Context, in []mcp.Tool) []mcp.Tool {
			if len(views) == 0 || !appsFor(ctx) {
				return in
			}
			out := make([]mcp.Tool, len(in))
			for i, m := range in {
				if uri, ok := views[m.Name]; ok {
					m.Meta = withView(m.Meta, uri) // a copy: the registered tool keeps none
				}
				out[i] = m
			}
			return out
		}),
	}
	if !haveResources {
		opts = append(opts, mcpserver.WithResourceCapabilities(false, false))
	}
	return opts
}

// withView is a new _meta: m's fields and ui.resourceUri = uri (only the
// nested key: the flat "ui/resourceUri" is deprecated, docs/apps.md).
func withView(m *mcp.Meta, uri string) *mcp.Meta {
	fields := map[string]any{}
	if m != nil {
		for k, v := range m.AdditionalFields {
			fields[k] = v
		}
	}
	u := map[string]any{}
	if old, ok := fields["ui"].(map[string]any); ok {
		for k, v := range old {
			u[k] = v
		}
	}
	u["resourceUri"] = uri
	fields["ui"] = u
	out := mcp.NewMetaFromMap(fields)
	if m != nil {
		out.ProgressToken = m.ProgressToken
	}
	return out
}

// registerApps adds the views as resources: MIME text/html;profile=mcp-app,
// _meta.ui with a CSP that allows no origin, on the listing and on the
// contents (hosts read the contents' first).
func registerApps(s *mcpserver.MCPServer) {
	for _, v := range ui.All() {
		v := v
		size := int64(len(v.HTML))
		r := mcp.NewResource(v.URI, v.Name,
			mcp.WithResourceDescription(v.Description),
			mcp.WithMIMEType(ui.MIMEType))
		r.Title = v.Title
		r.Size = &size
		r.Meta = mcp.NewMetaFromMap(ui.Meta())
		s.AddResource(r, func(_ context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
			if req.Params.URI != v.URI {
				return nil, fmt.Errorf("no view %s", req.Params.URI)
			}
			return []mcp.ResourceContents{mcp.TextResourceContents{URI: v.URI, MIMEType: ui.MIMEType, Text: v.HTML, Meta: ui.Meta()}}, nil
		})
	}
}
