package pds_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// fakeJetstream is a Jetstream stand-in: it records each connection's query
// and sends what the test gives it.
type fakeJetstream struct {
	*httptest.Server
	mu      sync.Mutex
	queries []url.Values
	send    chan any
}

func newFakeJetstream(t *testing.T) *fakeJetstream {
	f := &fakeJetstream{send: make(chan any, 16)}
	up := websocket.Upgrader{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/subscribe" {
			http.NotFound(w, req)
			return
		}
		f.mu.Lock()
		f.queries = append(f.queries, req.URL.Query())
		f.mu.Unlock()
		con, err := up.Upgrade(w, req, nil)
		if err != nil {
			return
		}
		defer con.Close()
		go func() { // pongs
			for {
				if _, _, err := con.NextReader(); err != nil {
					return
				}
			}
		}()
		for m := range f.send {
			if err := con.WriteJSON(m); err != nil {
				return
			}
		}
	}))
	t.Cleanup(func() { close(f.send); f.Close() })
	return f
}

// TestFollowJetstream: following a Jetstream instance, the connection asks
// for this repository and the six app.bulleted collections only; an event
// of the app's commit brings the repository forward by a read from the PDS
// (Jetstream carries nothing verifiable), after which reads cost no
// request; an event of another account's commit reads nothing.
func TestFollowJetstream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	js := newFakeJetstream(t)
	r := g.login()
	r.Jetstream = js.URL // http: becomes ws, the path /subscribe
	follow(t, ctx, r)
	until(t, "live", r.Live)
	js.mu.Lock()
	q := js.queries[0]
	js.mu.Unlock()
	if q.Get("wantedDids") != g.acct.DID.String() || !slices.Equal(q["wantedCollections"], lexicon.Collections) {
		t.Fatalf("Jetstream asked for %v, want this repository and %v", q, lexicon.Collections)
	}

	reads := r.Stats.Diffs.Load() + r.Stats.CARs.Load()
	js.send <- map[string]any{"did": "did:plc:someoneelse", "time_us": time.Now().UnixMicro(), "kind": "commit",
		"commit": map[string]any{"rev": "3zzzzzzzzzzzz", "operation": "create", "collection": "app.bulleted.node", "rkey": "x"}}
	rev := g.edit(t, ctx)
	js.send <- map[string]any{"did": g.acct.DID.String(), "time_us": time.Now().UnixMicro(), "kind": "commit",
		"commit": map[string]any{"rev": rev, "operation": "create", "collection": "app.bulleted.node", "rkey": g.rkeys[0]}}
	until(t, "read on the bell", func() bool { return pds.KeptRev(r) >= rev })
	if n := r.Stats.Diffs.Load() + r.Stats.CARs.Load() - reads; n != 1 {
		t.Fatalf("%d reads for one of this repository's commits and one of another's, want 1", n)
	}
	until(t, "live again", r.Live)
	before := requests(r)
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := requests(r) - before; n != 0 {
		t.Fatalf("a read while following Jetstream made %d request(s), want 0", n)
	}
	g.sameAsFresh(t, ctx, s)
	if r.Stats.Streamed.Load() != 0 {
		t.Fatal("a Jetstream event was taken in as if verified")
	}
	if strings.Contains(q.Encode(), "cursor") {
		t.Fatal("a first connection replayed from a cursor")
	}
}
