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
	"sync/atomic"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
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
	// WriteRefused, if set, is why the repository cannot be written (an
	// embedded store in a read-only directory: store.ErrReadOnly): every
	// tool that writes answers it before anything runs.
	WriteRefused error
	// GiveBack, if set, returns the memory a big plan's work left behind
	// to the system (serve: debug.FreeOSMemory), run in the background
	// after a write of BigPlan writes or more (a dry run's garbage is
	// reused by the next call; a forced collection would double its
	// cost): without it the
	// process keeps the peak of its largest edit (100k records: RSS 229 →
	// 391 MB after a 10k delete and its undo).
	GiveBack func()

	searchMu sync.Mutex
	snapMu   sync.Mutex
	giving   atomic.Bool
}

// Settling reports whether a GiveBack is running (benchmarks wait for it).
func (env *Env) Settling() bool { return env.giving.Load() }

// BigPlan is the size of a plan (writes) after which GiveBack runs.
const BigPlan = 2000

// settle runs GiveBack after a big plan's write (one at a time).
func (env *Env) settle(out *outline.Outcome) {
	if env.GiveBack == nil || out == nil || out.DryRun || out.Plan == nil || len(out.Plan.Writes) < BigPlan {
		return
	}
	if env.giving.CompareAndSwap(false, true) {
		go func() {
			defer env.giving.Store(false)
			env.GiveBack()
		}()
	}
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

// MCP returns the mcp-go tool with its title, all four annotations set
// explicitly and its output schema. The title goes twice: as the tool's
// title (protocol 2025-06-18 and later) and as annotations.title (the
// only place 2025-03-26 clients read one).
func (t Tool) MCP() mcp.Tool {
	raw, _ := json.Marshal(sent(t.Schema))
	m := mcp.NewTool(t.Name,
		mcp.WithToolTitle(t.Title),
		mcp.WithTitleAnnotation(t.Title),
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

// sent is an input schema as tools/list sends it: without
// additionalProperties, which every object of it has (false: unknown keys
// are refused by name, as the server instructions say, when Check
// validates a call against the full schema), 27 bytes an object of what a
// model reads of every tool.
func sent(s map[string]any) map[string]any {
	out := make(map[string]any, len(s))
	for k, v := range s {
		switch x := v.(type) {
		case map[string]any:
			if k == "properties" {
				ps := make(map[string]any, len(x))
				for pk, pv := range x {
					if pm, ok := pv.(map[string]any); ok {
						ps[pk] = sent(pm)
					} else {
						ps[pk] = pv
					}
				}
				out[k] = ps
			} else {
				out[k] = sent(x)
			}
		default:
			if k != "additionalProperties" || v != false {
				out[k] = v
			}
		}
	}
	return out
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
	pPlan     = str("") // the instructions say what a plan id is
	pAfter    = str("") // and where after puts a bullet
	pPosition = enum("", "first", "last")
	pRef      = str("")
	// parameters a model would otherwise guess
	pDate   = str("YYYY-MM-DD or RFC 3339")
	pCursor = str("Same other arguments.")
	pRepo   = str("Another's handle or DID.")
	pLayout = str("bullet|todo|h1|h2|h3|codeBlock|quoteBlock")
	// display is an open set: a value Bulleted does not render is written
	// with a notice (vocabNotices), not refused
	pDisplay = str("expanded|collapsed")
)

// toolError turns an engine error the model can act on into an isError
// result; anything else is a Go error (a bug or an outage).
func toolError(err error) (*mcp.CallToolResult, error) {
	if errors.Is(err, store.ErrReadOnly) {
		// no kind of its own in outline.Kinds: unavailable, not to retry
		return typed("unavailable", err.Error(), "not one to retry: read with read_outline, search or export; write to a writable copy of the store", false, nil), nil
	}
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
	Summary   string `json:"summary"`
	DryRun    bool   `json:"dryRun"`
	NoChange  bool   `json:"noChange,omitempty"`
	Operation string `json:"operation,omitempty"`
	// Plan names a dry run's plan: the same call with plan=ID applies
	// exactly these records, or refuses (conflict) if the outline changed
	// where they go.
	Plan string `json:"plan,omitempty"`
	// Created lists the records created, with their input position and
	// text, for writes of up to maxListed; larger writes give Keys.
	Created []Created `json:"created,omitempty"`
	// Keys are the keys of every record created, in input order (the k-th
	// bullet of the input, children after their parent), for writes of
	// more than maxListed; Lines is each one's input line (imports).
	Keys         []string `json:"keys,omitempty"`
	Lines        []int    `json:"lines,omitempty"`
	CreatedTotal int      `json:"createdTotal,omitempty"`
	// Rev is the revision of the last commit the write made (what search
	// since takes); Commits counts them when there were more than one.
	Rev     string `json:"rev,omitempty"`
	Commits int    `json:"commits,omitempty"`
	Cost    int    `json:"cost"`
	// BudgetRemaining is the write budget left in the rolling hour
	// (absent when the repository has no budget, as the embedded store).
	BudgetRemaining *int          `json:"budgetRemaining,omitempty"`
	Writes          []store.Write `json:"writes,omitempty"`
	// Diagnostics are the plan's notices, each distinct one once (a count
	// says how many times it came up).
	Diagnostics []string `json:"diagnostics,omitempty"`
	Before      string   `json:"before,omitempty"`
	After       string   `json:"after,omitempty"`
	// Changes are the bullets a dry run touches, before and after (the
	// first maxChanges; ChangesTotal counts them all when more).
	Changes      []Change `json:"changes,omitempty"`
	ChangesTotal int      `json:"changesTotal,omitempty"`
}

// Created is a record a write created: its key, the input position it came
// from (nodes[0].children[2]; an import's input line) and its text,
// shortened.
type Created struct {
	RKey  string `json:"rkey"`
	Input string `json:"input,omitempty"`
	Line  int    `json:"line,omitempty"`
	Text  string `json:"text,omitempty"`
}

// maxListed is the largest write whose created records are listed as
// objects (input position and text); larger ones list keys.
const maxListed = 20

// maxDumped is the largest dry run whose records are shown whole.
const maxDumped = 20

// sampleKeys is how many of a big import's created keys its result lists
// unless every one is asked for (all_keys): a 2,000-line import's result
// stays a few KB in either part (it was 14 KB of text and 41 KB of
// structured content with every key and line).
const sampleKeys = 20

// report is what a write report holds beyond the outcome.
type report struct {
	allKeys bool           // every created key (all_keys), as far as one result holds them
	lines   map[string]int // input position → input line (imports)
	notes   []string       // what of the input was not written, and why
	// changes: a dry run's touched bullets; at most maxCh listed
	changes *changeSet
	maxCh   int
	after   *outline.Tree // a dry run's tree after its plan, built once
	// selection: the plan works on a set taken by where (its note says
	// it): a dry run counts the records and shows no before/after view
	selection bool
	// applied: a kept plan applied (plan=ID): its dry run listed the
	// set's sample keys, so the result names the set by count and id
	applied bool
}

// writeResult is the result of a write (see writeReport).
func writeResult(out *outline.Outcome, a Args) *mcp.CallToolResult {
	return writeReport(out, report{applied: a.Str("plan") != ""})
}

// writeReport is the result of a write: compact (a dry run adds the
// records it would write and the before/after view, or for a plan on a
// set taken by where its records counted, the set's note giving its keys,
// and a replace's report bullet by bullet), the same information
// in the text and the structured content (clients show the model one or
// the other), commit CIDs and revs in the structured content only. It fits
// in ResultBudget: the before/after view gets fewer rows, then a dry run's
// records are counted rather than listed, then the text lists fewer keys
// (every key stays in the structured content), each step said in both
// parts.
func writeReport(out *outline.Outcome, rep report) *mcp.CallToolResult {
	rows, dump := previewRows, true
	keep := -1 // created keys listed (-1: all)
	if rep.lines != nil && !rep.allKeys && len(out.Plan.Created) > max(maxListed, sampleKeys) {
		// an import: a sample (insert_after lists every key, which the
		// agent goes on to use)
		keep = sampleKeys
		rep.notes = append(rep.notes, "all_keys=true lists every key with its input line")
	}
	rep.selection = len(intent.Selections(out.Plan.Diagnostics)) > 0
	if rep.selection {
		// a set taken by where: its note gives the count and a sample of
		// keys, and a replace's review reports bullet by bullet; the
		// records, the bullets touched one by one and the before/after
		// view (of bullets spread over the outline) would repeat them
		dump = false
	}
	if out.DryRun && out.Before != nil && len(out.Plan.Writes) > 0 && !rep.selection {
		rep.after = out.After()
		rep.changes, rep.maxCh = changesOf(out.Before, rep.after, out.Plan, maxChanges), maxChanges
	}
	for {
		res, textCut := buildWrite(out, rep, rows, dump, -1, keep)
		size := ResultSize(res)
		switch {
		case size <= ResultBudget:
			return res
		case out.DryRun && out.Before != nil && rows > 5:
			rows /= 2
			continue
		case rep.changes != nil && len(rep.changes.list) > rep.maxCh/2 && rep.maxCh > 10:
			rep.maxCh /= 2
			continue
		case dump && out.DryRun && len(out.Plan.Writes) <= maxDumped:
			dump = false
			continue
		}
		if textCut < 0 {
			return res // nothing more to shorten; the server's bound says so
		}
		// list fewer keys in the text: every key stays in keys
		room := textCut - (size - ResultBudget) - 512
		res, _ = buildWrite(out, rep, rows, dump, max(0, room), keep)
		if size = ResultSize(res); size <= ResultBudget {
			return res
		}
		// a write too large for its keys to fit one result (some 3,000
		// bullets): the first ones, and the result says so in both parts
		n := len(out.Plan.Created)
		keep = max(0, n-(size-ResultBudget+1024)*n/max(1, size))
		rep.notes = append(rep.notes, fmt.Sprintf("the keys listed are all that fit one result (%d of %d)", keep, n))
		res, _ = buildWrite(out, rep, rows, dump, 0, keep)
		return res
	}
}

// buildWrite builds a write report with a before/after view of rows rows
// a side, the dry run's records listed (dump), and at most textKeys bytes
// of created keys in the text (< 0: all) and at most maxKeys keys in all
// (< 0: all). It returns the bytes the text's key list took (-1: none).
// Everything it says comes from what the engine returned: the plan (its
// summary, writes, cost, created records, diagnostics), the commits, the
// operation, the kept plan's id and, for a dry run, the trees before and
// after the plan.
func buildWrite(out *outline.Outcome, rep report, rows int, dump bool, textKeys, maxKeys int) (*mcp.CallToolResult, int) {
	p := out.Plan
	r := WriteResult{Summary: p.Summary, DryRun: out.DryRun, Cost: p.Cost, NoChange: out.NoChange, Plan: out.PlanID}
	diags := append(append([]string(nil), p.Diagnostics...), rep.notes...)
	if rep.applied && !out.DryRun {
		for i, d := range diags {
			if sel := intent.Selections([]string{d}); len(sel) == 1 && sel[0] != d {
				diags[i] = sel[0] + ", as its dry run listed"
			}
		}
	}
	diags = append(diags, listCreated(&r, p.Created, rep.lines, maxKeys)...)
	if s := costShare(p.Cost, out.BudgetLeft, out.DryRun); s != "" {
		diags = append(diags, s)
	}
	committed(&r, out)
	if out.DryRun {
		diags = append(diags, p.Review...)
		diags = append(diags, dryRunRecords(&r, p.Writes, dump, rep.selection)...)
		if !rep.selection {
			diags = append(diags, dryRunViews(&r, out, rep, rows)...)
		}
	}
	keyText, listed := keyLine(r.Keys, r.Lines, textKeys)
	if listed < len(r.Keys) {
		diags = append(diags, fmt.Sprintf("the text lists the keys of the first %d of %d created bullets to fit one result; keys has %d", listed, len(p.Created), len(r.Keys)))
	}
	r.Diagnostics = dedupe(diags)
	var b strings.Builder
	writeHead(&b, &r, out, rep.changes)
	writeCreated(&b, r.Created)
	cut := -1
	if len(r.Keys) > 0 {
		writeKeys(&b, &r, len(p.Created), keyText, listed)
		cut = len(keyText)
	}
	for _, w := range r.Writes {
		fmt.Fprintf(&b, "\n%s %s/%s", w.Op, w.Collection, w.RKey)
	}
	if r.Before != "" || r.After != "" {
		b.WriteString("\nBefore:\n" + r.Before + "\nAfter:\n" + r.After)
	}
	return mcp.NewToolResultStructured(r, b.String()), cut
}

// listCreated lists the records a write created: as objects (input
// position, line, text) up to maxListed, else their keys, at most maxKeys
// of them (< 0: all). It returns what the result must say.
func listCreated(r *WriteResult, created []outline.Created, lines map[string]int, maxKeys int) []string {
	if len(created) <= maxListed {
		for _, c := range created {
			r.Created = append(r.Created, Created{RKey: c.RKey, Input: c.Input, Line: lines[c.Input], Text: clip(c.Text, 40)})
		}
		return nil
	}
	r.CreatedTotal = len(created)
	for i, c := range created {
		if maxKeys >= 0 && i == maxKeys {
			return []string{fmt.Sprintf("keys lists the first %d of the %d records created; read_outline shows the others (they follow in input order)", maxKeys, len(created))}
		}
		r.Keys = append(r.Keys, c.RKey)
		if lines != nil {
			r.Lines = append(r.Lines, lines[c.Input])
		}
	}
	return nil
}

// costShare says what share of the hourly write budget a write of cost
// points uses, when it is over a fifth of it (left: the points left after
// it, or before it for a dry run; -1: the repository has no budget).
func costShare(cost, left int, dryRun bool) string {
	if left < 0 || cost*5 <= budget.Limit {
		return ""
	}
	when := "it used"
	if dryRun {
		when = "it would use"
	}
	share := (cost*100 + budget.Limit - 1) / budget.Limit // rounded up: over a fifth is never "20%"
	return fmt.Sprintf("%s %d point(s), %d%% of the hourly write budget of %d (%d point(s) left now)", when, cost, share, budget.Limit, left)
}

// committed sets what the engine committed: the operation, the budget
// left, the last commit and how many there were.
func committed(r *WriteResult, out *outline.Outcome) {
	if out.Op != nil {
		r.Operation = out.Op.ID
	}
	if out.BudgetLeft >= 0 {
		left := out.BudgetLeft
		r.BudgetRemaining = &left
	}
	if n := len(out.Commits); n > 0 {
		r.Rev = out.Commits[n-1].Rev
		if n > 1 {
			r.Commits = n
		}
	}
}

// dryRunRecords lists a dry run's records whole (dump, up to maxDumped),
// or counts them by operation and collection, saying why.
func dryRunRecords(r *WriteResult, writes []store.Write, dump, selection bool) []string {
	if dump && len(writes) <= maxDumped {
		r.Writes = writes
		return nil
	}
	counts := map[string]int{}
	for _, w := range writes {
		counts[string(w.Op)+" "+strings.TrimPrefix(w.Collection, "app.bulleted.")]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	why := " (records are listed for dry runs of up to 20 writes)"
	switch {
	case selection:
		why = "" // the selection's note says which bullets
	case len(writes) <= maxDumped:
		why = " (the records are too large to list in one result)"
	}
	return []string{"writes: " + strings.Join(parts, ", ") + why}
}

// dryRunViews sets a dry run's before/after view (rows a side) and the
// bullets it touches (at most rep.maxCh), saying what was cut.
func dryRunViews(r *WriteResult, out *outline.Outcome, rep report, rows int) []string {
	var notes []string
	if out.Before != nil && len(out.Plan.Writes) > 0 {
		r.Before, r.After = preview(out.Before, rep.after, out.Plan, rows)
		if rows < previewRows {
			notes = append(notes, fmt.Sprintf("the before/after views show at most %d rows a side to fit one result", rows))
		}
	}
	if cs := rep.changes; cs != nil && cs.total > 0 {
		r.Changes = cs.list[:min(len(cs.list), rep.maxCh)]
		if cs.total > len(r.Changes) {
			r.ChangesTotal = cs.total
			why := fmt.Sprintf("a dry run lists at most %d", maxChanges)
			if rep.maxCh < maxChanges {
				why = "to fit one result"
			}
			notes = append(notes, fmt.Sprintf("changes lists the first %d of the %d bullets touched, %s (%s in all)", len(r.Changes), cs.total, why, cs.counts))
		}
	}
	return notes
}

// keyLine is the text's list of created keys ("line→key" for imports), at
// most textKeys bytes (< 0: all), and how many keys it lists.
func keyLine(keys []string, lines []int, textKeys int) (string, int) {
	var b strings.Builder
	for i, k := range keys {
		e := ""
		if i > 0 {
			e = " "
		}
		if lines != nil {
			e += fmt.Sprintf("%d→%s", lines[i], k)
		} else {
			e += k
		}
		if textKeys >= 0 && b.Len()+len(e) > textKeys {
			return b.String(), i
		}
		b.WriteString(e)
	}
	return b.String(), len(keys)
}

// writeHead writes the text's first line (what was done, its cost, the
// budget left, the commits, the operation and the kept plan), the bullets
// touched and the notes.
func writeHead(b *strings.Builder, r *WriteResult, out *outline.Outcome, changes *changeSet) {
	switch {
	case out.DryRun:
		b.WriteString("Dry run, nothing written: ")
	case out.NoChange:
		b.WriteString("No change: ")
	}
	fmt.Fprintf(b, "%s. %d write(s), cost %d point(s)", out.Plan.Summary, len(out.Plan.Writes), out.Plan.Cost)
	if r.BudgetRemaining != nil {
		fmt.Fprintf(b, " (%d left this hour)", *r.BudgetRemaining)
	}
	if r.Commits > 1 {
		fmt.Fprintf(b, " in %d commits", r.Commits)
	}
	if r.Operation != "" {
		fmt.Fprintf(b, "; operation %s", r.Operation)
	}
	if r.Plan != "" {
		fmt.Fprintf(b, "; plan %s (the same call with plan=%s applies exactly this)", r.Plan, r.Plan)
	}
	b.WriteString(".")
	if changes != nil && changes.total > 0 {
		b.WriteString(" Bullets touched: " + changes.counts + ".")
	}
	for _, d := range r.Diagnostics {
		b.WriteString("\nNote: " + d + ".")
	}
}

// writeCreated writes the created records listed as objects.
func writeCreated(b *strings.Builder, created []Created) {
	if len(created) == 0 {
		return
	}
	b.WriteString("\nCreated:")
	for _, c := range created {
		fmt.Fprintf(b, "\n- %s", c.Input)
		if c.Line > 0 {
			fmt.Fprintf(b, " (line %d)", c.Line)
		}
		fmt.Fprintf(b, " ·%s", c.RKey)
		if c.Text != "" {
			fmt.Fprintf(b, " %q", c.Text)
		}
	}
}

// writeKeys writes the created keys' line: listed of the total, the rest
// counted.
func writeKeys(b *strings.Builder, r *WriteResult, total int, keyText string, listed int) {
	how := "in input order"
	if r.Lines != nil {
		how = "input line→key"
	}
	fmt.Fprintf(b, "\nCreated %d (%s): %s", total, how, keyText)
	if listed < total {
		fmt.Fprintf(b, " … and %d more (the structured content's keys lists %d; read_outline shows them all with their text)", total-listed, len(r.Keys))
	}
}

// dedupe keeps each distinct notice once, in order of first appearance,
// with a count when it came up more than once.
func dedupe(notes []string) []string {
	if len(notes) == 0 {
		return nil
	}
	count := map[string]int{}
	var order []string
	for _, n := range notes {
		if count[n] == 0 {
			order = append(order, n)
		}
		count[n]++
	}
	out := make([]string, len(order))
	for i, n := range order {
		out[i] = n
		if c := count[n]; c > 1 {
			out[i] = fmt.Sprintf("%s (×%d)", n, c)
		}
	}
	return out
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// previewRows bounds each side of a dry run's before/after view.
const previewRows = 40

// preview renders the part of the outline a plan touches, before and
// after, at the same scope: the parent (after the plan) of the first
// touched bullet; of its children, the touched ones and their neighbours
// (with their children), the others counted, at most rows lines a side.
func preview(before, after *outline.Tree, p *outline.Plan, rows int) (string, string) {
	if after == nil {
		after = before.Next(before.Commit, before.Rev, outline.WriteChanges(p.Writes))
	}
	// keys are looked up directly (Resolve would compare every bullet's
	// text for a key that is not there, as a created one is before)
	get := func(t *outline.Tree, k string) *outline.Item {
		if it := t.Nodes.Get(k); it != nil {
			return it
		}
		return t.Mirrors.Get(k)
	}
	scope := ""
	for _, k := range p.Touched {
		if it := get(after, k); it != nil {
			if par := after.Parent(it); par != nil {
				scope = par.Key()
			}
			break
		}
		if it := get(before, k); it != nil { // deleted by the plan
			if par := before.Parent(it); par != nil {
				scope = par.Key()
			}
			break
		}
	}
	// the touched bullets and their neighbours, in either tree
	focus := map[string]bool{}
	for _, t := range []*outline.Tree{before, after} {
		for _, k := range p.Touched {
			it := get(t, k)
			if it == nil {
				continue
			}
			focus[k] = true
			sibs := t.ChildrenOf(t.Parent(it))
			if i := siblingIndex(sibs, it); i >= 0 {
				if i > 0 {
					focus[sibs.At(i-1).Key()] = true
				}
				if i+1 < sibs.Len() {
					focus[sibs.At(i+1).Key()] = true
				}
			}
		}
	}
	render := func(t *outline.Tree) string {
		var root *outline.Item
		if scope != "" {
			if root = t.Nodes.Get(scope); root == nil {
				return "(" + scope + " does not exist here)"
			}
		}
		// rendered only around what is touched: from the first block the
		// focus falls in to the last, at most a few times the rows shown,
		// and no more rows than the preview can show; the rest is counted
		o := view.Options{Depth: 2, Limit: 3*rows + 16}
		kids := t.ChildrenOf(root)
		lo, hi := kids.Len(), -1
		for k := range focus {
			it := get(t, k)
			for hops := 0; it != nil && hops < 2; hops++ {
				par := t.Parent(it)
				if par == root || (par != nil && root != nil && par.Key() == root.Key()) {
					if i := siblingIndex(kids, it); i >= 0 {
						lo, hi = min(lo, i), max(hi, i)
					}
					break
				}
				it = par
			}
		}
		if hi < 0 {
			lo, hi = 0, min(kids.Len(), 4*rows)
		} else {
			hi = min(hi+1, lo+4*rows, kids.Len())
		}
		o.Span = [2]int{lo, max(hi, lo+1)}
		pre, post := lo, max(0, kids.Len()-o.Span[1])
		v, err := view.Read(t, root, o)
		if err != nil {
			return err.Error()
		}
		cut := v.Cursor != ""
		if cut {
			// the blocks of the window the limit left out are counted too
			shown := 0
			for _, r := range v.Nodes {
				if r.Depth == 1 {
					shown++
				}
			}
			post += max(0, min(o.Span[1], kids.Len())-o.Span[0]-shown)
			v.Cursor = "" // a preview has no next page
		}
		head := ""
		if root != nil {
			head = "  "
		}
		return around(v.Text(false), head, focus, rows, pre, post, cut)
	}
	return render(before), render(after)
}

// siblingIndex is it's index in sibs (sibling order: sortKey bytes, record
// key, nodes first), found by halves; -1 when it is not there.
func siblingIndex(sibs outline.Kids, it *outline.Item) int {
	i := sort.Search(sibs.Len(), func(j int) bool {
		s := sibs.At(j)
		if s.SortKey() != it.SortKey() {
			return s.SortKey() > it.SortKey()
		}
		if s.Key() != it.Key() {
			return s.Key() > it.Key()
		}
		return s.Mirror || !it.Mirror
	})
	for ; i < sibs.Len() && sibs.At(i).SortKey() == it.SortKey(); i++ {
		if sibs.At(i) == it || (sibs.At(i).Key() == it.Key() && sibs.At(i).Mirror == it.Mirror) {
			return i
		}
	}
	return -1
}

// others reads another identity's repository (a handle or DID) as a tree;
// nil when offline.
func (env *Env) others() outline.Others { return env.Engine.Others() }

// around keeps, of a text view, the blocks (a line starting with head+"- "
// and the deeper lines under it) that name a focus key (·KEY), the lines
// before the first block (the title, the root), and counts the blocks left
// out (pre and post more left out of the rendered window before and
// after it); at most rows lines (cut: the window was cut short, so what is
// not shown is counted as at least).
func around(txt, head string, focus map[string]bool, rows, pre, post int, cut bool) string {
	var out []string
	var block []string
	hit, skipped := false, pre
	flush := func() {
		if len(block) == 0 {
			return
		}
		if hit {
			if skipped > 0 {
				out = append(out, fmt.Sprintf("%s… %d bullet(s)", head, skipped))
				skipped = 0
			}
			out = append(out, block...)
		} else {
			skipped++
		}
		block, hit = nil, false
	}
	for _, l := range strings.Split(strings.TrimRight(txt, "\n"), "\n") {
		if strings.HasPrefix(l, head+"- ") {
			flush()
		} else if len(block) == 0 {
			out = append(out, l) // before the first block
			continue
		}
		block = append(block, l)
		if i := strings.LastIndex(l, "·"); i >= 0 && focus[l[i+len("·"):]] {
			hit = true
		}
	}
	flush()
	if skipped += post; skipped > 0 {
		out = append(out, fmt.Sprintf("%s… %d bullet(s)", head, skipped))
	}
	switch {
	case len(out) > rows && cut:
		out = append(out[:rows], fmt.Sprintf("… at least %d more line(s) of the preview not shown", len(out)-rows))
	case len(out) > rows:
		out = append(out[:rows], fmt.Sprintf("… %d more line(s) of the preview not shown", len(out)-rows))
	case cut:
		out = append(out, "… more line(s) of the preview not shown")
	}
	return strings.Join(out, "\n") + "\n"
}

// MaxResult bounds one tool result, text and structured content together
// as sent (JSON): every tool sizes its pages and reports to fit, and says
// so where it shortened anything; structured content is never cut.
const MaxResult = 60_000

// ResultBudget is what a tool fits its result to: MaxResult less room for
// the notices the server adds (incomplete operations, what opening the
// store found).
const ResultBudget = MaxResult - 4_096

// ResultSize is the size of res as sent: its JSON.
func ResultSize(res *mcp.CallToolResult) int {
	b, err := json.Marshal(res)
	if err != nil {
		return 0
	}
	return len(b)
}
