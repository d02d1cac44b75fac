package tools

import (
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

func policyTool() Tool {
	return writeTool(Tool{Name: "set_comment_policy", Title: "Set who may comment", Family: FamilySocial,
		Description: "Who may comment on your outline or a subtree (root): allow [\"mentioned\"] or [] (nobody).",
		Schema: obj(map[string]any{
			"root":   pRef,
			"allow":  map[string]any{"type": "array", "items": enum("", "mentioned")},
			"remove": boolean(""),
		}),
		Ann: Annotations{Idempotent: true}}, func(a Args) (outline.Intent, error) {
		allow, has, err := a.Strings("allow")
		if err != nil {
			return nil, argErr("%v", err)
		}
		remove, err := a.Bool("remove", false)
		if err != nil {
			return nil, argErr("%v", err)
		}
		if !has && !remove {
			return nil, argErr("pass allow ([\"mentioned\"] or []) or remove=true")
		}
		return intent.Policy{Root: a.Str("root"), Allow: allow, Remove: remove}, nil
	})
}

func mirrorTool() Tool {
	return writeTool(Tool{Name: "add_mirror", Title: "Mirror a bullet", Family: FamilySocial,
		Description: "Show any bullet (original) and its subtree live in your outline.",
		Schema:      obj(map[string]any{"original": pRef, "parent": pRef, "after": pAfter, "position": pPosition}, "original")}, func(a Args) (outline.Intent, error) {
		return intent.Mirror{Original: a.Str("original"), Pos: position(a, "parent")}, nil
	})
}

func commentTool() Tool {
	return writeTool(Tool{Name: "add_comment", Title: "Comment on a bullet", Family: FamilySocial,
		Description: "Comment on any bullet; shown where its owner's policy allows.",
		Schema:      obj(map[string]any{"subject": pRef, "text": pRef}, "subject", "text")}, func(a Args) (outline.Intent, error) {
		return intent.Comment{Subject: a.Str("subject"), Text: a.Str("text")}, nil
	})
}
