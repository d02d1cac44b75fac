package pds_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atclient"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

func ptr[T any](v T) *T { return &v }

// fresh reads the repository anew, by CAR and by listRecords, and checks
// that s agrees with both record for record.
func agreesWithFresh(t *testing.T, host string, r *pds.Repo, s *store.Snapshot) {
	t.Helper()
	ctx := context.Background()
	fresh := pds.New(atclient.NewAPIClient(host), r.DID())
	full, err := fresh.SnapshotCAR(ctx)
	if err != nil {
		t.Fatal(err)
	}
	list, err := fresh.SnapshotList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]*store.Snapshot{"CAR": full, "listRecords": list} {
		if s.Commit != want.Commit || s.Rev != want.Rev {
			t.Fatalf("commit %s/%s, a fresh %s read has %s/%s", s.Commit, s.Rev, name, want.Commit, want.Rev)
		}
		if len(s.Records) != len(want.Records) {
			t.Fatalf("%d records, a fresh %s read has %d", len(s.Records), name, len(want.Records))
		}
		for i := range want.Records {
			if !reflect.DeepEqual(s.Records[i], want.Records[i]) {
				t.Fatalf("record %d differs from a fresh %s read:\n%#v\n%#v", i, name, s.Records[i], want.Records[i])
			}
		}
	}
	// what is kept: everything a fresh read keeps, and not much more
	if got, want := pds.KeptBlocks(r), pds.KeptBlocks(fresh); got < want || got > want+want/4+64 {
		t.Fatalf("keeps %d blocks, a fresh read keeps %d", got, want)
	}
}

// After the repository moved, a read downloads only what is newer than the
// last one (getRepo?since=rev) and still agrees with a fresh full read; when
// what it kept cannot complete the difference, it reads the whole repository.
func TestIncrementalRead(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	r := pdstest.Login(t, srv, a, t.TempDir(), nil)
	other := outline.New(pdstest.Login(t, srv, a, t.TempDir(), nil)) // the person in the editor
	e := outline.New(r)
	// another app's record in the same repository: kept as a block, not
	// decoded, not in the snapshot
	c, err := srv.Client(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	post := map[string]any{"repo": a.DID.String(), "collection": "app.bsky.feed.post", "record": map[string]any{
		"$type": "app.bsky.feed.post", "text": "not a bullet, but it says app.bulleted.node", "createdAt": "2026-12-02T10:00:00Z"}}
	if err := c.Post(ctx, "com.atproto.repo.createRecord", post, nil); err != nil {
		t.Fatal(err)
	}
	var ns []intent.NewNode
	for i := 0; i < 60; i++ {
		n := intent.NewNode{Text: fmt.Sprintf("bullet %d", i)}
		if i%4 == 0 {
			n.Note = "note"
			n.Children = []intent.NewNode{{Text: "child", Layout: "todo"}, {Text: "child 2"}}
		}
		ns = append(ns, n)
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: ns}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	t0, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range t0.Records() {
		if !strings.HasPrefix(rec.Collection, "app.bulleted.") {
			t.Fatalf("snapshot has %s", rec.Collection)
		}
	}
	cars, diffs := r.Stats.CARs.Load(), r.Stats.Diffs.Load()
	// the empty repository; then our own insert, known from what
	// applyWrites returned: one getLatestCommit, nothing read
	if cars != 1 || diffs != 0 || r.Stats.Heads.Load() != 1 {
		t.Fatalf("first reads: %d CARs, %d differences, %d heads", cars, diffs, r.Stats.Heads.Load())
	}

	// the other client edits, moves, completes, deletes and inserts
	roots := t0.Roots
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		if err := (intent.Edit{Node: roots.At(1).Key(), Text: ptr("edited"), Note: ptr("a new note")}).Plan(p); err != nil {
			return err
		}
		if err := (intent.Edit{Node: roots.At(0).Key(), Note: ptr("")}).Plan(p); err != nil {
			return err
		}
		if err := (intent.Move{Nodes: []string{roots.At(2).Key(), roots.At(3).Key()}, Pos: outline.Position{Parent: roots.At(5).Key()}}).Plan(p); err != nil {
			return err
		}
		if err := (intent.Complete{Node: roots.At(4).Children.At(0).Key(), Done: true}).Plan(p); err != nil {
			return err
		}
		if err := (intent.Delete{Node: roots.At(8).Key(), Children: "subtree"}).Plan(p); err != nil {
			return err
		}
		return intent.Insert{Pos: outline.Position{After: roots.At(10).Key()}, Nodes: []intent.NewNode{{Text: "new", Children: []intent.NewNode{{Text: "new child"}}}}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Stats.CARs.Load(); got != cars {
		t.Fatalf("downloaded the whole repository again (%d CARs)", got)
	}
	if got := r.Stats.Diffs.Load(); got != diffs+1 {
		t.Fatalf("%d difference reads, want 1", got-diffs)
	}
	agreesWithFresh(t, srv.URL, r, s)

	// our own write, then the tree: the engine's tree matches it, and no
	// whole read nor walk of the MST made it
	walks := r.Stats.Walks.Load()
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Delete{Node: roots.At(12).Key(), Children: "subtree"}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	t1, err := e.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stats.CARs.Load() != cars || r.Stats.Walks.Load() != walks {
		t.Fatalf("after our write: %d CARs, %d walks", r.Stats.CARs.Load(), r.Stats.Walks.Load()-walks)
	}
	if t1.Nodes.Get(roots.At(12).Key()) != nil || t1.Nodes.Get(roots.At(1).Key()).Str("text") != "edited" {
		t.Fatal("the tree does not show the changes")
	}
	agreesWithFresh(t, srv.URL, r, t1.Snapshot())

	// deleting most of the outline leaves most kept blocks unreachable:
	// they are dropped
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		for _, it := range roots.From(30) {
			if err := (intent.Delete{Node: it.Key(), Children: "subtree"}).Plan(p); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	s, err = r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	agreesWithFresh(t, srv.URL, r, s)
	fresh := pds.New(atclient.NewAPIClient(srv.URL), r.DID())
	if _, err := fresh.SnapshotCAR(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := pds.KeptBlocks(r), pds.KeptBlocks(fresh); got != want {
		t.Fatalf("after deleting half: keeps %d blocks, a fresh read keeps %d", got, want)
	}

	// what was kept cannot complete the MST: the whole repository again
	pds.ForgetKeptBlocks(r)
	diffs = r.Stats.Diffs.Load()
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Edit{Node: roots.At(20).Key(), Text: ptr("edited again")}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	s, err = r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stats.Diffs.Load() != diffs+1 || r.Stats.CARs.Load() != cars+1 {
		t.Fatalf("incomplete difference: %d CARs, %d differences", r.Stats.CARs.Load()-cars, r.Stats.Diffs.Load()-diffs)
	}
	agreesWithFresh(t, srv.URL, r, s)
}

// A restarted server with the cache file asks only for what changed (nothing
// comes while nothing did); an unreadable cache, or one of
// another repository, costs one whole read.
func TestCacheAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	cache := filepath.Join(dir, "repo.car")
	var saved atomic.Int32
	open := func() *pds.Repo {
		r := pdstest.Login(t, srv, a, dir, nil)
		r.Cache = cache
		r.AfterCacheSave = func() { saved.Add(1) }
		return r
	}
	other := outline.New(pdstest.Login(t, srv, a, t.TempDir(), nil))
	var ns []intent.NewNode
	for i := 0; i < 40; i++ {
		ns = append(ns, intent.NewNode{Text: fmt.Sprint("bullet ", i), Note: "note"})
	}
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: ns}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	read := func(r *pds.Repo) *store.Snapshot {
		t.Helper()
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	counts := func(r *pds.Repo) [4]int64 {
		return [4]int64{r.Stats.CacheLoads.Load(), r.Stats.Heads.Load(), r.Stats.CARs.Load(), r.Stats.Diffs.Load()}
	}

	first := open()
	s := read(first)
	if got := counts(first); got != [4]int64{0, 0, 1, 0} {
		t.Fatalf("first start: loads, heads, CARs, diffs = %v", got)
	}
	if saved.Load() != 1 {
		t.Fatalf("AfterCacheSave called %d times after the first read's save, want 1", saved.Load())
	}
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache file: %v %v", fi, err)
	}

	// restart, nothing changed: one getLatestCommit
	second := open()
	if again := read(second); !reflect.DeepEqual(again.Records, s.Records) || again.Commit != s.Commit {
		t.Fatal("the cached snapshot differs")
	}
	if got := counts(second); got != [4]int64{1, 0, 0, 1} {
		t.Fatalf("unchanged restart: loads, heads, CARs, diffs = %v", got)
	}

	// restart after the editor changed things: only the difference
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		tr := p.Tree()
		if err := (intent.Edit{Node: tr.Roots.At(0).Key(), Text: ptr("changed while we were away")}).Plan(p); err != nil {
			return err
		}
		return intent.Delete{Node: tr.Roots.At(1).Key(), Children: "refuse"}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	third := open()
	s = read(third)
	if got := counts(third); got != [4]int64{1, 0, 0, 1} {
		t.Fatalf("changed restart: loads, heads, CARs, diffs = %v", got)
	}
	agreesWithFresh(t, srv.URL, third, s)

	// a torn cache file: one whole read, and the file is good again
	raw, err := os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cache, raw[:len(raw)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	fourth := open()
	agreesWithFresh(t, srv.URL, fourth, read(fourth))
	if got := counts(fourth); got != [4]int64{0, 0, 1, 0} {
		t.Fatalf("torn cache: loads, heads, CARs, diffs = %v", got)
	}
	if fifth := open(); read(fifth) != nil && counts(fifth) != [4]int64{1, 0, 0, 1} {
		t.Fatalf("after the torn cache was replaced: loads, heads, CARs, diffs = %v", counts(fifth))
	}

	// a cache whose content was changed in place (a bullet's text, same
	// length): blocks that do not match their CIDs are refused
	raw, err = os.ReadFile(cache)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(raw, []byte("bullet 7"))
	if i < 0 {
		t.Fatal("no bullet 7 in the cache")
	}
	copy(raw[i:], "bullet X")
	if err := os.WriteFile(cache, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pds.ReadCAR(ctx, bytes.NewReader(raw), a.DID); err == nil || !strings.Contains(err.Error(), "integrity") {
		t.Fatalf("reading a tampered CAR: %v", err)
	}
	sixth := open()
	s = read(sixth)
	if got := counts(sixth); got != [4]int64{0, 0, 1, 0} {
		t.Fatalf("tampered cache: loads, heads, CARs, diffs = %v", got)
	}
	agreesWithFresh(t, srv.URL, sixth, s)

	// another account's cache is not used
	b := pdstest.NewAccount(t, srv)
	rb := pdstest.Login(t, srv, b, t.TempDir(), nil)
	rb.Cache = cache
	read(rb)
	if got := counts(rb); got != [4]int64{0, 0, 1, 0} {
		t.Fatalf("another repository's cache: loads, heads, CARs, diffs = %v", got)
	}
}

// A PDS that answers getRepo?since= with the whole repository is noticed
// the first time nothing changed: from then on the head is asked first.
func TestPDSIgnoringSince(t *testing.T) {
	ctx := context.Background()
	u, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(u)
	ignoring := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		q.Del("since")
		req.URL.RawQuery = q.Encode()
		rp.ServeHTTP(w, req)
	}))
	defer ignoring.Close()
	a := pdstest.NewAccount(t, srv)
	other := outline.New(pdstest.Login(t, srv, a, t.TempDir(), nil))
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "one"}, {Text: "two"}}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	r := pds.New(atclient.NewAPIClient(ignoring.URL), a.DID)
	counts := func() [3]int64 { return [3]int64{r.Stats.Heads.Load(), r.Stats.CARs.Load(), r.Stats.Diffs.Load()} }
	for i, want := range [][3]int64{{0, 1, 0}, {0, 1, 1}, {1, 1, 1}} {
		s, err := r.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Records) != 2 || counts() != want {
			t.Fatalf("read %d: %d records; heads, CARs, differences = %v, want %v", i, len(s.Records), counts(), want)
		}
	}
	if _, err := other.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "three"}}}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	s, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Records) != 3 || counts() != [3]int64{2, 2, 1} {
		t.Fatalf("after a change: %d records; heads, CARs, differences = %v", len(s.Records), counts())
	}
}

func TestCompressionAuto(t *testing.T) {
	for host, gzip := range map[string]bool{
		"http://localhost:2583":     false,
		"http://127.0.0.1:2583":     false,
		"http://[::1]:2583":         false,
		"http://192.168.1.20":       false,
		"http://10.0.0.5:2583":      false,
		"https://pds.example.com":   true,
		"https://bsky.social":       true,
		"http://203.0.113.7:2583":   true,
		"https://[2001:db8::1]:443": true,
	} {
		r := pds.New(atclient.NewAPIClient(host), "did:plc:abc")
		if got := pds.AsksGzip(r); got != gzip {
			t.Errorf("%s: gzip %v, want %v", host, got, gzip)
		}
	}
}

type encodings struct {
	mu  sync.Mutex
	got map[string]bool // path → the response came gzipped
}

func (e *encodings) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil {
		e.mu.Lock()
		e.got[req.URL.Path] = resp.Uncompressed || resp.Header.Get("Content-Encoding") == "gzip"
		e.mu.Unlock()
	}
	return resp, err
}

// A gzipped and an uncompressed CAR read give the same snapshot.
func TestGzipRead(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	e := outline.New(pdstest.Login(t, srv, a, t.TempDir(), nil))
	var ns []intent.NewNode
	for i := 0; i < 50; i++ {
		ns = append(ns, intent.NewNode{Text: fmt.Sprint("bullet ", i), Note: "note"})
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: ns}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	var snaps []*store.Snapshot
	for _, c := range []pds.Compression{pds.CompressGzip, pds.CompressNone} {
		enc := &encodings{got: map[string]bool{}}
		ac := atclient.NewAPIClient(srv.URL)
		ac.Client = &http.Client{Transport: enc}
		r := pds.New(ac, a.DID)
		r.Compression = c
		s, err := r.SnapshotCAR(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := enc.got["/xrpc/com.atproto.sync.getRepo"]; got != (c == pds.CompressGzip) {
			t.Fatalf("compression %d: the CAR came gzipped: %v", c, got)
		}
		snaps = append(snaps, s)
	}
	if len(snaps[0].Records) != 100 || !reflect.DeepEqual(snaps[0], snaps[1]) {
		t.Fatalf("gzipped and uncompressed reads differ (%d, %d records)", len(snaps[0].Records), len(snaps[1].Records))
	}
}
