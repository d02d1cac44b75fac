package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
)

// pWhere selects the bullets a write changes by search's filters (the
// tools' descriptions say so). Its properties are search's (checked by
// whereArg, naming the key): listed once, on search, not again on every
// tool that takes where.
var pWhere = map[string]any{"type": "object"}

// whereKeys are the filters where takes: search's, without its paging.
var whereKeys = []string{"text", "regex", "tags", "mentions", "layout", "state", "created_from", "created_to", "completed_from", "completed_to", "under", "depth"}

// whereArg reads where (nil when absent), refusing an unknown key, a
// wrong type or a bad value with the key's path (where.state).
func whereArg(a Args) (*intent.Where, error) {
	v, ok := a["where"]
	if !ok || v == nil {
		return nil, nil
	}
	if s, isStr := v.(string); isStr {
		var m map[string]any
		if json.Unmarshal([]byte(s), &m) != nil {
			return nil, argErr("where must be an object of search's filters (%s)", strings.Join(whereKeys, ", "))
		}
		v = m
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, argErr("where must be an object of search's filters (%s)", strings.Join(whereKeys, ", "))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(whereKeys, k) {
			hint := ""
			if c := closest(k, whereKeys); c != "" {
				hint = fmt.Sprintf(" (did you mean where.%s?)", c)
			}
			return nil, argErr("where.%s is not one of search's filters%s: %s", k, hint, strings.Join(whereKeys, ", "))
		}
	}
	w := Args(m)
	for _, k := range []string{"text", "layout", "state", "created_from", "created_to", "completed_from", "completed_to", "under"} {
		if x, ok := w[k]; ok && x != nil {
			if _, isStr := x.(string); !isStr {
				return nil, argErr("where.%s must be a string", k)
			}
		}
	}
	regex, err := w.Bool("regex", false)
	if err != nil {
		return nil, argErr("where.%v", err)
	}
	tags, _, err := w.Strings("tags")
	if err != nil {
		return nil, argErr("where.%v", err)
	}
	ments, _, err := w.Strings("mentions")
	if err != nil {
		return nil, argErr("where.%v", err)
	}
	depth, err := w.Int("depth", 0)
	if err != nil {
		return nil, argErr("where.%v", err)
	}
	if x, given := w["depth"]; given && x != nil && depth < 1 {
		return nil, argErr("where.depth must be a whole number of at least 1 (1: under's children only), got %v", w["depth"])
	}
	if depth > 0 && w.Str("under") == "" {
		return nil, argErr("where.depth needs where.under: it counts the levels below that bullet")
	}
	out := &intent.Where{Text: w.Str("text"), Regex: regex, Tags: tags, Mentions: ments, Layout: w.Str("layout"), State: w.Str("state"),
		CreatedFrom: w.Str("created_from"), CreatedTo: w.Str("created_to"), CompletedFrom: w.Str("completed_from"), CompletedTo: w.Str("completed_to"),
		Under: w.Str("under"), Depth: depth}
	switch out.State {
	case "", "open", "done":
	default:
		return nil, argErr("where.state must be open or done, got %q", out.State)
	}
	for _, d := range []struct {
		k, v string
		end  bool
	}{{"created_from", out.CreatedFrom, false}, {"created_to", out.CreatedTo, true}, {"completed_from", out.CompletedFrom, false}, {"completed_to", out.CompletedTo, true}} {
		if _, err := search.ParseDate(d.v, d.end); err != nil {
			return nil, argErr("where.%s: %v", d.k, err)
		}
	}
	if !out.Filters() {
		return nil, argErr("where needs a filter besides under (text, tags, mentions, layout, state or a date)")
	}
	return out, nil
}

// nodeOrWhere reads where for a tool that takes a node or where: exactly
// one of them (nil where: node).
func nodeOrWhere(a Args) (*intent.Where, error) {
	where, err := whereArg(a)
	if err != nil {
		return nil, err
	}
	return where, oneSelection(map[string]bool{"node": a.Str("node") != "", "where": where != nil}, "node", "where")
}

// oneSelection refuses a call that names its bullets in more than one way,
// or in none: given are the forms sent, by argument name.
func oneSelection(given map[string]bool, forms ...string) error {
	var sent []string
	for _, f := range forms {
		if given[f] {
			sent = append(sent, f)
		}
	}
	switch {
	case len(sent) == 1:
		return nil
	case len(sent) == 0:
		return argErr("pass one of %s", strings.Join(forms, ", "))
	}
	return argErr("pass one of %s, not %s together", strings.Join(forms, ", "), strings.Join(sent, " and "))
}

// selecting reports whether in (a tool's intent, or a batch of them)
// selects bullets by where: applying its kept plan then checks the set
// first (recheckSelection).
func selecting(in outline.Intent) bool {
	switch x := in.(type) {
	case intent.Batch:
		return slices.ContainsFunc(x, func(s outline.Step) bool { return selecting(s.Intent) })
	case annotated:
		return selecting(x.Intent)
	case intent.MoveWhere, intent.CompleteWhere, intent.DeleteWhere:
		return true
	case intent.EditWhere:
		return x.Where != nil
	}
	return false
}

// recheckSelection refuses to apply plan id when the bullets its where
// selects are no longer the set its dry run took: a bullet another writer
// added, edited into or out of the filters, or deleted since, that the
// plan's own check (the records it writes, the siblings it places among)
// would not see. It plans in again, as a dry run, on the outline as it is
// now, and compares the selections' counts and fingerprints; the check
// plan is dropped. An unknown plan id is left to Apply to refuse.
func recheckSelection(ctx context.Context, env *Env, id string, in outline.Intent) error {
	kept := env.Engine.PlanOf(id)
	if kept == nil || !selecting(in) {
		return nil
	}
	was := intent.Selections(kept.Diagnostics)
	now, err := env.Engine.Do(ctx, in, true)
	if err != nil {
		return err
	}
	if now.PlanID != "" {
		env.Engine.DropPlan(now.PlanID)
	}
	is := intent.Selections(now.Plan.Diagnostics)
	if slices.Equal(was, is) {
		return nil
	}
	return &outline.Error{Kind: outline.ErrConflict,
		Msg:  fmt.Sprintf("the bullets where selects changed since the dry run of plan %s (then: %s; now: %s); nothing was written", id, strings.Join(was, ", "), strings.Join(is, ", ")),
		Next: "dry-run the call again and review the new set (another writer changed the outline)",
		Data: map[string]any{"then": was, "now": is}}
}
