package pds_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
)

// An outline moves across identities: PDS → getRepo CAR → embedded store →
// export → another embedded store, and reads identically at every step
// (same texts, order, notes, todo states; every parent resolves).
func TestImportRoundTripFromPDS(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	e := outline.New(r)
	nodes := []intent.NewNode{
		{Text: "Plan", Note: "the why", Children: []intent.NewNode{
			{Text: "Draft", Layout: "todo", Completed: true},
			{Text: "Review #work", Layout: "todo", Children: []intent.NewNode{{Text: "with Ana", Note: "Tuesday"}}},
		}},
		{Text: "Ideas", Layout: "h2"},
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: nodes}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return (intent.Outline{Root: "", Title: ptr("Q3"), Description: nil}).Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	rendered := func(repo store.Repository) string {
		t.Helper()
		s, err := repo.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tr := outline.Build(s)
		if tr.Detached.Len() > 0 {
			t.Fatalf("%d detached bullet(s) in %s", tr.Detached.Len(), repo.DID())
		}
		v, err := view.Read(tr, nil, view.Options{Depth: 10, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		// the text view names record keys (kept) but not the DID
		return v.Markdown() + v.Text(true)
	}
	want := rendered(r)
	// the CAR as any client would fetch it
	resp, err := http.Get(srv.URL + "/xrpc/com.atproto.sync.getRepo?" + url.Values{"did": {r.DID().String()}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	car, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("getRepo: %d %v", resp.StatusCode, err)
	}
	a, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	rep, err := a.ImportCAR(ctx, bytes.NewReader(car), store.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 3 parents and 2 note subjects name the PDS account
	if rep.SourceDID != r.DID().String() || rep.Records != 8 || rep.Rewritten != 5 {
		t.Fatalf("import report %+v", rep)
	}
	if got := rendered(a); got != want {
		t.Fatalf("after import into the embedded store:\n%s\nwant:\n%s", got, want)
	}
	var exp bytes.Buffer
	if err := a.ExportCAR(&exp); err != nil {
		t.Fatal(err)
	}
	b, err := store.OpenLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ImportCAR(ctx, &exp, store.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := rendered(b); got != want {
		t.Fatalf("after export and import again:\n%s", got)
	}
	s, _ := b.Snapshot(ctx)
	for _, rec := range s.Records {
		if strings.Contains(fmt.Sprint(rec.Value), r.DID().String()) {
			t.Fatalf("%s/%s still names the PDS account", rec.Collection, rec.RKey)
		}
	}
}
