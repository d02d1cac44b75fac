package server

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// One payload per result (issue #25): a client shows the model either the
// text of a tool result or, when there is one, only its structured
// content; serve --payload chooses which part carries the result in full
// (tools.Payload). auto, the default, gives the clients known to show only
// the structured content the structured mode and every other client both
// parts in full (the text mode is never chosen automatically: it changes
// tools/list, which a client reads before it names itself on the modern
// protocol, and a client wrongly taken for a text client would lose the
// rows).

// structuredClients are the clientInfo.name values of the clients known to
// show the model only a tool result's structured content when there is
// one, matched exactly (case-insensitively):
//   - "claude-code": Claude Code (anthropics/claude-code#79944,
//     anthropics/claude-code#55677: the content text is dropped when
//     structuredContent is present; the name as a real Claude Code
//     2.1.143 sends it: screenpipe/screenpipe#5796);
//   - "codex-mcp-client": Codex CLI (openai/codex, codex-rs MCP client's
//     Implementation{name: "codex-mcp-client", title: "Codex"}; observed
//     from codex-cli 0.146 in screenpipe/screenpipe#5796), which hands the
//     model the structured content when there is one;
//   - VS Code (GitHub Copilot chat), whose client names itself with the
//     product's nameLong (microsoft/vscode,
//     src/vs/workbench/contrib/mcp/common/mcpServerRequestHandler.ts:
//     clientInfo.name = productService.nameLong): "Visual Studio Code",
//     "Visual Studio Code - Insiders", and "Code - OSS" for builds from
//     source (product.json); microsoft/vscode#290063.
var structuredClients = []string{
	"claude-code",
	"codex-mcp-client",
	"Visual Studio Code",
	"Visual Studio Code - Insiders",
	"Code - OSS",
}

// AutoPayload is the mode auto gives a client named name: structured for
// the clients known to show only the structured content, else both.
func AutoPayload(name string) tools.Payload {
	name = strings.TrimSpace(name)
	for _, c := range structuredClients {
		if strings.EqualFold(name, c) {
			return tools.PayloadStructured
		}
	}
	return tools.PayloadBoth
}

// payloads decides each session's mode and says it once: a line the
// operator sees (Options.Logf, stderr for the CLI) and one added to the
// server instructions the session's initialize (or server/discover)
// returns.
type payloads struct {
	mode tools.Payload // configured: auto, both, structured or text
	logf func(format string, args ...any)

	mu   sync.Mutex
	said map[string]bool // session ids told (bounded: forgotten when they end)
}

func newPayloads(mode tools.Payload, logf func(string, ...any)) *payloads {
	if mode == "" {
		mode = tools.PayloadAuto
	}
	return &payloads{mode: mode, logf: logf, said: map[string]bool{}}
}

// clientName is the name the request's client gave: in the request's
// _meta (protocol 2026-07-28), else at the session's initialize.
func clientName(ctx context.Context) string {
	if info := mcpserver.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil {
		return info.ClientInfo.Name
	}
	if s, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithClientInfo); ok {
		return s.GetClientInfo().Name
	}
	return ""
}

// of is the mode of the call in ctx.
func (p *payloads) of(ctx context.Context) tools.Payload {
	if p.mode != tools.PayloadAuto {
		return p.mode
	}
	return AutoPayload(clientName(ctx))
}

// describe says a mode for a model and an operator.
func describe(m tools.Payload) string {
	switch m {
	case tools.PayloadStructured:
		return "tool results carry their data in full in the structured content; the text is a short rendering (summary, counts, cursor, every notice)"
	case tools.PayloadText:
		return "tool results carry their data in full in the text; there is no structured content and no output schema"
	}
	return "tool results carry their data in full in both the text and the structured content"
}

// why says how mode was chosen for a client named name.
func (p *payloads) why(name string) string {
	if p.mode != tools.PayloadAuto {
		return "set by --payload " + string(p.mode)
	}
	if name == "" {
		name = "(unnamed)"
	}
	return fmt.Sprintf("--payload auto, client %q", name)
}

// hooks adds to h: at initialize (and server/discover), the mode in the
// instructions and, once per session, a line for the operator.
func (p *payloads) hooks(h *mcpserver.Hooks) {
	h.AddAfterInitialize(func(ctx context.Context, _ any, req *mcp.InitializeRequest, res *mcp.InitializeResult) {
		if req == nil || res == nil {
			return
		}
		name := req.Params.ClientInfo.Name
		res.Instructions = p.instructions(res.Instructions, name)
		p.announce(ctx, name, req.Params.ClientInfo.Version)
	})
	h.AddAfterDiscover(func(ctx context.Context, _ any, _ *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
		if res == nil {
			return
		}
		name := clientName(ctx)
		res.Instructions = p.instructions(res.Instructions, name)
		p.announce(ctx, name, "")
	})
	h.AddOnUnregisterSession(func(_ context.Context, s mcpserver.ClientSession) {
		p.mu.Lock()
		delete(p.said, s.SessionID())
		p.mu.Unlock()
	})
}

// instructions is in with the mode a client named name gets.
func (p *payloads) instructions(in, name string) string {
	m := p.mode
	if m == tools.PayloadAuto {
		m = AutoPayload(name)
	}
	return strings.TrimRight(in, "\n") + fmt.Sprintf("\n\nPayload: %s (%s; %s).\n", m, p.why(name), describe(m))
}

// announce tells the operator, once per session, the mode its client gets.
func (p *payloads) announce(ctx context.Context, name, version string) {
	if p.logf == nil {
		return
	}
	id := sessionOf(ctx)
	if id != "" {
		p.mu.Lock()
		told := p.said[id]
		p.said[id] = true
		p.mu.Unlock()
		if told {
			return
		}
	}
	m := p.mode
	if m == tools.PayloadAuto {
		m = AutoPayload(name)
	}
	client := name
	if version != "" {
		client += " " + version
	}
	if client == "" {
		client = "(unnamed client)"
	}
	p.logf("bulleted-mcp: session with %s: payload %s (%s): %s", client, m, p.why(name), describe(m))
}
