package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Confirmation of big destructive edits. When the client can ask the
// person (elicitation), a write whose plan removes more than
// Confirm.Deletes bullets and mirrors or moves more than Confirm.Moves is
// held by the engine's gate, whatever made the plan (guarded). Without
// elicitation nothing changes (dry runs stay the way).

// ConfirmRules are the thresholds above which a write asks the person.
type ConfirmRules struct {
	Deletes int  // bullets and mirrors removed (0: never ask)
	Moves   int  // bullets and mirrors moved (0: never ask)
	Budget  bool // a write costing more than half of the budget left now
}

// DefaultConfirm are the thresholds serve uses unless told otherwise.
var DefaultConfirm = ConfirmRules{Deletes: 20, Moves: 200, Budget: true}

// Confirmer asks the person behind the client; the server puts one in the
// call's context when the client can be asked (WithConfirmer).
type Confirmer interface {
	// Answer is the person's answer when this call is the client's retry
	// after an earlier ask (protocol 2026-07-28: the answer comes with the
	// retried call): the state given to Confirm, and whether they accepted.
	Answer() (state string, accepted, ok bool)
	// Confirm asks the person to confirm message. Either it returns their
	// answer now (earlier protocols: the server asks in the middle of the
	// call), or ask is the result to return so that the client asks them
	// and calls again with the answer and state (2026-07-28). err: no
	// answer (timed out, or the client failed).
	Confirm(ctx context.Context, state, message string) (accepted bool, ask *mcp.CallToolResult, err error)
}

type confirmerKey struct{}

// WithConfirmer returns a context whose write tools may ask c.
func WithConfirmer(ctx context.Context, c Confirmer) context.Context {
	return context.WithValue(ctx, confirmerKey{}, c)
}

func confirmerFrom(ctx context.Context) Confirmer {
	c, _ := ctx.Value(confirmerKey{}).(Confirmer)
	return c
}

// guarded runs a write (run) under the gate's confirmation: when the
// client can ask the person, the engine holds every plan whose gate
// verdict passes the rules (outline.ConfirmNeeded), whatever made it — an
// intent, a batch, an import, a kept plan applied by id, undo — and keeps
// it; the person is asked with the counts and the plan's summary; an
// accepted plan is applied exactly as it was shown (outline.Engine.Apply
// under outline.Confirmed); a declined or unanswered one writes nothing
// and answers with kind declined. in names the call for Apply (the same
// tool and arguments); named is the plan id the call itself names (kept
// for the agent after a refusal; a plan held only to ask is dropped).
// Without elicitation run runs as it is.
func guarded(ctx context.Context, env *Env, name string, in outline.Intent, named string, run func(context.Context) (*outline.Outcome, error)) (*outline.Outcome, *mcp.CallToolResult, error) {
	c := confirmerFrom(ctx)
	if c == nil || env.Confirm == nil {
		out, err := run(ctx)
		return out, nil, err
	}
	ctx = outline.WithConfirm(ctx, outline.Threshold{Deletes: env.Confirm.Deletes, Moves: env.Confirm.Moves, Budget: env.Confirm.Budget})
	if state, accepted, ok := c.Answer(); ok {
		if !accepted {
			if state != named {
				env.Engine.DropPlan(state)
			}
			return nil, nil, declined(name, "the person declined")
		}
		// a set taken by where is taken again: the person confirmed that set
		if err := recheckSelection(ctx, env, state, in); err != nil {
			return nil, nil, err
		}
		out, err := env.Engine.Apply(outline.Confirmed(ctx, state), state, in)
		return out, nil, err
	}
	out, err := run(ctx)
	var need *outline.ConfirmNeeded
	if !errors.As(err, &need) {
		return out, nil, err
	}
	v := need.Verdict
	if need.PlanID == "" {
		return nil, nil, &outline.Error{Kind: outline.ErrDeclined,
			Msg:  fmt.Sprintf("%s would remove %d and move %d bullet(s): too large to hold as a plan for the person to confirm; nothing was written", name, v.Removed(), v.Moved),
			Next: "split it into smaller operations (each is asked for on its own)"}
	}
	msg := fmt.Sprintf("%s wants to %s: %d bullet(s) deleted, %d moved, %d record write(s) in all (cost %d points). Allow it?",
		name, need.Summary, v.Removed(), v.Moved, v.Writes, v.Cost)
	if v.Mirrors > 0 {
		msg = fmt.Sprintf("%s wants to %s: %d bullet(s) deleted (%d of them mirrors), %d moved, %d record write(s) in all (cost %d points). Allow it?",
			name, need.Summary, v.Removed(), v.Mirrors, v.Moved, v.Writes, v.Cost)
	}
	if need.OverBudget() {
		msg = strings.TrimSuffix(msg, " Allow it?") + fmt.Sprintf(" That is more than half of the %d point(s) of the write budget left now. Allow it?", need.Left)
	}
	accepted, ask, err := c.Confirm(ctx, need.PlanID, msg)
	if ask != nil {
		return nil, ask, nil
	}
	if err != nil || !accepted {
		if need.PlanID != named {
			env.Engine.DropPlan(need.PlanID)
		}
		if err != nil {
			return nil, nil, declined(name, "no answer came ("+err.Error()+")")
		}
		return nil, nil, declined(name, "the person declined")
	}
	if err := recheckSelection(ctx, env, need.PlanID, in); err != nil {
		return nil, nil, err
	}
	out, err = env.Engine.Apply(outline.Confirmed(ctx, need.PlanID), need.PlanID, in)
	return out, nil, err
}

func declined(name, why string) error {
	return &outline.Error{Kind: outline.ErrDeclined,
		Msg:  fmt.Sprintf("%s was not confirmed: %s; nothing was written", name, why),
		Next: "ask the person what they want; dry_run=true shows the change without asking"}
}
