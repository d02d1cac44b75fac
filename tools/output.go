package tools

import (
	"maps"
)

// Output schemas. Every tool declares one; its structuredContent matches it
// (tools_test checks every tool's real results with a JSON Schema
// validator). They leave properties open (a result may carry more than it
// declares, e.g. a truncation note). A result is either an error, which
// carries "error", or a success, which carries the required properties
// every success of that tool has.

func outSchema(props map[string]any, successes ...[]string) map[string]any {
	// notices: what the result says besides its content; changedByOthers
	// (what others changed since the session's last call: server/notice.go)
	// and truncated are left open, as is everything a result may carry
	// beyond what is declared
	p := map[string]any{"error": errorSchema, "notices": tStrs}
	for k, v := range props {
		p[k] = v
	}
	out := map[string]any{"type": "object", "properties": p}
	if len(successes) > 0 {
		alts := []any{map[string]any{"required": []string{"error"}}}
		for _, r := range successes {
			alts = append(alts, map[string]any{"required": r})
		}
		out["anyOf"] = alts
	}
	return out
}

// The schemas declare what a client needs to tell results apart and to
// find their point (a write's summary, plan, keys; a read's nodes and
// cursor), and leave the rest open: first contact (instructions, tools
// with their output schemas, resources, prompts) was 45.7 KB, 26 KB of it
// output schemas, with every field and the error kinds spelled out on each
// of 18 tools (the kinds are listed once, in docs/tools.md).
var (
	tString = map[string]any{"type": "string"}
	tInt    = map[string]any{"type": "integer"}
	tBool   = map[string]any{"type": "boolean"}
	tObject = map[string]any{"type": "object"}
	tStrs   = map[string]any{"type": "array", "items": tString}
	tObjs   = map[string]any{"type": "array", "items": tObject}

	errorSchema = map[string]any{"type": "object",
		"properties": map[string]any{"kind": tString, "message": tString, "next": tString},
		"required":   []string{"kind", "message"}}

	writeProps = map[string]any{
		"summary":     tString,
		"dryRun":      tBool,
		"cost":        tInt,
		"plan":        tString,
		"operation":   tString,
		"rev":         tString,
		"created":     tObjs,
		"keys":        tStrs,
		"diagnostics": tStrs,
	}
	writeOutput = outSchema(writeProps, []string{"summary", "dryRun", "cost"})
	// operations: a list, or a resume (a write result)
	opsOutput = outSchema(withProps(writeProps, map[string]any{"operations": tObjs, "cursor": tString}), []string{"summary", "dryRun", "cost"}, []string{"operations"})

	readOutput = outSchema(map[string]any{
		"did": tString, "uriPrefix": tString, "cursor": tString, "nodes": tObjs, "text": tString,
	}, []string{"did"})

	// hits: the compact tree (an entry is a hit {rkey, text, state, layout,
	// note, author}, or an ancestor [text, entries...]); fields=full: flat
	// hits
	searchOutput = outSchema(map[string]any{"did": tString, "uriPrefix": tString, "hits": hitsSchema, "cursor": tString, "revs": tObjs}, []string{"did", "uriPrefix", "hits"}, []string{"uriPrefix", "revs"})

	hitsSchema = map[string]any{"type": "array", "items": map[string]any{"type": []string{"object", "array"}}}

	detachedOutput = outSchema(map[string]any{"detached": tObjs}, []string{"detached"})

	validateOutput = outSchema(map[string]any{"valid": tBool, "problems": tObjs}, []string{"valid"})
)

// withProps is props with more beside them (props unchanged).
func withProps(props, more map[string]any) map[string]any {
	out := maps.Clone(props)
	maps.Copy(out, more)
	return out
}
