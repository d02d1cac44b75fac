package pds_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/enginetest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store/storetest"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

var srv *pdstest.Server

func TestMain(m *testing.M) {
	if os.Getenv(killChildEnv) != "" {
		os.Exit(killChild()) // a child of TestKillLoopNeverOverspends
	}
	os.Exit(pdstest.Main(m, &srv))
}

func newRepo(t testing.TB) *pds.Repo {
	return pdstest.Login(t, srv, pdstest.NewAccount(t, srv), t.TempDir(), nil)
}

func TestStoreSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Repository { return newRepo(t) })
}

func TestEngineSuite(t *testing.T) {
	enginetest.Run(t, func(t testing.TB) store.Repository { return newRepo(t) }, 40)
}

func TestSessionKept(t *testing.T) {
	a := pdstest.NewAccount(t, srv)
	dir := t.TempDir()
	pdstest.Login(t, srv, a, dir, nil)
	fi, err := os.Stat(pds.SessionFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("session file mode %v", fi.Mode().Perm())
	}
	raw, _ := os.ReadFile(pds.SessionFile(dir))
	if strings.Contains(string(raw), a.AppPassword) {
		t.Fatal("the session file holds the password")
	}
	// resumed without a password
	c, did, err := pds.Login{PDS: srv.URL, Identifier: a.Handle, Dir: dir}.Open(context.Background())
	if err != nil || did != a.DID {
		t.Fatalf("resume: %v %v", did, err)
	}
	if _, _, err := pds.New(c, did).Head(context.Background()); err != nil {
		t.Fatal(err)
	}
	// no session and no password: a clear error
	_, _, err = pds.Login{PDS: srv.URL, Identifier: a.Handle, Dir: t.TempDir()}.Open(context.Background())
	if !errors.Is(err, pds.ErrNoPassword) {
		t.Fatalf("want ErrNoPassword, got %v", err)
	}
}

// Two clients of the same account insert concurrently; swapCommit makes
// the losers re-plan: nothing is lost and nothing is written twice.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	r1 := pdstest.Login(t, srv, a, t.TempDir(), nil)
	r2 := pdstest.Login(t, srv, a, t.TempDir(), nil)
	top := enginetest.Insert(t, outline.New(r1), outline.Position{}, "shared")[0]
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for w, r := range []*pds.Repo{r1, r2} {
		e := outline.New(r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i++ {
				_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
					return intent.Insert{Pos: outline.Position{Parent: top}, Nodes: []intent.NewNode{{Text: fmt.Sprintf("w%d-%d", w, i)}}}.Plan(p)
				})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("insert: %v", err)
	}
	t.Logf("%d applyWrites calls for %d inserts (the rest lost a swapCommit race and were re-planned)", r1.Stats.Writes.Load()+r2.Stats.Writes.Load(), 2*n+1)
	got := enginetest.Texts(t, outline.New(r1), top)
	if len(got) != 2*n {
		t.Fatalf("want %d children, got %d: %v", 2*n, len(got), got)
	}
	seen := map[string]bool{}
	for _, s := range got {
		if seen[s] {
			t.Fatalf("duplicate %s", s)
		}
		seen[s] = true
	}
	// each writer's own bullets keep their order
	for w := 0; w < 2; w++ {
		last := -1
		for i, s := range got {
			if strings.HasPrefix(s, fmt.Sprintf("w%d-", w)) {
				var k int
				fmt.Sscanf(s[3:], "%d", &k)
				if k < last {
					t.Fatalf("writer %d out of order: %v (at %d)", w, got, i)
				}
				last = k
			}
		}
	}
}

// dropAfterWrite forwards applyWrites to the PDS and then reports a reset
// connection: the commit happened, the client does not know.
type dropAfterWrite struct {
	drops atomic.Int64
	left  atomic.Int64
}

func (d *dropAfterWrite) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && strings.HasSuffix(req.URL.Path, "/com.atproto.repo.applyWrites") && d.left.Add(-1) >= 0 {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d.drops.Add(1)
		return nil, errors.New("connection reset by peer (injected)")
	}
	return resp, err
}

func TestAmbiguousFailureNoDuplicate(t *testing.T) {
	ctx := context.Background()
	a := pdstest.NewAccount(t, srv)
	tr := &dropAfterWrite{}
	r := pdstest.Login(t, srv, a, t.TempDir(), &http.Client{Transport: tr})
	e := outline.New(r)
	enginetest.Insert(t, e, outline.Position{}, "first")
	tr.left.Store(1)
	out, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: []intent.NewNode{{Text: "second", Note: "with a note"}}}.Plan(p)
	})
	if err != nil {
		t.Fatal(err)
	}
	if tr.drops.Load() != 1 || r.Stats.Ambiguous.Load() != 1 {
		t.Fatalf("drops %d, ambiguous %d", tr.drops.Load(), r.Stats.Ambiguous.Load())
	}
	if len(out.Commits) != 1 {
		t.Fatalf("commits %d", len(out.Commits))
	}
	if got := enginetest.Texts(t, e, ""); !reflect.DeepEqual(got, []string{"first", "second"}) {
		t.Fatalf("after the ambiguous failure: %v", got)
	}
	s, _ := r.Snapshot(ctx)
	if len(s.Records) != 3 {
		t.Fatalf("want 3 records (2 nodes, 1 note), got %d", len(s.Records))
	}
	// the reference PDS answers a create of an existing key with HTTP 500:
	// that is reported as ErrRecordExists, not retried into a duplicate
	_, err = r.Apply(ctx, s.Commit, []store.Write{{Op: store.Create, Collection: s.Records[0].Collection, RKey: s.Records[0].RKey, Value: s.Records[0].Value.Map()}})
	if !errors.Is(err, store.ErrRecordExists) {
		t.Fatalf("create of an existing key: %v", err)
	}
}

// The CAR path, the rev cache and the listRecords fallback agree record for
// record.
func TestReadPathsAgree(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	e := outline.New(r)
	var ns []intent.NewNode
	for i := 0; i < 130; i++ {
		n := intent.NewNode{Text: fmt.Sprintf("bullet %d #tag https://example.com/%d", i, i)}
		if i%3 == 0 {
			n.Note = "note " + fmt.Sprint(i)
			n.Children = []intent.NewNode{{Text: "child", Layout: "todo", Completed: i%2 == 0}}
		}
		ns = append(ns, n)
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error { return (intent.Insert{Pos: outline.Position{}, Nodes: ns}).Plan(p) }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Policy{Root: "", Allow: []string{"mentioned"}, Remove: false}.Plan(p)
	}); err != nil {
		t.Fatal(err)
	}
	fromCAR, err := r.SnapshotCAR(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fromList, err := r.SnapshotList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromCAR.Records) != 130+44+44+1 {
		t.Fatalf("CAR snapshot has %d records", len(fromCAR.Records))
	}
	if fromCAR.Commit != fromList.Commit || fromCAR.Rev != fromList.Rev {
		t.Fatalf("commits differ: %s/%s vs %s/%s", fromCAR.Commit, fromCAR.Rev, fromList.Commit, fromList.Rev)
	}
	if !reflect.DeepEqual(fromCAR.Records, fromList.Records) {
		for i := range fromCAR.Records {
			if !reflect.DeepEqual(fromCAR.Records[i], fromList.Records[i]) {
				t.Fatalf("record %d differs:\n%#v\n%#v", i, fromCAR.Records[i], fromList.Records[i])
			}
		}
		t.Fatal("records differ")
	}
	// the rev cache: an unchanged repository costs one getRepo?since=rev
	// that brings no block, and gives the same snapshot
	first, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cars, diffs, heads := r.Stats.CARs.Load(), r.Stats.Diffs.Load(), r.Stats.Heads.Load()
	again, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Stats.CARs.Load() != cars || r.Stats.Diffs.Load() != diffs+1 || r.Stats.Heads.Load() != heads {
		t.Fatalf("warm read: CARs %d→%d, differences %d→%d, heads %d→%d", cars, r.Stats.CARs.Load(), diffs, r.Stats.Diffs.Load(), heads, r.Stats.Heads.Load())
	}
	if again != first || !reflect.DeepEqual(again.Records, fromCAR.Records) {
		t.Fatal("cached snapshot differs")
	}
	// the listRecords-only backend reads the same tree
	r.ListOnly = true
	tl, err := outline.New(r).Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Nodes.Len() != 130+44 || tl.Notes.Len() != 44 || tl.Policies.Len() != 1 {
		t.Fatalf("list tree: %d nodes %d notes %d policies", tl.Nodes.Len(), tl.Notes.Len(), tl.Policies.Len())
	}
}

// With the PDS's own rate limits on: the budget stops the writer before the
// server has to (no 429), and a 429 the server does send (to a client whose
// ledger did not know) pauses writes and is reported as a budget error.
func TestBudgetAgainstRateLimits(t *testing.T) {
	ctx := context.Background()
	rl := pdstest.Start(t, pdstest.Options{RateLimits: true})
	a := pdstest.NewAccount(t, rl)
	r := pdstest.Login(t, rl, a, t.TempDir(), nil)
	ledger, err := budget.New(filepath.Join(t.TempDir(), "budget.json"))
	if err != nil {
		t.Fatal(err)
	}
	r.Budget = ledger
	e := outline.New(r)
	bullets := func(n int) []intent.NewNode {
		ns := make([]intent.NewNode, n)
		for i := range ns {
			ns[i] = intent.NewNode{Text: fmt.Sprint("b", i)}
		}
		return ns
	}
	// a write refused for its swapCommit: the PDS's rate limiter counts a
	// request before its handler refuses it, so the ledger keeps its 3
	// points (the last insert below and the second client's 429 tell both
	// counts)
	stale := "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
	if _, err := r.Apply(ctx, stale, []store.Write{{Op: store.Create, Collection: lexicon.Node, RKey: "3kstaleswap22",
		Value: map[string]any{"$type": lexicon.Node, "text": "stale", "sortKey": "a", "createdAt": "2026-12-05T10:00:00.000Z"}}}); !errors.Is(err, store.ErrStale) {
		t.Fatalf("a write on a stale commit: %v, want ErrStale", err)
	}
	if left := ledger.Left(); left != 5000-3 {
		t.Fatalf("after a write refused for its swapCommit the ledger has %d points left, want 4997 (the PDS counted it)", left)
	}
	ok := 0
	for i := 0; i < 20; i++ {
		_, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
			return intent.Insert{Pos: outline.Position{}, Nodes: bullets(200)}.Plan(p)
		})
		if err != nil {
			if !errors.Is(err, outline.ErrBudget) {
				t.Fatalf("insert %d: %v", i, err)
			}
			t.Logf("refused before writing: %v", err)
			break
		}
		ok++
	}
	if ok != 8 || r.Stats.RateLimited.Load() != 0 {
		t.Fatalf("%d inserts of 600 points, %d 429s", ok, r.Stats.RateLimited.Load())
	}
	if _, err := e.DoFunc(ctx, false, func(p *outline.Planner) error {
		return (intent.Insert{Pos: outline.Position{}, Nodes: bullets(65)}).Plan(p)
	}); err != nil {
		t.Fatalf("195 points of the last 197: %v", err)
	}
	if left := ledger.Left(); left != 2 {
		t.Fatalf("left %d", left)
	}
	// a second client whose ledger knows nothing: the server says 429 to
	// 3 points (it has 2 left only if it counted the refused write)
	r2 := pdstest.Login(t, rl, a, t.TempDir(), nil)
	l2, _ := budget.New("")
	r2.Budget = l2
	_, err = outline.New(r2).DoFunc(ctx, false, func(p *outline.Planner) error {
		return intent.Insert{Pos: outline.Position{}, Nodes: bullets(1)}.Plan(p)
	})
	if !errors.Is(err, outline.ErrBudget) || r2.Stats.RateLimited.Load() != 1 {
		t.Fatalf("want a budget error from a 429, got %v (429s: %d)", err, r2.Stats.RateLimited.Load())
	}
	if l2.PausedUntil().IsZero() {
		t.Fatal("the 429 did not pause writes")
	}
	var ex *budget.Exceeded
	if err := l2.Check(3); !errors.As(err, &ex) || !ex.Paused {
		t.Fatalf("after a 429: %v", err)
	}
	t.Logf("429 paused writes until %s", l2.PausedUntil())
}
