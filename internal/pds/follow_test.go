package pds_test

import (
	"context"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// TestFollowHearsTheAppsEdit: following the reference PDS's commit stream,
// a commit made straight to the PDS by another client (the person's app)
// rings without any read, and the repository then reads it back; another
// account's commit does not ring.
func TestFollowHearsTheAppsEdit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := pdstest.Start(t, pdstest.Options{})
	acct, err := srv.CreateAccount(ctx, "follow")
	if err != nil {
		t.Fatal(err)
	}
	other, err := srv.CreateAccount(ctx, "neighbour")
	if err != nil {
		t.Fatal(err)
	}
	c, did, err := pds.Login{PDS: srv.URL, Identifier: acct.Handle, Password: acct.AppPassword, Dir: t.TempDir()}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := pds.New(c, did)
	rings := make(chan struct{}, 64)
	go r.Follow(ctx, func() { rings <- struct{}{} }, func(err error) { t.Logf("follow: %v", err) })
	wait := func(what string) {
		t.Helper()
		select {
		case <-rings:
		case <-time.After(30 * time.Second): // a bound for a stuck stream, not a speed check
			t.Fatalf("%s: no ring", what)
		}
	}
	wait("the connection")
	create := func(a *pdstest.Account, text string) {
		t.Helper()
		app, err := srv.Client(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": a.DID.String(), "collection": "app.bulleted.node",
			"record": map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": "z", "createdAt": "2026-12-04T10:00:00.000Z"}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// another account's commit first: it must not ring (checked below, once
	// our own has rung: the stream is in order)
	create(other, "not ours")
	create(acct, "from the app")
	wait("the app's commit")
	select {
	case <-rings:
		t.Fatal("a second ring: another account's commit rang, or ours twice")
	case <-time.After(500 * time.Millisecond):
	}
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, rec := range s.Records {
		found = found || rec.Value.Get("text") == "from the app"
	}
	if !found {
		t.Fatal("the rung commit does not read back")
	}
}
