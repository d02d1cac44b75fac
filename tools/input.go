package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Coercions are the only liberties taken with arguments before they are
// validated against the tool's input schema; real clients need them:
//
//  1. a JSON array or object sent as a string, where the schema wants an
//     array or object ("nodes": "[{\"text\":\"a\"}]");
//  2. "true" / "false" (any case, spaces trimmed) where it wants a boolean;
//  3. a whole number written as a float (2.0) or as a string ("2") where it
//     wants an integer;
//  4. one string where it wants an array of strings ("nodes": "3kab…").
//
// Everything else must match the schema: unknown keys are refused by name
// (with the closest known key), wrong types and out-of-range values with
// their path, and nothing is written.
var Coercions = []string{
	"a JSON array or object sent as a string",
	`"true"/"false" strings for booleans`,
	`integral floats (2.0) and numeric strings ("2") for integers`,
	"a single string for an array of strings",
}

// compiled input schemas, by tool name
var schemas sync.Map

func (t Tool) compiled() (*jsonschema.Schema, error) {
	if s, ok := schemas.Load(t.Name); ok {
		return s.(*jsonschema.Schema), nil
	}
	raw, err := json.Marshal(t.Schema)
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	url := "mem:///" + t.Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, err
	}
	schemas.Store(t.Name, s)
	return s, nil
}

// Check coerces a (see Coercions) and validates it against the tool's input
// schema; the error is an *outline.Error of kind ErrInvalidInput naming
// every problem by path.
func (t Tool) Check(a Args) (Args, error) {
	v := coerce(t.Schema, map[string]any(a))
	s, err := t.compiled()
	if err != nil {
		return nil, fmt.Errorf("%s: input schema: %w", t.Name, err) // a bug
	}
	m, _ := v.(map[string]any)
	if err := s.Validate(jsonValue(m)); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return nil, &outline.Error{Kind: outline.ErrInvalidInput, Msg: describe(t, ve), Next: "fix the named argument(s) and call again; nothing was written"}
		}
		return nil, err
	}
	return Args(m), nil
}

// jsonValue turns decoded arguments into the validator's JSON model
// (numbers as json.Number).
func jsonValue(v any) any {
	raw, _ := json.Marshal(v)
	out, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	return out
}

// coerce applies the Coercions to v as schema s describes it.
func coerce(s map[string]any, v any) any {
	typ, _ := s["type"].(string)
	switch typ {
	case "object":
		if str, ok := v.(string); ok && strings.HasPrefix(strings.TrimSpace(str), "{") {
			var m map[string]any
			if json.Unmarshal([]byte(str), &m) == nil {
				v = m
			}
		}
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		props, _ := s["properties"].(map[string]any)
		out := make(map[string]any, len(m))
		for k, x := range m {
			if ps, ok := props[k].(map[string]any); ok {
				out[k] = coerce(ps, x)
			} else {
				out[k] = x
			}
		}
		return out
	case "array":
		items, _ := s["items"].(map[string]any)
		if str, ok := v.(string); ok {
			if strings.HasPrefix(strings.TrimSpace(str), "[") {
				var xs []any
				if json.Unmarshal([]byte(str), &xs) == nil {
					v = xs
				}
			} else if it, _ := items["type"].(string); it == "string" {
				v = []any{str}
			}
		}
		xs, ok := v.([]any)
		if !ok || items == nil {
			return v
		}
		out := make([]any, len(xs))
		for i, x := range xs {
			out[i] = coerce(items, x)
		}
		return out
	case "boolean":
		if str, ok := v.(string); ok {
			switch strings.ToLower(strings.TrimSpace(str)) {
			case "true":
				return true
			case "false":
				return false
			}
		}
	case "integer":
		switch x := v.(type) {
		case string:
			if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
				return float64(n)
			}
		case float64:
			if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
				return x
			}
		}
	}
	return v
}

var printer = message.NewPrinter(language.English)

// describe turns a validation error into one sentence per problem, each
// with its argument path.
func describe(t Tool, ve *jsonschema.ValidationError) string {
	var leaves []*jsonschema.ValidationError
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, e)
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	var msgs []string
	seen := map[string]bool{}
	for _, e := range leaves {
		path := argPath(e.InstanceLocation)
		var msg string
		switch k := e.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			var parts []string
			for _, p := range k.Properties {
				q := joinPath(path, p)
				s := fmt.Sprintf("unknown argument %s", q)
				keys := known(t.Schema, e.InstanceLocation)
				if alt := synonym(p, keys); alt != "" {
					s += " (" + alt + ")"
				} else if near := closest(p, keys); near != "" {
					s += fmt.Sprintf(" (did you mean %s?)", joinPath(path, near))
				} else if p == "children" {
					s += " (nodes nest two levels; pass deeper outlines as markdown)"
				}
				parts = append(parts, s)
			}
			msg = strings.Join(parts, "; ")
		case *kind.Required:
			var parts []string
			for _, p := range k.Missing {
				parts = append(parts, joinPath(path, p)+" is required")
			}
			msg = strings.Join(parts, "; ")
		case *kind.Type:
			msg = fmt.Sprintf("%s must be %s, got %s", orArgs(path), strings.Join(k.Want, " or "), k.Got)
		default:
			msg = fmt.Sprintf("%s: %s", orArgs(path), e.ErrorKind.LocalizedString(printer))
		}
		if !seen[msg] {
			seen[msg] = true
			msgs = append(msgs, msg)
		}
	}
	sort.Strings(msgs)
	return "invalid arguments for " + t.Name + ": " + strings.Join(msgs, "; ")
}

func orArgs(path string) string {
	if path == "" {
		return "the arguments"
	}
	return path
}

// argPath renders an instance location as nodes[1].text.
func argPath(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteString(".")
		}
		b.WriteString(p)
	}
	return b.String()
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// known lists the property names the schema allows at loc.
func known(s map[string]any, loc []string) []string {
	cur := s
	for _, p := range loc {
		if _, err := strconv.Atoi(p); err == nil {
			cur, _ = cur["items"].(map[string]any)
		} else {
			props, _ := cur["properties"].(map[string]any)
			cur, _ = props[p].(map[string]any)
		}
		if cur == nil {
			return nil
		}
	}
	props, _ := cur["properties"].(map[string]any)
	out := make([]string, 0, len(props))
	for k := range props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// synonyms are names models guess for arguments that are called
// otherwise here, with the arguments they mean (the first present in a
// tool's schema is suggested; every present one for a position).
var synonyms = map[string][]string{
	"rkey":  {"node", "subject", "original", "root"},
	"key":   {"node", "subject", "original", "root"},
	"id":    {"node", "subject", "original", "root"},
	"uri":   {"node", "subject", "original", "root"},
	"index": {"after", "position"},
	"query": {"text"},
	"q":     {"text"},
}

// synonym suggests what k (an unknown argument) is called in a schema
// with keys: "did you mean node?", or "" when it knows no synonym there.
func synonym(k string, keys []string) string {
	alts, ok := synonyms[strings.ToLower(k)]
	if !ok {
		return ""
	}
	var have []string
	for _, a := range alts {
		if slices.Contains(keys, a) {
			have = append(have, a)
		}
	}
	switch {
	case len(have) == 0:
		return ""
	case slices.Equal(have, []string{"after", "position"}):
		return "did you mean after or position? there is no numeric index: after=<sibling key> places it after that sibling, position=first|last"
	default:
		return "did you mean " + have[0] + "?"
	}
}

// closest is the known key nearest to k (parent_id → parent, Text → text),
// or "" when none is near.
func closest(k string, keys []string) string {
	norm := func(s string) string {
		s = strings.ToLower(s)
		for _, suf := range []string{"_id", "id", "_key", "key", "_uri", "uri", "s"} {
			if len(s) > len(suf)+2 {
				s = strings.TrimSuffix(s, suf)
			}
		}
		return strings.NewReplacer("_", "", "-", "").Replace(s)
	}
	best, bestD := "", 4
	for _, c := range keys {
		d := levenshtein(norm(k), norm(c))
		if norm(k) == norm(c) {
			d = 0
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	if bestD > max(1, len(k)/3) {
		return ""
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev = cur
	}
	return prev[len(b)]
}
