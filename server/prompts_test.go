package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

func promptServer(t *testing.T, o server.Options) (*client.Client, *store.Local) {
	t.Helper()
	l, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	s, err := server.NewWithOptions(&tools.Env{Engine: outline.New(l)}, o)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	initialize(t, c)
	return c, l
}

func promptNames(t *testing.T, c *client.Client) []string {
	t.Helper()
	res, err := c.ListPrompts(context.Background(), mcp.ListPromptsRequest{})
	if err != nil {
		return nil
	}
	var names []string
	for _, p := range res.Prompts {
		if p.Description == "" {
			t.Errorf("prompt %s has no description", p.Name)
		}
		names = append(names, p.Name)
	}
	return names
}

func getPrompt(t *testing.T, c *client.Client, name string, args map[string]string) (string, error) {
	t.Helper()
	req := mcp.GetPromptRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := c.GetPrompt(context.Background(), req)
	if err != nil {
		return "", err
	}
	if len(res.Messages) != 1 || res.Messages[0].Role != mcp.RoleUser {
		t.Fatalf("%s: messages %+v", name, res.Messages)
	}
	return res.Messages[0].Content.(mcp.TextContent).Text, nil
}

// The prompts: listed only with the tools they name, short, naming the
// tools with their parameters, the section found by its text.
func TestPrompts(t *testing.T) {
	c, l := promptServer(t, server.Options{})
	if got := strings.Join(promptNames(t, c), " "); got != "import_plan reorganise_section weekly_review" {
		t.Fatalf("prompts %q", got)
	}
	keys := seed(t, l, []string{"Work", "Home", "Ship the beta"}, []string{"", "", ""})
	text, err := getPrompt(t, c, "reorganise_section", map[string]string{"section": "work", "goal": "group by quarter"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text, `Reorganise my section "Work" (·`+keys[0]+`): group by quarter.`) ||
		!strings.Contains(text, `read_outline node="`+keys[0]+`" depth=10`) || !strings.Contains(text, "apply_batch plan=ID") {
		t.Fatalf("reorganise_section:\n%s", text)
	}
	text, err = getPrompt(t, c, "weekly_review", map[string]string{"section": keys[1], "since": "2026-11-30"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, `search state="open" under="`+keys[1]+`" limit=200`) || !strings.Contains(text, `completed_from="2026-11-30"`) || !strings.Contains(text, "complete_todo node=KEY") {
		t.Fatalf("weekly_review:\n%s", text)
	}
	// a section not found: the prompt says how to find it
	text, err = getPrompt(t, c, "import_plan", map[string]string{"plan": "- design\n- build", "section": "Garden"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "- design\n- build") || !strings.Contains(text, `search text="Garden"`) || !strings.Contains(text, `import_outline content=MARKDOWN format="markdown" parent=KEY dry_run=true`) {
		t.Fatalf("import_plan:\n%s", text)
	}
	for _, name := range []string{"weekly_review", "reorganise_section", "import_plan"} {
		text, err := getPrompt(t, c, name, map[string]string{"section": "Work", "plan": "x"})
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(text, "\n") + 1; n > 12 {
			t.Errorf("%s: %d lines", name, n)
		}
	}
	// a required argument missing: an error naming it
	if _, err := getPrompt(t, c, "reorganise_section", nil); err == nil || !strings.Contains(err.Error(), "needs the argument section") {
		t.Fatalf("without section: %v", err)
	}
	// completion of section: the bullets whose text (or a word of it)
	// starts so, shown by text and named by key; the prompt reads the
	// value back as that bullet; a key typed completes to the key
	complete := func(typed string) []string {
		t.Helper()
		req := mcp.CompleteRequest{}
		req.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "reorganise_section"}
		req.Params.Argument.Name, req.Params.Argument.Value = "section", typed
		res, err := c.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res.Completion.Values
	}
	for typed, want := range map[string][]string{
		"ho":         {"Home ·" + keys[1]},
		"beta":       {"Ship the beta ·" + keys[2]},
		"THE B":      {"Ship the beta ·" + keys[2]},
		"eta":        nil,
		keys[0][:11]: {keys[0]},
	} {
		if got := complete(typed); !slices.Equal(got, want) {
			t.Errorf("completion of %q: %q, want %q", typed, got, want)
		}
	}
	text, err = getPrompt(t, c, "reorganise_section", map[string]string{"section": "Ship the beta ·" + keys[2]})
	if err != nil || !strings.Contains(text, `read_outline node="`+keys[2]+`"`) {
		t.Fatalf("the completion's value as section: %v\n%s", err, text)
	}
}

// Read-only: no prompt (each names a write tool); only the edit family:
// the prompts whose tools are all there.
func TestPromptsFollowTools(t *testing.T) {
	c, _ := promptServer(t, server.Options{ReadOnly: true})
	if got := promptNames(t, c); len(got) != 0 {
		t.Fatalf("read-only prompts %q", got)
	}
	c, _ = promptServer(t, server.Options{Families: []string{tools.FamilyEdit}})
	if got := strings.Join(promptNames(t, c), " "); got != "import_plan" {
		t.Fatalf("edit-only prompts %q", got)
	}
}

// weekly_review's since goes to search (completed_from, created_to): the
// prompt refuses what search refuses, with an error naming the argument,
// and accepts what search accepts.
func TestPromptArgumentsValidatedAsTheirTools(t *testing.T) {
	c, _ := promptServer(t, server.Options{})
	for _, since := range []string{"last tuesday", "2026-11-30", "2026-11-30T09:00:00Z", "30/11/2026", "2026-11-31"} {
		req := mcp.CallToolRequest{}
		req.Params.Name = "search"
		req.Params.Arguments = map[string]any{"state": "done", "completed_from": since}
		res, err := c.CallTool(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		_, perr := getPrompt(t, c, "weekly_review", map[string]string{"since": since})
		if res.IsError != (perr != nil) {
			t.Errorf("since=%q: search refuses it %v, the prompt refuses it %v (%v)", since, res.IsError, perr != nil, perr)
		}
		if perr != nil && (!strings.Contains(perr.Error(), "argument since") || !strings.Contains(perr.Error(), since)) {
			t.Errorf("since=%q: the error does not name the argument and its value: %v", since, perr)
		}
	}
}

// The instructions name only the tools exposed: --read-only's teach no
// write (no write tool, dry_run or plan), and with any choice of families
// every tool named is one tools/list gives.
func TestInstructionsNameOnlyWhatIsExposed(t *testing.T) {
	all := map[string]bool{}
	for _, tl := range tools.All() {
		all[tl.Name] = true
	}
	for _, o := range []server.Options{{ReadOnly: true}, {}, {Families: []string{tools.FamilyRead, tools.FamilyOps}}, {Families: []string{tools.FamilyRead, tools.FamilyEdit}}} {
		l, err := store.OpenLocal(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		c, instr := payloadClient(t, l, o, "test")
		res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		exposed := map[string]bool{}
		for _, tl := range res.Tools {
			exposed[tl.Name] = true
		}
		for _, w := range strings.FieldsFunc(instr, func(r rune) bool { return r != '_' && (r < 'a' || r > 'z') }) {
			if all[w] && !exposed[w] {
				t.Errorf("%+v: the instructions name %s, which is not exposed", o, w)
			}
		}
		if !strings.Contains(instr, "read_outline") {
			t.Errorf("%+v: the instructions do not teach read_outline", o)
		}
		if o.ReadOnly {
			for _, s := range []string{"dry_run", "plan=", "write tool", "insert_after"} {
				if strings.Contains(instr, s) {
					t.Errorf("read-only instructions teach %q:\n%s", s, instr)
				}
			}
		}
	}
}
