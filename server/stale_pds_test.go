package server_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// staleNote finds the followed stream's staleness notice in a result's
// text and structured notices (both must carry it, or neither).
func staleNote(t *testing.T, text string, sc map[string]any) bool {
	t.Helper()
	const mark = "which has been silent for"
	inText := strings.Contains(text, mark)
	inSC := false
	all, _ := sc["notices"].([]any)
	for _, n := range all {
		if strings.Contains(fmt.Sprint(n), mark) {
			inSC = true
		}
	}
	if inText != inSC {
		t.Fatalf("the staleness notice in one part only (text %v, structured %v):\n%.600s\n%v", inText, inSC, text, sc["notices"])
	}
	return inText
}

// TestFollowHalfOpenSaid: the commit stream's connection goes half-open (a
// TCP proxy between the follower and the reference PDS forwards nothing
// more, and closes nothing). Every result answered from the followed tree
// once the stream has been silent for more than a second says how stale it
// may be, in both parts; within 5 s the connection is given up and reads
// ask the PDS again (an edit made meanwhile is read, no notice); when the
// proxy forwards again the follower reconnects, catches up and answers
// without requests, quietly.
func TestFollowHalfOpenSaid(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := pdstest.Start(t, pdstest.Options{})
	acct, err := srv.CreateAccount(ctx, "halfopen")
	if err != nil {
		t.Fatal(err)
	}
	c, did, err := pds.Login{PDS: srv.URL, Identifier: acct.Handle, Password: acct.AppPassword, Dir: t.TempDir()}.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.URL)
	proxy := pdstest.NewHalfOpen(t, u.Host)
	r := pds.New(c, did)
	r.Directory = pds.Directory(srv.PLCURL)
	r.StreamHost = "http://" + proxy.Addr()
	eng := outline.New(r)
	var mu sync.Mutex
	var down []time.Time
	go r.Follow(ctx, func() { _, _ = eng.Tree(ctx) }, func(err error) {
		if strings.Contains(err.Error(), "the commit stream is down") {
			mu.Lock()
			down = append(down, time.Now())
			mu.Unlock()
		}
	})
	tick := time.NewTicker(20 * time.Millisecond) // polls, not margins
	defer tick.Stop()
	wait := func(what string, bound time.Duration, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(bound); !cond(); <-tick.C {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, bound)
			}
		}
	}
	wait("live", 30*time.Second, r.Live)
	mc, err := client.NewInProcessClient(server.New(eng, false))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	initialize(t, mc)
	callTool(t, mc, "insert_after", map[string]any{"text": "Plan the trip"})
	requests := func() int64 { return r.Stats.Heads.Load() + r.Stats.CARs.Load() + r.Stats.Diffs.Load() }
	// a healthy connection (pinged every half second) is never silent long
	// enough to be said
	wait("our own commit taken in", 30*time.Second, func() bool {
		before := requests()
		callTool(t, mc, "read_outline", nil)
		return requests() == before
	})
	for range 5 {
		before := requests()
		text, sc := callTool(t, mc, "read_outline", nil)
		if staleNote(t, text, sc) {
			t.Fatalf("a healthy stream said stale:\n%.600s", text)
		}
		if requests() != before {
			t.Fatalf("a read while live made %d request(s)", requests()-before)
		}
	}

	proxy.Stall()
	stalled := time.Now()
	var noticed, asked time.Time
	resourceSaid := false
	for asked.IsZero() {
		before := requests()
		text, sc := callTool(t, mc, "read_outline", nil)
		at, n := time.Since(stalled), requests()-before
		said := staleNote(t, text, sc)
		switch {
		case n > 0:
			asked = time.Now() // read from the PDS: fresh, nothing to say
			if said {
				t.Fatalf("a read that asked the PDS (%.1f s after the stall) said stale", at.Seconds())
			}
		case said && noticed.IsZero():
			noticed = time.Now()
		}
		if said && n == 0 && !resourceSaid {
			// a resource read from the same followed tree says it too, in
			// its text and its _meta
			before := requests()
			text, notices := readOutlineResource(t, mc)
			if requests() == before {
				inText, inMeta := strings.Contains(text, "which has been silent for"), strings.Contains(fmt.Sprint(notices), "which has been silent for")
				if !inText || !inMeta {
					t.Fatalf("a resource read from the silent stream: notice in text %v, in _meta %v:\n%.600s", inText, inMeta, text)
				}
				resourceSaid = true
			}
		}
		if n == 0 && !said && at > 1100*time.Millisecond {
			t.Fatalf("a read from the followed tree %.1f s after the stream went silent said nothing:\n%.600s", at.Seconds(), text)
		}
		if at > 5*time.Second && asked.IsZero() {
			t.Fatalf("5 s after the stream went half-open reads still answer from it (noticed at %v)", noticed.Sub(stalled))
		}
		<-tick.C
	}
	if noticed.IsZero() {
		t.Fatal("no read said the stream was silent before reads went back to the PDS")
	}
	if !resourceSaid {
		t.Fatal("no resource read from the silent stream before reads went back to the PDS")
	}
	t.Logf("stale notice after %v, reads ask the PDS after %v", noticed.Sub(stalled), asked.Sub(stalled))
	wait("the half-open connection said down", 5*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(down) > 0
	})
	mu.Lock()
	if d := down[0].Sub(stalled); d > 5*time.Second {
		t.Fatalf("the half-open connection was given up after %v, want within 5 s", d)
	}
	mu.Unlock()

	// an edit by the app while the stream is half-open: read from the PDS
	app, err := srv.Client(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Post(ctx, "com.atproto.repo.createRecord", map[string]any{"repo": did.String(), "collection": "app.bulleted.node",
		"record": map[string]any{"$type": "app.bulleted.node", "text": "Book the train", "sortKey": "z", "createdAt": "2026-12-04T10:00:00.000Z"}}, nil); err != nil {
		t.Fatal(err)
	}
	text, sc := callTool(t, mc, "read_outline", nil)
	if !strings.Contains(text, "Book the train") || staleNote(t, text, sc) {
		t.Fatalf("a read while the stream is half-open:\n%.600s", text)
	}

	// forwarding again: reconnected, caught up, reads without requests
	proxy.Resume()
	wait("live again", 60*time.Second, r.Live)
	before := requests()
	text, sc = callTool(t, mc, "read_outline", nil)
	if staleNote(t, text, sc) || requests() != before || !strings.Contains(text, "Book the train") {
		t.Fatalf("after reconnecting: %d request(s):\n%.600s", requests()-before, text)
	}
}

// readOutlineResource reads bulleted://outline: its text and _meta notices.
func readOutlineResource(t *testing.T, c *client.Client) (string, any) {
	t.Helper()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = server.OutlineURI
	res, err := c.ReadResource(context.Background(), req)
	if err != nil || len(res.Contents) == 0 {
		t.Fatalf("resources/read %s: %v", server.OutlineURI, err)
	}
	tc, ok := res.Contents[0].(mcp.TextResourceContents)
	if !ok {
		t.Fatalf("resources/read %s: %T", server.OutlineURI, res.Contents[0])
	}
	return tc.Text, tc.Meta["notices"]
}
