package server

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// ConfirmTimeout bounds how long a write waits for the person's answer to
// a confirmation (earlier protocols, where the server asks mid-call).
var ConfirmTimeout = 5 * time.Minute

// confirmID names the confirmation among a call's input requests.
const confirmID = "confirm"

// confirmer asks the person behind one call's client (tools.Confirmer).
// Protocol 2026-07-28 and later: the call answers "input required" with an
// elicitation and the plan id as its state, and the client calls again
// with the answer. Earlier protocols: the server sends elicitation/create
// in the middle of the call and waits (at most ConfirmTimeout).
type confirmer struct {
	s      *mcpserver.MCPServer
	modern bool
	params mcp.MultiRoundTripParams
}

// confirmerFor is the call's confirmer, or nil when its client cannot ask
// the person (it declared no elicitation capability).
func confirmerFor(ctx context.Context, s *mcpserver.MCPServer, req mcp.CallToolRequest) tools.Confirmer {
	modern := mcp.IsModernProtocol(mcpserver.RequestProtocolVersion(ctx))
	var caps *mcp.ClientCapabilities
	if modern {
		caps = req.Params.Meta.ClientCapabilities()
	} else if sess, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithClientInfo); ok {
		c := sess.GetClientCapabilities()
		caps = &c
	}
	if caps == nil || caps.Elicitation == nil {
		return nil
	}
	return &confirmer{s: s, modern: modern, params: req.Params.MultiRoundTripParams}
}

func (c *confirmer) Answer() (string, bool, bool) {
	if c.params.InputResponses == nil {
		return "", false, false
	}
	r := mcpserver.ElicitationResponse(c.params.InputResponses, confirmID)
	if r == nil {
		return "", false, false
	}
	return c.params.RequestState, r.Action == mcp.ElicitationResponseActionAccept, true
}

func (c *confirmer) Confirm(ctx context.Context, state, message string) (bool, *mcp.CallToolResult, error) {
	params := mcp.ElicitationParams{Message: message,
		RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{}}}
	if c.modern {
		return false, mcpserver.NewInputRequestBuilder(state).Elicit(confirmID, params).ToolResult(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, ConfirmTimeout)
	defer cancel()
	if sid := sessionOf(ctx); sid != "" {
		// the answer may reach another instance, which forwards it here
		// (forward.go)
		defer await(c.s, sid)()
	}
	if call, ok := CallOf(ctx); ok && call.Yield != nil {
		// others may write while the person thinks: the plan asked about
		// is checked against the outline when it is applied
		defer call.Yield()()
	}
	res, err := c.s.RequestElicitation(ctx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}, Params: params})
	if err != nil {
		return false, nil, err
	}
	return res.Action == mcp.ElicitationResponseActionAccept, nil, nil
}
