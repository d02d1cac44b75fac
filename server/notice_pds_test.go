package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// On the PDS backend: a second client's createRecord (the person in the
// app) is told on the session's next result, in both parts; the agent's
// own insert is not. Also while following the commit stream, when the tree
// has taken the app's commit in before the call (as serve's follower does).
func TestChangedByOthersPDS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	ctx := context.Background()
	srv := pdstest.Start(t, pdstest.Options{})
	for _, following := range []bool{false, true} {
		t.Run(fmt.Sprintf("following=%v", following), func(t *testing.T) {
			changedByOthersPDS(t, ctx, srv, following)
		})
	}
}

func changedByOthersPDS(t *testing.T, ctx context.Context, srv *pdstest.Server, following bool) {
	acct, err := srv.CreateAccount(ctx, fmt.Sprintf("notice%v", following))
	if err != nil {
		t.Fatal(err)
	}
	c, did, err := pds.Login{PDS: srv.URL, Identifier: acct.Handle, Password: acct.AppPassword, Dir: t.TempDir()}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := pds.New(c, did)
	r.Directory = pds.Directory(srv.PLCURL)
	eng := outline.New(r)
	if following {
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		go r.Follow(fctx, func() { _, _ = eng.Tree(fctx) }, nil)
		for !r.Live() {
			time.Sleep(5 * time.Millisecond)
		}
	}
	mc, err := client.NewInProcessClient(server.New(eng, false))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	initialize(t, mc)
	_, sc := callTool(t, mc, "insert_after", map[string]any{"text": "Plan the trip"})
	if sc["notices"] != nil {
		t.Fatalf("the first call: %v", sc["notices"])
	}
	quiet(t, mc, "read_outline", nil, "after the agent's own insert")

	// the person, in the app
	app, err := srv.Client(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		URI string `json:"uri"`
	}
	if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": did.String(), "collection": "app.bulleted.node",
		"record": map[string]any{"$type": "app.bulleted.node", "text": "Book the train", "sortKey": "z", "createdAt": "2026-12-04T10:00:00.000Z"}}, &out); err != nil {
		t.Fatal(err)
	}
	rkey := out.URI[strings.LastIndex(out.URI, "/")+1:]
	if following { // the follower took it into the tree before the call
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			tr, err := eng.Tree(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := tr.Record("app.bulleted.node", rkey); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the followed commit did not reach the tree")
			}
		}
	}
	text, notes, obj := changedByOthers(t, mc, "read_outline", nil)
	if !strings.HasPrefix(text, "Notice: 1 record(s) changed since your last call, not by you: 1 by another writer (the app, another device or process); in \"Book the train\" "+rkey+" (1).") ||
		!strings.Contains(text, "  - created "+rkey+" \"Book the train\"\n") {
		t.Fatalf("the text's head:\n%.600s", text)
	}
	if len(notes) != 1 || obj["count"] != float64(1) || obj["byOtherWriters"] != float64(1) {
		t.Fatalf("structured: %q %v", notes, obj)
	}
	quiet(t, mc, "read_outline", nil, "told already")
	quiet(t, mc, "update_node", map[string]any{"node": rkey, "text": "Book the night train"}, "the agent's own edit")
	quiet(t, mc, "read_outline", nil, "after the agent's own edit")
}
