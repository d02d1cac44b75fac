package tools

import (
	"fmt"
	"slices"
	"strings"
)

// Markdown is the tool reference of docs/tools.md, generated from the tool
// definitions: the table of tools, then each tool's parameters from its
// input schema.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| tool | read-only | destructive | what it does |\n|---|---|---|---|\n")
	for _, t := range All() {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s | %s | %s |\n", t.Name, t.Name, yes(t.Ann.ReadOnly), yes(t.Ann.Destructive), cell(t.Description))
	}
	for _, t := range All() {
		fmt.Fprintf(&b, "\n### `%s`\n\n%s\n\n", t.Name, t.Description)
		props, _ := t.Schema["properties"].(map[string]any)
		if len(props) == 0 {
			b.WriteString("No parameters.\n")
			continue
		}
		b.WriteString("| parameter | type | meaning |\n|---|---|---|\n")
		req := names(t.Schema["required"])
		for _, name := range sortedKeys(props) {
			p, _ := props[name].(map[string]any)
			typ := schemaType(p)
			if slices.Contains(req, name) {
				typ += ", required"
			}
			desc, _ := p["description"].(string)
			if desc == "" {
				desc = shared[name]
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, cell(typ), cell(desc))
		}
	}
	return b.String()
}

// shared are the meanings of parameters several tools take alike, said
// once in the server's instructions rather than in each schema.
var shared = map[string]string{
	"dry_run":  "Plan only: the plan id, the cost, the records and a before/after view; nothing written.",
	"node":     "A bullet: a record key of your repository or an at:// URI.",
	"plan":     "A dry run's plan id: applies exactly that plan, or refuses (conflict) if the outline changed where it writes.",
	"after":    "The sibling to go after (a record key or URI).",
	"where":    "Instead of node: every bullet search's filters match (text, regex, tags, mentions, layout, state, created_from/_to, completed_from/_to, under, depth), taken on the outline the plan is made on; at most 5,000. The dry run gives the count and the first keys; plan=ID refuses if the set changed since.",
	"from":     "With to: the first and the last bullet of a run of siblings (instead of node).",
	"to":       "The last bullet of the run from starts.",
	"split":    "Heading texts: the run (from…to, or node's children) is cut into as many equal runs, each under a new bullet with its text, in the run's place.",
	"find":     "Text to replace in the text: literal and case-sensitive; RE2 with regex; a whole #tag or @mention (\"#old\") renames only whole ones, never #older, and the facets follow.",
	"replace":  "What find becomes (with regex, $1 is its first group; \"\" deletes the match).",
	"regex":    "find is an RE2 expression.",
	"all_keys": "List every key created with its input line (default: the first 20, the counts, and where they went).",
}

// schemaType says a parameter's type as a reader wants it: the enum's
// values, an array's items, an object's fields (required ones marked).
func schemaType(p map[string]any) string {
	typ, _ := p["type"].(string)
	if e := names(p["enum"]); len(e) > 0 {
		return typ + ": `" + strings.Join(e, "` | `") + "`"
	}
	switch typ {
	case "array":
		items, _ := p["items"].(map[string]any)
		if items == nil {
			return "array"
		}
		return "array of " + schemaType(items)
	case "object":
		props, _ := p["properties"].(map[string]any)
		if len(props) == 0 {
			return "object"
		}
		req := names(p["required"])
		var fields []string
		for _, k := range sortedKeys(props) {
			f, _ := props[k].(map[string]any)
			s := "`" + k + "`"
			if slices.Contains(req, k) {
				s += " (required)"
			}
			if ft := schemaType(f); strings.HasPrefix(ft, "array") || strings.HasPrefix(ft, "object") {
				s += ": " + ft
			}
			fields = append(fields, s)
		}
		return "object {" + strings.Join(fields, ", ") + "}"
	}
	return typ
}

func names(v any) []string {
	var out []string
	switch v := v.(type) {
	case []string:
		out = append(out, v...)
	case []any:
		for _, x := range v {
			out = append(out, fmt.Sprint(x))
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// cell escapes a table cell's pipes and line breaks.
func cell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ")
}

func yes(v bool) string {
	if v {
		return "yes"
	}
	return "no"
}
