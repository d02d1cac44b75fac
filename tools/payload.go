package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
)

// Payload says which parts of a tool result carry the result in full
// (serve --payload). Clients show the model one part or the other: the
// text (Claude Desktop, claude.ai) or only the structured content when
// there is one (Claude Code, Codex, VS Code); sending both in full pays
// for every result twice.
type Payload string

const (
	// PayloadAuto picks, per session, PayloadStructured for the clients
	// known to show the model only the structured content, else
	// PayloadBoth (server.AutoPayload).
	PayloadAuto Payload = "auto"
	// PayloadBoth: the text and the structured content are both complete.
	PayloadBoth Payload = "both"
	// PayloadStructured: the structured content is complete; the text is a
	// short rendering (summary, counts, cursor, every notice). Errors keep
	// their text.
	PayloadStructured Payload = "structured"
	// PayloadText: no output schemas, no structured content; the text is
	// complete.
	PayloadText Payload = "text"
)

// Payloads lists the modes, the default first.
var Payloads = []Payload{PayloadAuto, PayloadBoth, PayloadStructured, PayloadText}

// ParsePayload reads a mode ("" is auto).
func ParsePayload(s string) (Payload, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return PayloadAuto, nil
	}
	if p := Payload(s); slices.Contains(Payloads, p) {
		return p, nil
	}
	return "", fmt.Errorf("unknown payload mode %q (modes: auto, both, structured, text)", s)
}

// ShortMarker ends the text of a result shaped for PayloadStructured.
const ShortMarker = "[the rows are in the structured content; this text is its short rendering]"

// Shape makes res, tool's result, what mode sends: PayloadStructured
// replaces the text of a successful result by a short rendering of its
// structured content (shortText), unless the text is already as short and
// says every notice; PayloadText drops the structured content (an error's
// text then names its kind); PayloadBoth and PayloadAuto change nothing.
// Notices the server adds afterwards go to both parts as always.
func Shape(res *mcp.CallToolResult, mode Payload, tool string) *mcp.CallToolResult {
	if res == nil || res.ResultType == mcp.ResultTypeInputRequired {
		return res
	}
	switch mode {
	case PayloadText:
		if res.IsError {
			if e, ok := scMap(res)["error"].(map[string]any); ok {
				if kind, _ := e["kind"].(string); kind != "" {
					prefixText(res, fmt.Sprintf("Error (%s", kind)+retryWord(e)+"): ")
				}
			}
		}
		res.StructuredContent = nil
	case PayloadStructured:
		if res.IsError || res.StructuredContent == nil {
			return res
		}
		sc := scMap(res)
		short := shortText(sc, tool)
		var full strings.Builder
		for _, c := range res.Content {
			if tc, ok := c.(mcp.TextContent); ok {
				full.WriteString(tc.Text)
			}
		}
		if full.Len() <= len(short) && saysAll(full.String(), sc) {
			return res
		}
		kept := slices.DeleteFunc(slices.Clone(res.Content), func(c mcp.Content) bool {
			_, isText := c.(mcp.TextContent)
			return isText
		})
		res.Content = append([]mcp.Content{mcp.NewTextContent(short)}, kept...)
	}
	return res
}

func retryWord(e map[string]any) string {
	if r, _ := e["retryable"].(bool); r {
		return ", retryable"
	}
	return ""
}

// prefixText puts p before the first text block of res (a new one if none).
func prefixText(res *mcp.CallToolResult, p string) {
	for i, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			tc.Text = p + tc.Text
			res.Content[i] = tc
			return
		}
	}
	res.Content = append([]mcp.Content{mcp.NewTextContent(strings.TrimSuffix(p, ": "))}, res.Content...)
}

// scMap is res's structured content as a map (a typed one through JSON).
func scMap(res *mcp.CallToolResult) map[string]any {
	if m, ok := res.StructuredContent.(map[string]any); ok {
		return m
	}
	m := map[string]any{}
	if raw, err := json.Marshal(res.StructuredContent); err == nil {
		_ = json.Unmarshal(raw, &m)
	}
	return m
}

// noticesOf lists what a result's structured content tells beside its
// data: a write's diagnostics, its notices, and a page's changedSince
// message.
func noticesOf(sc map[string]any) []string {
	var out []string
	// a write's diagnostics are its notices
	for _, k := range []string{"diagnostics", "notices"} {
		switch ns := sc[k].(type) {
		case []string:
			out = append(out, ns...)
		case []any:
			for _, n := range ns {
				if s, ok := n.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	if cs, ok := sc["changedSince"]; ok && cs != nil {
		var c struct {
			Message string `json:"message"`
		}
		if raw, err := json.Marshal(cs); err == nil && json.Unmarshal(raw, &c) == nil && c.Message != "" {
			out = append(out, c.Message)
		}
	}
	return out
}

// saysAll: text says every notice of sc.
func saysAll(text string, sc map[string]any) bool {
	for _, n := range noticesOf(sc) {
		if !strings.Contains(text, n) {
			return false
		}
	}
	return true
}

// counted are the integer fields of results worth a word in the short
// text, in the order said.
var counted = []string{"total", "createdTotal", "changesTotal", "detachedTotal", "commits", "cost", "budgetRemaining"}

// flags are the boolean fields said when true ("valid" is said either way).
var flags = []string{"dryRun", "noChange", "truncated"}

// shortText is the short rendering of a structured content: its summary
// line, counts, the cursor (and how to continue), every notice, and a
// last line saying the rows are in the structured content.
func shortText(sc map[string]any, tool string) string {
	var b strings.Builder
	if s, ok := sc["summary"].(string); ok && s != "" {
		b.WriteString(strings.TrimSpace(s) + "\n")
	}
	var parts []string
	for _, k := range slices.Sorted(mapsKeys(sc)) {
		if k == "notices" || k == "diagnostics" || k == "error" {
			continue
		}
		if k == "hits" {
			// the compact tree: ancestors hold hits (through JSON, as sent)
			var entries []any
			if raw, err := json.Marshal(sc[k]); err == nil && json.Unmarshal(raw, &entries) == nil {
				parts = append(parts, fmt.Sprintf("hits %d", countHits(entries)))
			}
			continue
		}
		if n := jsonArrayLen(sc[k]); n >= 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	for _, k := range counted {
		if n, ok := asInt(sc[k]); ok {
			parts = append(parts, fmt.Sprintf("%s %d", k, n))
		}
	}
	for _, k := range flags {
		if v, _ := sc[k].(bool); v {
			parts = append(parts, k)
		}
	}
	if v, ok := sc["valid"].(bool); ok {
		parts = append(parts, fmt.Sprintf("valid %v", v))
	}
	// what the next call may name: a write's operation (undo), a dry run's plan
	for _, k := range []string{"operation", "plan"} {
		if s, _ := sc[k].(string); s != "" {
			parts = append(parts, k+" "+s)
		}
	}
	if s, _ := sc["stop"].(string); s != "" {
		parts = append(parts, "stopped: "+s)
	}
	b.WriteString(tool)
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	b.WriteString("\n")
	next, _ := sc["next"].(string)
	cursor, _ := sc["cursor"].(string)
	switch {
	case next != "":
		b.WriteString(next + "\n")
	case cursor != "":
		fmt.Fprintf(&b, "More: call %s again with the same arguments and cursor=%q\n", tool, cursor)
	}
	for _, n := range noticesOf(sc) {
		b.WriteString("Notice: " + n + "\n")
	}
	b.WriteString(ShortMarker)
	return b.String()
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// countHits counts the hits of a search's compact tree (an entry is a hit
// object, or an ancestor [text, entries...]) or its flat list.
func countHits(entries []any) int {
	n := 0
	for _, e := range entries {
		switch e := e.(type) {
		case []any:
			if len(e) > 0 {
				n += countHits(e[1:])
			}
		default:
			n++
		}
	}
	return n
}

// jsonArrayLen is the length of a typed slice v (through JSON), -1 when v
// is not one.
func jsonArrayLen(v any) int {
	switch v := v.(type) {
	case nil, string, bool, float64, int, int64, map[string]any:
		return -1
	case []any:
		return len(v)
	case []string:
		return len(v)
	}
	raw, err := json.Marshal(v)
	if err != nil || len(raw) == 0 || raw[0] != '[' {
		return -1
	}
	var a []json.RawMessage
	if json.Unmarshal(raw, &a) != nil {
		return -1
	}
	return len(a)
}

func asInt(v any) (int, bool) {
	switch n := v.(type) {
	case int:
		return n, true
	case int64:
		return int(n), true
	case float64:
		return int(n), true
	}
	return 0, false
}

type payloadKey struct{}

// WithPayload tells the tools the part of their results the session's
// client is shown (the mode the server shapes results to, resolved: auto
// is both or structured): a page then fills the result bound with that
// part alone instead of half of it with each.
func WithPayload(ctx context.Context, mode Payload) context.Context {
	return context.WithValue(ctx, payloadKey{}, mode)
}

// shownSize is the size of res as the mode of ctx sends it (Shape): in
// structured mode the text is a short rendering, in text mode there is no
// structured content; otherwise (both, or no mode on ctx) its whole size.
func shownSize(ctx context.Context, res *mcp.CallToolResult, tool string) int {
	mode, _ := ctx.Value(payloadKey{}).(Payload)
	if res == nil || mode != PayloadStructured && mode != PayloadText {
		return ResultSize(res)
	}
	shaped := *res // Shape replaces the copy's parts, never res's
	shaped.Content = slices.Clone(res.Content)
	return ResultSize(Shape(&shaped, mode, tool))
}
