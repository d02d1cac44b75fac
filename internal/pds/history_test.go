package pds_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// On a PDS, what changed since a rev comes from the commits this server
// followed: its own (with their operations' ids) and another client's,
// learnt by getRepo?since= when asked; each with the right kind, read
// back against a fresh whole read. A server that began reading the
// repository later says that the history before that is not known to it.
func TestPDSSince(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	r := pdstest.Login(t, srv, a, t.TempDir(), nil)
	other := pdstest.Login(t, srv, a, t.TempDir(), nil)
	e := outline.New(r)
	out, err := e.Do(ctx, intent.Insert{Nodes: []intent.NewNode{{Text: "alpha"}, {Text: "beta"}, {Text: "gamma"}, {Text: "delta"}}}, false)
	if err != nil {
		t.Fatal(err)
	}
	k := map[string]string{}
	for _, cr := range out.Plan.Created {
		k[cr.Text] = cr.RKey
	}
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev0 := tr.Rev
	ops := map[string]string{}
	text := "alpha two"
	for name, in := range map[string]outline.Intent{
		"alpha": intent.Edit{Node: k["alpha"], Text: &text},
		"beta":  intent.Move{Nodes: []string{k["beta"]}, Pos: outline.Position{Parent: k["gamma"]}},
		"delta": intent.Delete{Node: k["delta"]},
	} {
		o, err := e.Do(ctx, in, false)
		if err != nil {
			t.Fatal(err)
		}
		ops[name] = o.Op.ID
	}
	// another client: creates epsilon, edits gamma
	snap, err := other.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var gamma map[string]any
	for _, rec := range snap.Records {
		if rec.RKey == k["gamma"] && rec.Collection == "app.bulleted.node" {
			gamma = rec.Value.Map()
		}
	}
	gamma["text"] = "gamma by hand"
	eps := "3kzzzzzzzzzz2"
	if _, err := other.Apply(ctx, "", []store.Write{
		{Op: store.Create, Collection: "app.bulleted.node", RKey: eps, Value: map[string]any{"$type": "app.bulleted.node", "text": "epsilon", "sortKey": "zz", "createdAt": "2026-12-01T10:00:00.000Z"}},
		{Op: store.Update, Collection: "app.bulleted.node", RKey: k["gamma"], Value: gamma},
	}); err != nil {
		t.Fatal(err)
	}
	s, err := e.Since(ctx, store.HistoryQuery{Rev: rev0})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Changes {
		got = append(got, fmt.Sprintf("%s %s %s %s %s", c.RKey, c.Change, c.By, c.Operation, c.Text))
	}
	slices.Sort(got)
	want := []string{
		k["alpha"] + " edited server " + ops["alpha"] + " alpha two",
		k["beta"] + " moved server " + ops["beta"] + " beta",
		k["delta"] + " deleted server " + ops["delta"] + " delta",
		eps + " created other  epsilon",
		k["gamma"] + " edited other  gamma by hand",
	}
	slices.Sort(want)
	if !slices.Equal(got, want) || s.Cut != "" || s.Rev != rev0 {
		t.Fatalf("since %s:\n got %q (cut %q, from %s)\nwant %q", rev0, got, s.Cut, s.Rev, want)
	}
	// read back: the head counted to is the PDS's, and every change is there
	head := fresh(t, a.DID)
	if s.HeadRev != head.Rev {
		t.Fatalf("counted to rev %s, the PDS is at %s", s.HeadRev, head.Rev)
	}
	texts := map[string]string{}
	for _, rec := range head.Records {
		if rec.Collection == "app.bulleted.node" {
			texts[rec.RKey] = rec.Value.Str("text")
		}
	}
	for _, c := range s.Changes {
		if _, ok := texts[c.RKey]; ok == (c.Change == "deleted") || ok && texts[c.RKey] != c.Text {
			t.Errorf("%s %s %q: the PDS has %q (%v)", c.RKey, c.Change, c.Text, texts[c.RKey], ok)
		}
	}
	// a rev the repository never had (an hour past its head: a rev of now
	// may be behind the PDS's rev clock, which runs ahead under quick
	// commits), and one this server never saw: refused
	if _, err := e.Since(ctx, store.HistoryQuery{Rev: syntax.NewTID(time.Now().Add(time.Hour).UnixMicro(), 0).String()}); !errors.Is(err, store.ErrUnknownRev) {
		t.Errorf("a future rev: %v", err)
	}
	// a server that read the repository whole after rev0 cannot tell what
	// came before, and says so
	late := outline.New(pdstest.Login(t, srv, a, t.TempDir(), nil))
	if _, err := late.Tree(ctx); err != nil {
		t.Fatal(err)
	}
	s, err = late.Since(ctx, store.HistoryQuery{Rev: rev0})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Cut, "only since rev "+head.Rev) || len(s.Changes) != 0 {
		t.Fatalf("a later reader: cut %q, %d changes", s.Cut, len(s.Changes))
	}
}

// The same from the followed commit stream: the app's commits, taken in
// one by one as they come, are listed with their kinds (created, edited,
// moved, deleted) and as another writer's, without reading the repository
// again (no CAR, no difference read).
func TestPDSSinceFromStream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := newFollowRig(t, ctx)
	did := g.acct.DID.String()
	post := func(method string, in map[string]any) string {
		t.Helper()
		var out struct {
			Commit struct {
				Rev string `json:"rev"`
			} `json:"commit"`
		}
		in["repo"], in["collection"] = did, "app.bulleted.node"
		if err := g.app.Post(ctx, syntax.NSID(method), in, &out); err != nil {
			t.Fatal(err)
		}
		return out.Commit.Rev
	}
	rec := func(text, sortKey string) map[string]any {
		return map[string]any{"$type": "app.bulleted.node", "text": text, "sortKey": sortKey, "createdAt": "2026-12-04T10:00:00.000Z"}
	}
	ka, kb, kc, kd := "3kaaaaaaaaaa2", "3kaaaaaaaaab2", "3kaaaaaaaaac2", "3kaaaaaaaaad2"
	post("com.atproto.repo.createRecord", map[string]any{"rkey": ka, "record": rec("a", "a0")})
	post("com.atproto.repo.createRecord", map[string]any{"rkey": kb, "record": rec("b", "b0")})
	post("com.atproto.repo.createRecord", map[string]any{"rkey": kd, "record": rec("d", "d0")})
	r := g.login()
	e := outline.New(r)
	tr, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev0 := tr.Rev
	follow(t, ctx, r)
	until(t, "live", r.Live)
	streamed := r.Stats.Streamed.Load()
	post("com.atproto.repo.createRecord", map[string]any{"rkey": kc, "record": rec("c", "c0")})
	post("com.atproto.repo.putRecord", map[string]any{"rkey": ka, "record": rec("a edited", "a0")})
	post("com.atproto.repo.putRecord", map[string]any{"rkey": kb, "record": rec("b", "z0")})
	last := post("com.atproto.repo.deleteRecord", map[string]any{"rkey": kd})
	until(t, "taken in", func() bool { return pds.KeptRev(r) >= last })
	cars, diffs := r.Stats.CARs.Load(), r.Stats.Diffs.Load()
	s, err := e.Since(ctx, store.HistoryQuery{Time: mustTime(t, rev0)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range s.Changes {
		got = append(got, c.RKey+" "+c.Change+" "+c.By)
	}
	want := []string{kc + " created other", ka + " edited other", kb + " moved other", kd + " deleted other"}
	if !slices.Equal(got, want) || s.Rev != rev0 || s.Cut != "" {
		t.Fatalf("since %s: %q (from %s, cut %q), want %q", rev0, got, s.Rev, s.Cut, want)
	}
	if n := r.Stats.Streamed.Load() - streamed; n < 4 || r.Stats.CARs.Load() != cars || r.Stats.Diffs.Load() != diffs {
		t.Fatalf("%d commits taken in from the stream, %d CAR and %d difference reads for the answer", n, r.Stats.CARs.Load()-cars, r.Stats.Diffs.Load()-diffs)
	}
}

func mustTime(t *testing.T, rev string) time.Time {
	t.Helper()
	tid, err := syntax.ParseTID(rev)
	if err != nil {
		t.Fatal(err)
	}
	return tid.Time()
}
