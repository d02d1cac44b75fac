package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/outline"
	"github.com/bulleted-mcp/bulleted-mcp/store"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
	"github.com/bulleted-mcp/bulleted-mcp/view"
)

// Env is what handlers work with.
type Env struct {
	Engine *outline.Engine
	// Others reads another identity's repository (a handle or DID) as a
	// tree; nil when offline (the embedded store), where only the user's own
	// repository can be read.
	Others func(ctx context.Context, ident string) (*outline.Tree, error)
}

// Tool is one MCP tool: its contract and handler.
type Tool struct {
	Name        string
	Title       string
	Description string
	Schema      map[string]any // JSON Schema of the input
	ReadOnly    bool
	Destructive bool
	Idempotent  bool
	OpenWorld   bool
	Handle      func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error)
	// Plan is set on write tools that apply_batch can combine.
	Plan func(p *outline.Planner, a Args) error
}

// MCP returns the mcp-go tool with all four annotations set explicitly.
func (t Tool) MCP() mcp.Tool {
	raw, _ := json.Marshal(t.Schema)
	m := mcp.NewTool(t.Name,
		mcp.WithDescription(t.Description),
		mcp.WithRawInputSchema(raw),
		mcp.WithTitleAnnotation(t.Title),
		mcp.WithReadOnlyHintAnnotation(t.ReadOnly),
		mcp.WithDestructiveHintAnnotation(t.Destructive),
		mcp.WithIdempotentHintAnnotation(t.Idempotent),
		mcp.WithOpenWorldHintAnnotation(t.OpenWorld),
	)
	m.InputSchema = mcp.ToolInputSchema{} // the raw schema is the schema
	return m
}

// All returns every tool, sorted by name.
func All() []Tool {
	all := append(append(append(append([]Tool{}, readTools()...), writeTools()...), recordTools()...), operationTools()...)
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
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

func str(desc string) map[string]any { return map[string]any{"type": "string", "description": desc} }
func boolean(desc string) map[string]any {
	return map[string]any{"type": "boolean", "description": desc}
}
func enum(desc string, vals ...string) map[string]any {
	return map[string]any{"type": "string", "enum": vals, "description": desc}
}

const refDesc = "a record key of your repository or a full at:// URI"

var (
	pDryRun   = boolean("Plan only: return the records, cost and before/after view, write nothing (default false).")
	pAfter    = str("Sibling to place after (" + refDesc + "). Use this or position.")
	pPosition = enum("first or last among the parent's children (default last). Use this or after.", "first", "last")
)

// toolError turns an engine error the model can act on into an isError
// result; anything else is a Go error (a bug or an outage).
func toolError(err error) (*mcp.CallToolResult, error) {
	var oe *outline.Error
	if errors.As(err, &oe) {
		e := map[string]any{"kind": kindOf(oe.Kind), "message": oe.Msg, "next": oe.Next}
		if oe.Data != nil {
			e["details"] = oe.Data
		}
		res := mcp.NewToolResultStructured(map[string]any{"error": e}, oe.Error())
		res.IsError = true
		return res, nil
	}
	var ve *validate.Error
	if errors.As(err, &ve) {
		return mcp.NewToolResultError(ve.Error() + "; fix the named field and call again"), nil
	}
	if errors.Is(err, store.ErrConflict) {
		return mcp.NewToolResultError("the repository changed while writing; call read_outline and try again"), nil
	}
	// engine and network failures are results the model can act on
	res := mcp.NewToolResultStructured(map[string]any{"error": map[string]any{"kind": "unavailable", "message": err.Error(), "next": "retry in a moment", "retryable": true}},
		"the repository is unavailable: "+err.Error()+"; retry in a moment")
	res.IsError = true
	return res, nil
}

// kindOf names an engine sentinel for machine-readable errors.
func kindOf(k error) string {
	for _, c := range []struct {
		err  error
		kind string
	}{
		{outline.ErrNodeNotFound, "node_missing"}, {outline.ErrAnchorMissing, "anchor_missing"},
		{outline.ErrParentMissing, "parent_missing"}, {outline.ErrCrossRepo, "cross_repo"},
		{outline.ErrCycle, "cycle"}, {outline.ErrHasChildren, "has_children"}, {outline.ErrNotOwner, "not_yours"},
		{outline.ErrInvalidInput, "invalid"}, {outline.ErrBudget, "budget"}, {outline.ErrConflict, "conflict"},
		{outline.ErrTooLarge, "too_large"}, {outline.ErrIncomplete, "partial"}, {outline.ErrCancelled, "cancelled"},
		{outline.ErrUnavailable, "unavailable"}, {outline.ErrTimeout, "timeout"}, {outline.ErrNoChange, "no_change"},
	} {
		if errors.Is(k, c.err) {
			return c.kind
		}
	}
	return "error"
}

func badArgs(format string, args ...any) (*mcp.CallToolResult, error) {
	return mcp.NewToolResultError(fmt.Sprintf(format, args...) + "; see the tool's input schema"), nil
}

// WriteResult is the structured result of every write tool.
type WriteResult struct {
	Summary string            `json:"summary"`
	DryRun  bool              `json:"dryRun"`
	Created []outline.Created `json:"created,omitempty"`
	Commit  *Commit           `json:"commit,omitempty"`
	Commits int               `json:"commits,omitempty"`
	Cost    int               `json:"cost"`
	// BudgetRemaining is the write budget left in the rolling hour
	// (absent when the repository has no budget, as the embedded store).
	BudgetRemaining *int          `json:"budgetRemaining,omitempty"`
	Writes          []store.Write `json:"writes,omitempty"`
	Diagnostics     []string      `json:"diagnostics,omitempty"`
	Operation       string        `json:"operation,omitempty"`
	NoChange        bool          `json:"noChange,omitempty"`
	Before          string        `json:"before,omitempty"`
	After           string        `json:"after,omitempty"`
}

// Commit names the repository commit a write made.
type Commit struct {
	CID string `json:"cid"`
	Rev string `json:"rev"`
}

func writeResult(out *outline.Outcome) *mcp.CallToolResult {
	p := out.Plan
	r := WriteResult{Summary: p.Summary, DryRun: out.DryRun, Created: p.Created, Cost: p.Cost, Diagnostics: p.Diagnostics, NoChange: out.NoChange}
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
	if out.DryRun {
		r.Writes = p.Writes
		if out.Before != nil {
			r.Before, r.After = preview(out.Before, p)
		}
	}
	var b strings.Builder
	if out.DryRun {
		b.WriteString("Dry run, nothing written: ")
	}
	fmt.Fprintf(&b, "%s. %d write(s), cost %d point(s)", p.Summary, len(p.Writes), p.Cost)
	if r.BudgetRemaining != nil {
		fmt.Fprintf(&b, " (%d left this hour)", *r.BudgetRemaining)
	}
	if r.Commit != nil {
		fmt.Fprintf(&b, ", committed %s (rev %s)", r.Commit.CID, r.Commit.Rev)
	}
	if len(p.Created) > 0 {
		keys := make([]string, len(p.Created))
		for i, c := range p.Created {
			keys[i] = c.RKey
		}
		fmt.Fprintf(&b, "; created %s", strings.Join(keys, ", "))
	}
	b.WriteString(".")
	for _, d := range p.Diagnostics {
		b.WriteString(" Note: " + d + ".")
	}
	if out.DryRun && r.After != "" {
		b.WriteString("\nAfter:\n" + r.After)
	}
	return mcp.NewToolResultStructured(r, b.String())
}

// preview renders the touched part of the outline before and after a plan.
func preview(before *outline.Tree, p *outline.Plan) (string, string) {
	after := outline.Rebuild(outline.Applied(before.Snap, p.Writes), before)
	render := func(t *outline.Tree) string {
		var root *outline.Item
		for _, k := range p.Touched {
			if it, err := t.Resolve(k); err == nil {
				root = it.Parent
				break
			}
		}
		v, err := view.Read(t, root, view.Options{Depth: 2})
		if err != nil {
			return err.Error()
		}
		return v.Text(false)
	}
	return render(before), render(after)
}
