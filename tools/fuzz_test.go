package tools_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// FuzzArguments sends arbitrary JSON objects to every tool: no panic, and
// a call that ends in an error writes nothing.
//
//	go test ./tools -run '^$' -fuzz FuzzArguments -fuzztime 60s
func FuzzArguments(f *testing.F) {
	for _, seed := range []string{
		`{"text":"x","parent_id":"k"}`, `{"nodes":"[{\"text\":\"a\"}]"}`, `{"nodes":[{"title":"y"}]}`,
		`{"steps":1e300}`, `{"depth":2.7}`, `{"ops":[{"tool":"insert_after","args":{"text":"z","dry_run":true}}]}`,
		`{"node":"Design"}`, `{"text":{"a":1}}`, `{"markdown":"- a\n  - b\n    - c"}`, `{"record":{"$type":"app.bulleted.node"}}`,
		`{"allow":"mentioned"}`, `{"resume":"x"}`, `{"content":"<opml><body><outline text=\"a\"/></body></opml>","format":"opml"}`,
	} {
		for i := range tools.All() {
			f.Add(uint8(i), seed)
		}
	}
	fx := newFixture(f)
	ctx := context.Background()
	all := tools.All()
	f.Fuzz(func(t *testing.T, which uint8, raw string) {
		var args map[string]any
		if json.Unmarshal([]byte(raw), &args) != nil {
			return
		}
		tl := all[int(which)%len(all)]
		before := fx.head(t)
		req := mcp.CallToolRequest{}
		req.Params.Name = tl.Name
		req.Params.Arguments = args
		res, err := fx.c.CallTool(ctx, req)
		if err != nil {
			t.Fatalf("%s %s: protocol error %v", tl.Name, raw, err)
		}
		if res.IsError && fx.head(t) != before {
			t.Fatalf("%s %s: an error result, yet the repository changed", tl.Name, raw)
		}
	})
}

// serve --tools: families select tools; an unknown family is refused.
func TestSelectFamilies(t *testing.T) {
	got, err := tools.Select([]string{"read", "ops"}, false)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range got {
		names = append(names, tl.Name)
	}
	want := "list_detached operations read_outline search undo"
	if s := join(names); s != want {
		t.Fatalf("read,ops: %s, want %s", s, want)
	}
	if _, err := tools.Select([]string{"comments"}, false); err == nil {
		t.Fatal("an unknown family was accepted")
	}
	if all, _ := tools.Select(nil, false); len(all) != len(tools.All()) {
		t.Fatal("the default is not every tool")
	}
}

func join(xs []string) string {
	out := ""
	for i, x := range xs {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out
}
