package tools

import (
	"maps"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Output schemas. Every tool declares one; its structuredContent matches it
// (tools_test checks every tool's real results with a JSON Schema
// validator). They leave properties open (a result may carry more than it
// declares, e.g. a truncation note). A result is either an error, which
// carries "error", or a success, which carries the required properties
// every success of that tool has.

func outSchema(props map[string]any, successes ...[]string) map[string]any {
	// changedByOthers: what others changed since the session's last call
	// (the server adds it to any result: server/notice.go)
	p := map[string]any{"error": errorSchema, "truncated": tBool, "notices": tStrs, "changedByOthers": tObject}
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

var (
	tString = map[string]any{"type": "string"}
	tInt    = map[string]any{"type": "integer"}
	tBool   = map[string]any{"type": "boolean"}
	tObject = map[string]any{"type": "object"}
	tStrs   = map[string]any{"type": "array", "items": tString}
	tObjs   = map[string]any{"type": "array", "items": tObject}

	errorSchema = map[string]any{"type": "object",
		"properties": map[string]any{
			"kind":      map[string]any{"type": "string", "enum": outline.KindNames()},
			"message":   tString,
			"next":      tString,
			"retryable": tBool,
			"details":   tObject,
		},
		"required": []string{"kind", "message"}}

	createdSchema = map[string]any{"type": "array", "items": map[string]any{"type": "object",
		"properties": map[string]any{"rkey": tString, "input": tString, "text": tString, "line": tInt},
		"required":   []string{"rkey"}}}

	writeProps = map[string]any{
		"summary":         tString,
		"dryRun":          tBool,
		"noChange":        tBool,
		"operation":       tString,
		"plan":            tString,
		"created":         createdSchema,
		"keys":            tStrs,
		"lines":           map[string]any{"type": "array", "items": tInt},
		"createdTotal":    tInt,
		"cost":            tInt,
		"budgetRemaining": tInt,
		"commit":          map[string]any{"type": "object", "properties": map[string]any{"cid": tString, "rev": tString}},
		"commits":         tInt,
		"diagnostics":     tStrs,
		"writes":          tObjs,
		"before":          tString,
		"after":           tString,
		"operations":      tObjs,
		"changes":         tObjs,
		"changesTotal":    tInt,
	}
	writeOutput = outSchema(writeProps, []string{"summary", "dryRun", "cost"})
	// operations: a list, or a resume (a write result)
	opsOutput = outSchema(withProps(writeProps, map[string]any{"cursor": tString}), []string{"summary", "dryRun", "cost"}, []string{"operations"})

	readOutput = outSchema(map[string]any{
		"did": tString, "handle": tString, "uriPrefix": tString, "outline": tObject, "truncated": tBool, "stop": tString, "total": tInt,
		"cursor": tString, "next": tString, "nodes": tObjs, "root": tObject, "text": tString, "markdown": tString, "opml": tString,
	}, []string{"did"})

	// hits: the compact tree (an entry is a hit {rkey, text, state, layout,
	// note, author}, or an ancestor [text, entries...]); fields=full: flat
	// hits
	searchOutput = outSchema(map[string]any{"did": tString, "uriPrefix": tString, "hits": hitsSchema, "cursor": tString}, []string{"did", "uriPrefix", "hits"})

	hitsSchema = map[string]any{"type": "array", "items": map[string]any{"type": []string{"object", "array"}}}

	detachedOutput = outSchema(map[string]any{"detached": tObjs, "detachedTotal": tInt, "contributions": tObjs}, []string{"detached"})

	validateOutput = outSchema(map[string]any{"valid": tBool, "problems": tObjs, "notes": tObjs}, []string{"valid"})
)

// withProps is props with more beside them (props unchanged).
func withProps(props, more map[string]any) map[string]any {
	out := maps.Clone(props)
	maps.Copy(out, more)
	return out
}
