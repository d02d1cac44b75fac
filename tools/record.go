package tools

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

func validateRecordTool() Tool {
	t := Tool{Name: "validate_record", Title: "Validate a record", Family: FamilyCheck, Output: validateOutput,
		Ann:         Annotations{ReadOnly: true, Idempotent: true},
		Description: "Check an app.bulleted.* record against the lexicons.",
		Schema: obj(map[string]any{
			"record":     map[string]any{"type": "object"},
			"collection": pRef,
			"uri":        pRef,
		}, "record")}
	t.Handle = func(ctx context.Context, env *Env, a Args) (*mcp.CallToolResult, error) {
		var rec map[string]any
		if _, err := a.Decode("record", &rec); err != nil || rec == nil {
			return badArgs("record must be a JSON object")
		}
		var self *syntax.ATURI
		if u := a.Str("uri"); u != "" {
			p, err := syntax.ParseATURI(u)
			if err != nil {
				return badArgs("uri %q is not an AT-URI", u)
			}
			self = &p
		}
		raw, _ := json.Marshal(rec)
		notes, err := validate.Default().JSONNotes(raw, a.Str("collection"), self)
		if notes == nil {
			notes = []validate.Problem{}
		}
		// notes: open-set values (layout, display, allow rules) this
		// version does not know; valid, but said
		noteText := ""
		for _, n := range notes {
			noteText += "\nnote: " + n.String()
		}
		if err == nil {
			return mcp.NewToolResultStructured(map[string]any{"valid": true, "problems": []validate.Problem{}, "notes": notes}, "valid"+noteText), nil
		}
		var ve *validate.Error
		if errors.As(err, &ve) {
			return mcp.NewToolResultStructured(map[string]any{"valid": false, "problems": ve.Problems, "notes": notes}, ve.Error()+noteText), nil
		}
		return nil, err
	}
	return t
}
