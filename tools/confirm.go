package tools

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Confirmation of big destructive edits. When the client can ask the
// person (elicitation), a write that deletes more than Confirm.Deletes
// bullets or moves more than Confirm.Moves is first planned as a dry run;
// the person is asked with the counts and the plan's summary; an accepted
// plan is applied exactly as it was shown (outline.Engine.Apply), and a
// declined or unanswered one writes nothing and answers with kind
// declined. Without elicitation nothing changes (dry runs stay the way).

// ConfirmRules are the thresholds above which a write asks the person.
type ConfirmRules struct {
	Deletes int // bullets deleted (0: never ask)
	Moves   int // bullets moved (0: never ask)
}

// DefaultConfirm are the thresholds serve uses unless told otherwise.
var DefaultConfirm = ConfirmRules{Deletes: 20, Moves: 200}

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

// bigEdit counts the bullets a plan deletes and moves (a bullet whose
// parent or sortKey changes), and says whether they pass the rules.
func bigEdit(p *outline.Plan, r ConfirmRules) (deletes, moves int, big bool) {
	for i, w := range p.Writes {
		if w.Collection != lexicon.Node {
			continue
		}
		prev := p.Prev[i]
		switch {
		case w.Op == "delete":
			deletes++
		case prev != nil && w.Value != nil && (w.Value["parent"] != prev.Value.Get("parent") || w.Value["sortKey"] != prev.Value.Get("sortKey")):
			moves++
		}
	}
	big = (r.Deletes > 0 && deletes > r.Deletes) || (r.Moves > 0 && moves > r.Moves)
	return deletes, moves, big
}

// confirmed runs in as a write that may need the person's confirmation
// first. plan, when set, is the dry run's plan id the call names: that plan
// is the one shown and applied. done is false when confirmation does not
// apply (the caller runs the write as usual); otherwise out, ask or err is
// the call's answer.
func confirmed(ctx context.Context, env *Env, name string, in outline.Intent, plan string) (out *outline.Outcome, ask *mcp.CallToolResult, done bool, err error) {
	c := confirmerFrom(ctx)
	if c == nil || env.Confirm == nil {
		return nil, nil, false, nil
	}
	if state, accepted, ok := c.Answer(); ok {
		if !accepted {
			return nil, nil, true, declined(name, "the person declined")
		}
		out, err := env.Engine.Apply(ctx, state, in)
		return out, nil, true, err
	}
	var p *outline.Plan
	id := plan
	if id != "" {
		if p = env.Engine.PlanOf(id); p == nil {
			return nil, nil, false, nil // Apply says it is not known
		}
	} else {
		if !restructures(in) {
			return nil, nil, false, nil // nothing to ask about: no look first
		}
		dry, err := env.Engine.Do(ctx, in, true)
		if err != nil || dry.NoChange {
			return nil, nil, false, nil // the write itself says it
		}
		p, id = dry.Plan, dry.PlanID
	}
	deletes, moves, big := bigEdit(p, *env.Confirm)
	if !big {
		if plan == "" && id != "" {
			env.Engine.DropPlan(id) // a look only: not an agent's plan
		}
		return nil, nil, false, nil
	}
	if id == "" {
		return nil, nil, true, &outline.Error{Kind: outline.ErrDeclined,
			Msg:  fmt.Sprintf("%s would delete %d and move %d bullet(s): too large to hold as a plan for the person to confirm; nothing was written", name, deletes, moves),
			Next: "split it into smaller operations (each is asked for on its own)"}
	}
	msg := fmt.Sprintf("%s wants to %s: %d bullet(s) deleted, %d moved, %d record write(s) in all (cost %d points). Allow it?",
		name, p.Summary, deletes, moves, len(p.Writes), p.Cost)
	accepted, ask, err := c.Confirm(ctx, id, msg)
	if ask != nil {
		return nil, ask, true, nil
	}
	if err != nil {
		return nil, nil, true, declined(name, "no answer came ("+err.Error()+")")
	}
	if !accepted {
		return nil, nil, true, declined(name, "the person declined")
	}
	out, err = env.Engine.Apply(ctx, id, in)
	return out, nil, true, err
}

// restructures reports whether in can delete or move bullets, the edits a
// person is asked about; a write of any other intent (an insert, an edit)
// is not planned twice to find out.
func restructures(in outline.Intent) bool {
	switch x := in.(type) {
	case annotated:
		return restructures(x.Intent)
	case intent.Delete, intent.Move, intent.Sort, intent.Batch:
		return true
	}
	return false
}

func declined(name, why string) error {
	return &outline.Error{Kind: outline.ErrDeclined,
		Msg:  fmt.Sprintf("%s was not confirmed: %s; nothing was written", name, why),
		Next: "ask the person what they want; dry_run=true shows the change without asking"}
}
