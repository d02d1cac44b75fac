package server

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/ui"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// The MCP Apps views (io.modelcontextprotocol/ui): ui:// resources, always
// listed, and each tool's _meta.ui.resourceUri naming the view of its
// results. Hosts that do not support Apps ignore both.

// AppsExtension is the MCP Apps extension's identifier.
const AppsExtension = "io.modelcontextprotocol/ui"

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

// withApp is t's MCP tool with its view in _meta: ui.resourceUri, and the
// flat "ui/resourceUri" key hosts of the first Apps drafts read.
func withApp(t tools.Tool) mcp.Tool {
	m := t.MCP()
	if uri := ViewFor(t); uri != "" {
		m.Meta = mcp.NewMetaFromMap(map[string]any{"ui": map[string]any{"resourceUri": uri}, "ui/resourceUri": uri})
	}
	return m
}

// appOptions gives the server the resources capability when the outline
// resources (resources.go) do not.
func appOptions(haveResources bool) []mcpserver.ServerOption {
	if haveResources {
		return nil
	}
	return []mcpserver.ServerOption{mcpserver.WithResourceCapabilities(false, false)}
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
