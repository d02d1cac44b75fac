package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// Env is what handlers work with. Other identities' repositories are read
// through the engine (outline.Options.Others; nil when offline, on the
// embedded store, where only the user's own repository can be read), so
// reading them and the engine's contributor rules agree.
type Env struct {
	Engine *outline.Engine
	// Confirm, if set, are the thresholds above which a write asks the
	// person first when the client can ask (confirm.go); nil: never.
	Confirm *ConfirmRules
	// Notices, if set, is what opening the data directory found beside the
	// repository (a budget ledger missing while the journal shows spending);
	// the server tells them once, as it does the repository's own
	// (store.Noticer).
	Notices store.Noticer
	// Search keeps the search indexes of the repositories searched (the
	// user's, contributors'), bounded by bytes; nil: one made on first use
	// with the default bound.
	Search *search.Cache
	// Snapshots keeps the trees recent cursors were made from, so that
	// pages continue on the tree their read began at (bounded: a few
	// trees, minutes, bytes); nil: one made on first use with the default
	// bounds.
	Snapshots *Snapshots

	searchMu sync.Mutex
	snapMu   sync.Mutex
}

// Annotations are a tool's behaviour hints (all four are always sent).
type Annotations struct {
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
}

// Tool families, for serve --tools.
const (
	FamilyRead   = "read"   // read_outline, search, list_detached
	FamilyEdit   = "edit"   // inserting, moving, editing, deleting bullets, batches, imports, titles
	FamilySocial = "social" // comments, mirrors, comment policies
	FamilyOps    = "ops"    // undo and operations
	FamilyCheck  = "check"  // validate_record
)

// Families lists the families in order.
var Families = []string{FamilyRead, FamilyEdit, FamilySocial, FamilyOps, FamilyCheck}

// Tool is one MCP tool: its contract and handler.
type Tool struct {
	Name        string
	Title       string
	Description string
	Family      string
	Schema      map[string]any // JSON Schema of the input
	Output      map[string]any // JSON Schema of structuredContent
	Ann         Annotations
	Handle      func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error)
	// Intent is set on write tools (which apply_batch can combine): it
	// turns checked arguments into the intent the engine runs.
	Intent func(a Args) (outline.Intent, error)
	// Guard, when set on a write tool, checks its arguments against what
	// only the handler can see (other repositories) before anything is
	// planned, also inside apply_batch; an error refuses the call.
	Guard func(ctx context.Context, env *Env, a Args) error
}

// MCP returns the mcp-go tool with all four annotations set explicitly and
// its output schema.
func (t Tool) MCP() mcp.Tool {
	raw, _ := json.Marshal(t.Schema)
	m := mcp.NewTool(t.Name,
		mcp.WithDescription(t.Description),
		mcp.WithRawInputSchema(raw),
		mcp.WithReadOnlyHintAnnotation(t.Ann.ReadOnly),
		mcp.WithDestructiveHintAnnotation(t.Ann.Destructive),
		mcp.WithIdempotentHintAnnotation(t.Ann.Idempotent),
		mcp.WithOpenWorldHintAnnotation(t.Ann.OpenWorld),
	)
	m.InputSchema = mcp.ToolInputSchema{} // the raw schema is the schema
	if t.Output != nil {
		out, _ := json.Marshal(t.Output)
		m.RawOutputSchema = out
	}
	return m
}

// All returns every tool, sorted by name.
func All() []Tool {
	all := []Tool{
		readOutlineTool(), listDetachedTool(), searchTool(),
		insertTool(), moveTool(), updateTool(), deleteTool(), completeTool(), batchTool(), importTool(), setOutlineTool(),
		sortTool(),
		commentTool(), mirrorTool(), policyTool(),
		undoTool(), operationsTool(),
		validateRecordTool(),
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
}

// Select returns the tools of the named families (all when families is
// empty); readOnly keeps only read-only tools.
func Select(families []string, readOnly bool) ([]Tool, error) {
	want := map[string]bool{}
	for _, f := range families {
		f = strings.TrimSpace(f)
		if f == "" || f == "all" {
			continue
		}
		if !slices.Contains(Families, f) {
			return nil, fmt.Errorf("unknown tool family %q (families: %s, or all)", f, strings.Join(Families, ", "))
		}
		want[f] = true
	}
	var out []Tool
	for _, t := range All() {
		if readOnly && !t.Ann.ReadOnly {
			continue
		}
		if len(want) > 0 && !want[t.Family] {
			continue
		}
		out = append(out, t)
	}
	return out, nil
}

// Find returns the tool named name.
func Find(name string) (Tool, bool) {
	for _, t := range All() {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// schema helpers
func obj(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(desc string) map[string]any {
	if desc == "" {
		return map[string]any{"type": "string"}
	}
	return map[string]any{"type": "string", "description": desc}
}
func boolean(desc string) map[string]any {
	if desc == "" {
		return map[string]any{"type": "boolean"}
	}
	return map[string]any{"type": "boolean", "description": desc}
}
func integer(min, max int, desc string) map[string]any {
	s := map[string]any{"type": "integer", "minimum": min, "maximum": max}
	if desc != "" {
		s["description"] = desc
	}
	return s
}
func strList(desc string) map[string]any {
	s := map[string]any{"type": "array", "items": map[string]any{"type": "string"}}
	if desc != "" {
		s["description"] = desc
	}
	return s
}
func enum(desc string, vals ...string) map[string]any {
	s := map[string]any{"type": "string", "enum": vals}
	if desc != "" {
		s["description"] = desc
	}
	return s
}

// shared input properties: references and positions are explained once in
// the server instructions
var (
	pDryRun   = boolean("")
	pAfter    = str("Sibling to go after.")
	pPosition = enum("", "first", "last")
	pRef      = str("")
	// parameters a model would otherwise guess
	pDate   = str("YYYY-MM-DD or RFC 3339, inclusive.")
	pCursor = str("From the previous page, same other arguments.")
	pRepo   = str("Another identity's handle or DID.")
	pLayout = str("bullet|todo|h1|h2|h3|codeBlock|quoteBlock")
	// display is an open set: a value Bulleted does not render is written
	// with a notice (vocabNotices), not refused
	pDisplay = str("expanded|collapsed")
)

// toolError turns an engine error the model can act on into an isError
// result; anything else is a Go error (a bug or an outage).
func toolError(err error) (*mcp.CallToolResult, error) {
	var oe *outline.Error
	if errors.As(err, &oe) {
		kind := kindOf(oe.Kind)
		retry := kind == "unavailable" || kind == "timeout" || kind == "conflict"
		var details any
		if oe.Data != nil {
			details = oe.Data
		}
		res := typed(kind, oe.Msg, oe.Next, retry, nil)
		if details != nil {
			res.StructuredContent.(map[string]any)["error"].(map[string]any)["details"] = details
		}
		return res, nil
	}
	var ve *validate.Error
	if errors.As(err, &ve) {
		return typed("invalid", ve.Error(), "fix the named field and call again", false, ve.Problems), nil
	}
	switch {
	case errors.Is(err, store.ErrConflict):
		return typed("conflict", "the repository changed while writing: "+err.Error(), "call read_outline and try again", true, nil), nil
	case errors.Is(err, context.DeadlineExceeded):
		return typed("timeout", "the repository did not answer in time: "+err.Error(), "retry in a moment", true, nil), nil
	case errors.Is(err, context.Canceled):
		return typed("cancelled", "cancelled", "call again when ready", false, nil), nil
	}
	// engine and network failures are results the model can act on
	return typed("unavailable", "the repository is unavailable: "+err.Error(), "retry in a moment", true, nil), nil
}

// typed is an error result: text, and structured content {error: {kind,
// message, next, retryable, details}}.
func typed(kind, msg, next string, retryable bool, details any) *mcp.CallToolResult {
	e := map[string]any{"kind": kind, "message": msg, "next": next, "retryable": retryable}
	if details != nil {
		e["details"] = map[string]any{"problems": details}
	}
	text := msg
	if next != "" {
		text += "; " + next
	}
	res := mcp.NewToolResultStructured(map[string]any{"error": e}, text)
	res.IsError = true
	return res
}

// ErrorResult is toolError's result for any error: a tool result with
// isError, a machine-readable kind and what to do next.
func ErrorResult(err error) *mcp.CallToolResult {
	res, _ := toolError(err)
	return res
}

// kindOf names an engine sentinel for machine-readable errors.
func kindOf(k error) string { return outline.KindName(k) }

func badArgs(format string, args ...any) (*mcp.CallToolResult, error) {
	return typed("invalid", fmt.Sprintf(format, args...), "see the tool's input schema; nothing was written", false, nil), nil
}

// WriteResult is the structured result of every write tool.
type WriteResult struct {
	Summary      string    `json:"summary"`
	DryRun       bool      `json:"dryRun"`
	NoChange     bool      `json:"noChange,omitempty"`
	Operation    string    `json:"operation,omitempty"`
	Created      []Created `json:"created,omitempty"`
	CreatedTotal int       `json:"createdTotal,omitempty"`
	Commit       *Commit   `json:"commit,omitempty"`
	Commits      int       `json:"commits,omitempty"`
	Cost         int       `json:"cost"`
	// BudgetRemaining is the write budget left in the rolling hour
	// (absent when the repository has no budget, as the embedded store).
	BudgetRemaining *int          `json:"budgetRemaining,omitempty"`
	Writes          []store.Write `json:"writes,omitempty"`
	Diagnostics     []string      `json:"diagnostics,omitempty"`
	Before          string        `json:"before,omitempty"`
	After           string        `json:"after,omitempty"`
}

// Created is a record a write created: its key, the input position it came
// from (nodes[0].children[2]) and its text, shortened.
type Created struct {
	RKey  string `json:"rkey"`
	Input string `json:"input,omitempty"`
	Text  string `json:"text,omitempty"`
}

// Commit names the repository commit a write made.
type Commit struct {
	CID string `json:"cid"`
	Rev string `json:"rev"`
}

// maxListed bounds the created keys listed in one result.
const maxListed = 200

// maxDumped is the largest dry run whose records are shown whole.
const maxDumped = 20

// writeResult is the result of a write: compact (a dry run adds the
// records it would write and the before/after view), the same information
// in text and structured content, commit CIDs and revs in structured
// content only.
func writeResult(out *outline.Outcome, a Args) *mcp.CallToolResult {
	p := out.Plan
	// a small dry run shows its records; a large one counts them (the
	// before/after view shows its effect)
	verbose := out.DryRun && len(p.Writes) <= maxDumped
	r := WriteResult{Summary: p.Summary, DryRun: out.DryRun, Cost: p.Cost, Diagnostics: p.Diagnostics, NoChange: out.NoChange}
	for i, c := range p.Created {
		if i == maxListed {
			r.CreatedTotal = len(p.Created)
			break
		}
		r.Created = append(r.Created, Created{RKey: c.RKey, Input: c.Input, Text: clip(c.Text, 40)})
	}
	if out.Op != nil {
		r.Operation = out.Op.ID
	}
	if out.BudgetLeft >= 0 {
		left := out.BudgetLeft
		r.BudgetRemaining = &left
	}
	if n := len(out.Commits); n > 0 {
		last := out.Commits[n-1]
		r.Commit = &Commit{CID: last.Commit, Rev: last.Rev}
		r.Commits = n
	}
	if verbose {
		r.Writes = p.Writes
	} else if out.DryRun {
		counts := map[string]int{}
		for _, w := range p.Writes {
			counts[string(w.Op)+" "+strings.TrimPrefix(w.Collection, "app.bulleted.")]++
		}
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
		}
		r.Diagnostics = append(r.Diagnostics, "writes: "+strings.Join(parts, ", ")+" (records are listed for dry runs of up to 20 writes)")
	}
	if out.DryRun && out.Before != nil && len(p.Writes) > 0 {
		r.Before, r.After = preview(out.Before, p)
	}
	var b strings.Builder
	switch {
	case out.DryRun:
		b.WriteString("Dry run, nothing written: ")
	case out.NoChange:
		b.WriteString("No change: ")
	}
	fmt.Fprintf(&b, "%s. %d write(s), cost %d point(s)", p.Summary, len(p.Writes), p.Cost)
	if r.BudgetRemaining != nil {
		fmt.Fprintf(&b, " (%d left this hour)", *r.BudgetRemaining)
	}
	if r.Commits > 1 {
		fmt.Fprintf(&b, " in %d commits", r.Commits)
	}
	if r.Operation != "" {
		fmt.Fprintf(&b, "; operation %s", r.Operation)
	}
	b.WriteString(".")
	for _, d := range r.Diagnostics {
		b.WriteString(" Note: " + d + ".")
	}
	if len(r.Created) > 0 {
		b.WriteString("\nCreated:")
		for _, c := range r.Created {
			fmt.Fprintf(&b, "\n- %s ·%s", c.Input, c.RKey)
			if c.Text != "" {
				fmt.Fprintf(&b, " %q", c.Text)
			}
		}
		if r.CreatedTotal > 0 {
			fmt.Fprintf(&b, "\n… %d more; read_outline shows them", r.CreatedTotal-len(r.Created))
		}
	}
	for _, w := range r.Writes {
		fmt.Fprintf(&b, "\n%s %s/%s", w.Op, w.Collection, w.RKey)
	}
	if r.Before != "" || r.After != "" {
		b.WriteString("\nBefore:\n" + r.Before + "\nAfter:\n" + r.After)
	}
	return mcp.NewToolResultStructured(r, b.String())
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// previewRows bounds each side of a dry run's before/after view.
const previewRows = 60

// preview renders the part of the outline a plan touches, before and
// after, at the same scope: the parent (after the plan) of the first
// touched bullet.
func preview(before *outline.Tree, p *outline.Plan) (string, string) {
	after := before.Next(before.Commit, before.Rev, outline.WriteChanges(p.Writes))
	scope := ""
	for _, k := range p.Touched {
		if it, err := after.Resolve(k); err == nil {
			if par := after.Parent(it); par != nil {
				scope = par.Key()
			}
			break
		}
		if it, err := before.Resolve(k); err == nil { // deleted by the plan
			if par := before.Parent(it); par != nil {
				scope = par.Key()
			}
			break
		}
	}
	render := func(t *outline.Tree) string {
		var root *outline.Item
		if scope != "" {
			it, err := t.Resolve(scope)
			if err != nil {
				return "(" + scope + " does not exist here)"
			}
			root = it
		}
		v, err := view.Read(t, root, view.Options{Depth: 2, Limit: previewRows})
		if err != nil {
			return err.Error()
		}
		return v.Text(false) + v.Continue("read_outline")
	}
	return render(before), render(after)
}

// others reads another identity's repository (a handle or DID) as a tree;
// nil when offline.
func (env *Env) others() outline.Others { return env.Engine.Others() }
