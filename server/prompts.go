package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// Prompts: the tasks agents are asked most, each a short template naming
// the tools to use and their parameters (prompts/list, prompts/get). A
// prompt is offered only when every tool it names is enabled (--read-only
// and --tools leave some out). The section argument is completed with the
// bullets whose text (or one of its words) or key starts with what was
// typed: "TEXT ·KEY" for a text that matched, so a person sees what they
// pick and the prompt reads it back by its key.

// prompt is one template: the tools it names, and its text for the
// arguments given (sec: the section argument, resolved).
type prompt struct {
	def   mcp.Prompt
	tools []string
	text  func(args map[string]string, sec section) string
	// check validates arguments as the tools they are handed to would
	// (by name): an error refuses prompts/get naming the argument.
	check map[string]func(string) error
}

// section is a prompt's section argument as found in the outline.
type section struct {
	key  string // "": not found (or not given)
	desc string // how the prompt names it
	arg  string // as given
}

// under is ` NAME="KEY"` when the section is known, ` NAME=KEY` when it
// was given but not found (find says how), else "".
func (s section) under(name string) string {
	switch {
	case s.key != "":
		return fmt.Sprintf(` %s="%s"`, name, s.key)
	case s.arg != "":
		return " " + name + "=KEY"
	}
	return ""
}

// find is a first step when the section was given but not found.
func (s section) find() string {
	if s.key != "" || s.arg == "" {
		return ""
	}
	return fmt.Sprintf("0. Find the section first: search text=%q gives its ·RKEY; use that key as KEY below.\n", s.arg)
}

func sectionArg(desc string, required bool) mcp.PromptOption {
	opts := []mcp.ArgumentOption{mcp.ArgumentDescription(desc)}
	if required {
		opts = append(opts, mcp.RequiredArgument())
	}
	return mcp.WithArgument("section", opts...)
}

var allPrompts = []prompt{
	{
		def: mcp.NewPrompt("weekly_review",
			mcp.WithPromptTitle("Weekly review of open todos"),
			mcp.WithPromptDescription("Review open todos and what was done this week, then complete, reword, regroup or drop them with the person."),
			sectionArg("Only this bullet's subtree: its record key or text (completion matches text); omit for the whole outline.", false),
			mcp.WithArgument("since", mcp.ArgumentDescription("Start of the week, YYYY-MM-DD (default: 7 days ago)."))),
		tools: []string{"search", "read_outline", "complete_todo", "update_node", "move_node", "delete_node", "apply_batch"},
		// since goes to search's completed_from and created_to
		check: map[string]func(string) error{"since": func(v string) error {
			if _, err := search.ParseDate(strings.TrimSpace(v), false); err != nil {
				return errors.New(strings.TrimPrefix(err.Error(), search.ErrQuery.Error()+": "))
			}
			return nil
		}},
		text: func(args map[string]string, sec section) string {
			since := strings.TrimSpace(args["since"])
			if since == "" {
				since = time.Now().AddDate(0, 0, -7).Format(time.DateOnly)
			}
			u, in := sec.under("under"), ""
			if sec.arg != "" {
				in = " in" + sec.desc
			}
			return fmt.Sprintf(`Weekly review of my open todos%s.
%s1. search state="open"%s limit=200 lists every open todo (follow cursor until there is none); search state="done" completed_from="%s"%s lists what I finished since %s.
2. read_outline node=KEY depth=2 where a todo needs its context.
3. Summarise for me: done since %s; still open, grouped by section; open since before %s (search state="open" created_to="%s"%s).
4. Ask me what to change; only then: complete_todo node=KEY (completed=false reopens), update_node node=KEY text="…", move_node node=KEY parent=KEY, delete_node node=KEY.
5. More than a few changes: one apply_batch ops=[{"tool":…,"args":{…}}] with dry_run=true, then apply_batch plan=ID.`,
				in, sec.find(), u, since, u, since, since, since, since, u)
		},
	},
	{
		def: mcp.NewPrompt("reorganise_section",
			mcp.WithPromptTitle("Reorganise a section"),
			mcp.WithPromptDescription("Restructure one bullet's subtree: read it, propose a new structure, then move, regroup and sort it in one batch."),
			sectionArg("The bullet whose subtree to reorganise: its record key or text (completion matches text).", true),
			mcp.WithArgument("goal", mcp.ArgumentDescription("What the new structure should achieve (optional)."))),
		tools: []string{"read_outline", "apply_batch", "move_node", "insert_after", "update_node", "sort_children", "delete_node"},
		text: func(args map[string]string, sec section) string {
			goal := ""
			if g := strings.TrimSpace(args["goal"]); g != "" {
				goal = ": " + g
			}
			key := cmpOr(sec.key, "KEY")
			return fmt.Sprintf(`Reorganise my section%s%s.
%s1. read_outline node="%s" depth=10 shows every bullet under it with its ·RKEY (follow the cursor if the page is cut).
2. Propose the new structure to me as an indented list and wait for my answer; write nothing before.
3. Then write it as one apply_batch, dry_run=true first: ops=[{"tool":"move_node","args":{"node":KEY,"parent":KEY,"after":KEY}}, {"tool":"insert_after","args":{"parent":KEY,"text":"New group","layout":"h2"}}, {"tool":"update_node","args":{"node":KEY,"text":"…"}}]; show me its before/after, then apply_batch plan=ID.
4. sort_children node=KEY by=text|state|created orders one level in a single call.
5. Keep every bullet: delete_node only if I ask, with children="lift" to keep what is under it.`,
				sec.desc, goal, sec.find(), key)
		},
	},
	{
		def: mcp.NewPrompt("import_plan",
			mcp.WithPromptTitle("Import a plan"),
			mcp.WithPromptDescription("Turn a plan (text or Markdown) into bullets and todos, under a section or at the top level, checked with a dry run first."),
			mcp.WithArgument("plan", mcp.ArgumentDescription("The plan: text or a Markdown list."), mcp.RequiredArgument()),
			sectionArg("Where it goes: the parent bullet's record key or text (completion matches text); omit for the top level.", false)),
		tools: []string{"import_outline"},
		text: func(args map[string]string, sec section) string {
			where := " at the top level"
			if sec.arg != "" {
				where = ", under" + sec.desc
			}
			return fmt.Sprintf(`Import this plan into my outline%s:

%s

%s1. Write it as a Markdown list: "- " per bullet, two more spaces per level, "- [ ] " for tasks, "# " headings for its parts; keep my wording.
2. import_outline content=MARKDOWN format="markdown"%s dry_run=true; check the summary and the bullet count with me.
3. Then the same call without dry_run: the result lists the created keys by input line. Tell me anything it says it skipped or changed.`,
				where, strings.TrimSpace(args["plan"]), sec.find(), sec.under("parent"))
		},
	},
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// prompts serves allPrompts whose tools are enabled.
type prompts struct {
	envFor func(ctx context.Context) (*tools.Env, func(), error)
	list   []prompt
}

// newPrompts returns the prompts whose tools are all in enabled (nil:
// none).
func newPrompts(env *tools.Env, o Options, enabled []tools.Tool) *prompts {
	p := &prompts{envFor: o.EnvFor}
	if p.envFor == nil {
		p.envFor = func(context.Context) (*tools.Env, func(), error) { return env, nil, nil }
	}
	for _, pr := range allPrompts {
		if !slices.ContainsFunc(pr.tools, func(name string) bool {
			return !slices.ContainsFunc(enabled, func(t tools.Tool) bool { return t.Name == name })
		}) {
			p.list = append(p.list, pr)
		}
	}
	if len(p.list) == 0 {
		return nil
	}
	return p
}

func (p *prompts) options() []mcpserver.ServerOption {
	return []mcpserver.ServerOption{
		mcpserver.WithPromptCapabilities(false),
		mcpserver.WithCompletions(),
		mcpserver.WithPromptCompletionProvider(p),
	}
}

func (p *prompts) register(s *mcpserver.MCPServer) {
	for _, pr := range p.list {
		pr := pr
		s.AddPrompt(pr.def, func(ctx context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			args := req.Params.Arguments
			for _, a := range pr.def.Arguments {
				if a.Required && strings.TrimSpace(args[a.Name]) == "" {
					return nil, mcpserver.NewHandlerError(&resourceError{code: mcp.INVALID_PARAMS,
						msg:  fmt.Sprintf("prompt %s needs the argument %s", pr.def.Name, a.Name),
						data: map[string]any{"prompt": pr.def.Name, "argument": a.Name}})
				}
			}
			for _, a := range pr.def.Arguments {
				check := pr.check[a.Name]
				if check == nil || strings.TrimSpace(args[a.Name]) == "" {
					continue
				}
				if err := check(args[a.Name]); err != nil {
					return nil, mcpserver.NewHandlerError(&resourceError{code: mcp.INVALID_PARAMS,
						msg:  fmt.Sprintf("prompt %s: argument %s: %v", pr.def.Name, a.Name, err),
						data: map[string]any{"prompt": pr.def.Name, "argument": a.Name, "value": args[a.Name]}})
				}
			}
			sec := p.section(ctx, strings.TrimSpace(args["section"]))
			return mcp.NewGetPromptResult(pr.def.Description, []mcp.PromptMessage{
				mcp.NewPromptMessage(mcp.RoleUser, mcp.NewTextContent(pr.text(args, sec))),
			}), nil
		})
	}
}

// section finds the bullet arg names (record key, at:// URI, or text:
// exact, else the first whose text starts with it, case-insensitively).
// Not found, or the outline unreadable: the prompt says how to find it.
func (p *prompts) section(ctx context.Context, arg string) section {
	s := section{arg: arg}
	if arg == "" {
		return s
	}
	s.desc = fmt.Sprintf(" %q", arg)
	env, done, err := p.envFor(ctx)
	if err != nil || env == nil || env.Engine == nil {
		return s
	}
	if done != nil {
		defer done()
	}
	t, err := env.Engine.Tree(ctx)
	if err != nil {
		return s
	}
	var it *outline.Item
	if i := strings.LastIndex(arg, " ·"); i >= 0 {
		// a completion's value: the text, then the key
		it, _ = t.Resolve(arg[i+len(" ·"):])
	}
	if it == nil {
		var err error
		if it, err = t.Resolve(arg); err != nil {
			it = nil
		}
	}
	if it == nil {
		it = byText(t, arg)
	}
	if it == nil {
		return s
	}
	s.key = it.Key()
	s.desc = fmt.Sprintf(" %q (·%s)", clip(it.Str("text"), 60), it.Key())
	return s
}

// byText is the bullet whose text is arg, else the first (in outline
// order) whose text starts with it, case-insensitively.
func byText(t *outline.Tree, arg string) *outline.Item {
	want := strings.ToLower(arg)
	var first *outline.Item
	var walk func(items outline.Kids) *outline.Item
	walk = func(items outline.Kids) *outline.Item {
		for it := range items.Items() {
			if !it.Mirror {
				text := strings.ToLower(strings.TrimSpace(it.Str("text")))
				if text == want {
					return it
				}
				if first == nil && strings.HasPrefix(text, want) {
					first = it
				}
			}
			if found := walk(it.Children); found != nil {
				return found
			}
		}
		return nil
	}
	if it := walk(t.Roots); it != nil {
		return it
	}
	return first
}

// CompletePromptArgument completes section with the bullets whose text
// (or a word of it) or key starts with what was typed ("TEXT ·KEY", or the
// key when only the key matched), top-level bullets first, then in outline
// order (at most MaxCompletions).
func (p *prompts) CompletePromptArgument(ctx context.Context, name string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	out := &mcp.Completion{Values: []string{}}
	if arg.Name != "section" {
		return out, nil
	}
	return keyCompletions(ctx, p.envFor, strings.ToLower(strings.TrimSpace(arg.Value)), true, true)
}
