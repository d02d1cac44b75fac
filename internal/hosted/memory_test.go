package hosted

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"2GiB": 2 << 30, "512MiB": 512 << 20, "1073741824": 1 << 30, "1.5GiB": 3 << 29, "2G": 2 << 30,
		"2GB": 2e9, " 100 MiB ": 100 << 20, "64kB": 64000, "7": 7, "3KiB": 3 << 10,
	} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "2 parsecs", "-1GiB", "1e400", "two GiB"} {
		if got, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, got)
		}
	}
}

// fakeRoot makes a file tree with files (path → content) under a temporary
// root.
func fakeRoot(t *testing.T, files map[string]string) string {
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestDefaultMemory: the budget defaults to the cgroup's memory limit (v2
// of this process's cgroup or the root's, v1), and to half the RAM when
// there is none ("max", or a v1 limit past the RAM).
func TestDefaultMemory(t *testing.T) {
	const meminfo = "MemTotal:       8388608 kB\nMemFree:        1000 kB\n"
	ram := int64(8 << 30)
	for _, c := range []struct {
		name  string
		files map[string]string
		want  int64
		from  string
	}{
		{"v2 root", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30, "memory.max"},
		{"v2 own cgroup", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/app.slice/x\n",
			"sys/fs/cgroup/app.slice/x/memory.max": "1073741824\n", "sys/fs/cgroup/memory.max": "max\n"}, 1 << 30, "app.slice/x/memory.max"},
		{"v2 max", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"}, ram / 2, "RAM"},
		{"v1", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n"}, 512 << 20, "memory.limit_in_bytes"},
		{"v1 unlimited", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "4:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, ram / 2, "RAM"},
		{"none", map[string]string{"proc/meminfo": meminfo}, ram / 2, "RAM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, from, err := DefaultMemory(fakeRoot(t, c.files))
			if err != nil || got != c.want || !strings.Contains(from, c.from) {
				t.Errorf("DefaultMemory = %d, %q, %v; want %d from %s", got, from, err, c.want, c.from)
			}
		})
	}
	if _, _, err := DefaultMemory(fakeRoot(t, map[string]string{"x": ""})); err == nil {
		t.Error("no limit and no RAM figure: want an error (give --memory)")
	}
}

// memInstance is an instance whose users are generated outlines of
// sizes[did] bullets in memory (the opener seam), with its clock at *now.
type memInstance struct {
	*instance
	mu    sync.Mutex
	now   time.Time
	logs  []string
	opens map[string]int
}

func newMemInstance(t *testing.T, idle time.Duration, sizes map[string]int) *memInstance {
	m := &memInstance{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), opens: map[string]int{}}
	m.instance = newEnv(t).start(t, func(c *Config) {
		c.Memory = 1 << 30
		c.Idle = idle
		c.Now = func() time.Time { m.mu.Lock(); defer m.mu.Unlock(); return m.now }
		c.Logf = func(f string, a ...any) {
			m.mu.Lock()
			defer m.mu.Unlock()
			m.logs = append(m.logs, fmt.Sprintf(f, a...))
		}
	})
	recs := map[int]*outlinegen.Memory{}
	m.Server.open = func(ctx context.Context, did string) (*user, error) {
		n := sizes[did]
		m.mu.Lock()
		m.opens[did]++
		if recs[n] == nil {
			recs[n] = outlinegen.NewMemory(outlinegen.Generate(n, 1))
		}
		repo := recs[n]
		m.mu.Unlock()
		return &user{did: did, env: &tools.Env{Engine: outline.New(repo), Search: m.search, Snapshots: m.snapshots}}, nil
	}
	return m
}

func (m *memInstance) advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

func (m *memInstance) setBudget(n int64) {
	m.Server.mu.Lock()
	m.mem.budget = n
	m.Server.mu.Unlock()
}

// begin starts a call of did (as /mcp does: envFor), its engine read; end
// (the returned func) finishes it.
func (m *memInstance) begin(t *testing.T, did string) func() {
	t.Helper()
	ctx := context.WithValue(context.Background(), identityKey{}, principal{DID: did})
	env, done, err := m.envFor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Engine.Tree(ctx); err != nil {
		t.Fatal(err)
	}
	return done
}

func (m *memInstance) callOnce(t *testing.T, did string) { t.Helper(); m.begin(t, did)() }

func (m *memInstance) open(did string) bool {
	m.Server.mu.Lock()
	defer m.Server.mu.Unlock()
	_, ok := m.users[did]
	return ok
}

func (m *memInstance) sizeOf(did string) int64 {
	m.Server.mu.Lock()
	defer m.Server.mu.Unlock()
	return m.users[did].size
}

// checkWithin fails when the open users' measured bytes pass the budget.
func (m *memInstance) checkWithin(t *testing.T, when string) {
	t.Helper()
	st := m.Memory()
	if st.Bytes > st.Budget {
		t.Errorf("%s: %d users hold %d bytes, over the budget %d", when, st.Users, st.Bytes, st.Budget)
	}
}

const (
	didA = "did:plc:aaaaaaaaaaaaaaaaaaaaaaaa"
	didB = "did:plc:bbbbbbbbbbbbbbbbbbbbbbbb"
	didC = "did:plc:cccccccccccccccccccccccc"
	didD = "did:plc:dddddddddddddddddddddddd"
)

// TestEvictBySize: past the budget the least recently used users are
// dropped, the open users' measured bytes stay within it, and a dropped
// user's next call opens them again.
func TestEvictBySize(t *testing.T) {
	m := newMemInstance(t, 0, map[string]int{didA: 3000, didB: 3000, didC: 3000, didD: 3000})
	m.callOnce(t, didA)
	one := m.sizeOf(didA)
	if one < 1<<20 {
		t.Fatalf("a 3,000-bullet user measured %d bytes", one)
	}
	m.setBudget(one * 5 / 2) // two users fit, not three
	m.advance(time.Second)
	m.callOnce(t, didB)
	m.advance(time.Second)
	m.checkWithin(t, "two users")
	m.callOnce(t, didA) // A is now more recent than B
	m.advance(time.Second)
	m.callOnce(t, didC)
	m.checkWithin(t, "three users called")
	if m.open(didB) || !m.open(didA) || !m.open(didC) {
		t.Fatalf("after A, B, A, C with room for two: open A=%v B=%v C=%v; want B (least recently used) dropped", m.open(didA), m.open(didB), m.open(didC))
	}
	m.advance(time.Second)
	m.callOnce(t, didB)
	m.checkWithin(t, "B again")
	if m.opens[didB] != 2 || m.open(didA) {
		t.Fatalf("B opened %d times (want 2: dropped, then opened again); A open %v (want dropped)", m.opens[didB], m.open(didA))
	}
	if st := m.Memory(); st.EvictedSize != 2 || st.Opens != 4 {
		t.Errorf("stats %+v: want 2 evicted by size, 4 opens", st)
	}
}

// TestEvictBySizeSparesWatched: to fit the budget, a user a session
// subscribes to here (followed, so that others' edits reach it) goes after
// every user nobody subscribes to, even a more recently used one; when it
// must go, the log says so (failed before: the least recently used went,
// subscribed or not, silently).
func TestEvictBySizeSparesWatched(t *testing.T) {
	m := newMemInstance(t, 0, map[string]int{didA: 3000, didB: 3000, didC: 3000})
	watched := map[string]bool{didB: true}
	m.Server.mu.Lock()
	m.watchedHook = func(did string) bool { return watched[did] }
	m.Server.mu.Unlock()
	m.callOnce(t, didA)
	one := m.sizeOf(didA)
	m.setBudget(one * 5 / 2) // two users fit, not three
	m.advance(time.Second)
	m.callOnce(t, didB)
	m.advance(time.Second)
	m.callOnce(t, didA) // B is the least recently used
	m.advance(time.Second)
	m.callOnce(t, didC)
	if !m.open(didB) || m.open(didA) || !m.open(didC) {
		t.Fatalf("after A, B (subscribed), A, C with room for two: open A=%v B=%v C=%v; want A dropped, not the subscribed B", m.open(didA), m.open(didB), m.open(didC))
	}
	// every other user subscribed too: the least recently used goes, said
	watched[didA], watched[didC] = true, true
	m.advance(time.Second)
	m.callOnce(t, didA)
	if m.open(didB) {
		t.Fatal("B, the least recently used of users all subscribed to, is still open past the budget")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	said := false
	for _, l := range m.logs {
		said = said || strings.Contains(l, didB) && strings.Contains(l, "though a session subscribes")
	}
	if !said {
		t.Errorf("dropping a subscribed user was not said: %q", m.logs)
	}
}

// TestEvictIdle: a user unused for the idle time is dropped by the sweep
// (the clock injected), one used since is kept, one with a call in flight
// is kept however long the call lasts.
func TestEvictIdle(t *testing.T) {
	m := newMemInstance(t, 15*time.Minute, map[string]int{didA: 500, didB: 500, didC: 500})
	m.callOnce(t, didA)
	m.callOnce(t, didB)
	endC := m.begin(t, didC) // in flight from now on
	m.advance(10 * time.Minute)
	m.callOnce(t, didB)
	m.advance(6 * time.Minute)
	m.Sweep()
	if m.open(didA) || !m.open(didB) || !m.open(didC) {
		t.Fatalf("after 16 min: open A=%v (idle 16 min) B=%v (6 min) C=%v (in flight); want only A dropped", m.open(didA), m.open(didB), m.open(didC))
	}
	m.advance(time.Hour)
	m.Sweep()
	if !m.open(didC) {
		t.Fatal("a user with a call in flight was dropped for idleness")
	}
	if m.open(didB) {
		t.Fatal("B idle for an hour is still open")
	}
	endC()
	m.advance(16 * time.Minute)
	m.Sweep()
	if m.open(didC) {
		t.Fatal("C idle 16 min after its call ended is still open")
	}
	if st := m.Memory(); st.EvictedIdle != 3 {
		t.Errorf("stats %+v: want 3 evicted for idleness", st)
	}
}

// TestInFlightNotEvicted: a user whose call is in flight is never dropped
// to fit the budget, even when the least recently used; once the call
// ends, it can be.
func TestInFlightNotEvicted(t *testing.T) {
	m := newMemInstance(t, 0, map[string]int{didA: 2000, didB: 2000, didC: 2000})
	m.callOnce(t, didA)
	m.setBudget(m.sizeOf(didA) * 3 / 2) // room for one
	endA := m.begin(t, didA)
	m.advance(time.Second)
	m.callOnce(t, didB)
	m.advance(time.Second)
	m.callOnce(t, didC)
	if !m.open(didA) {
		t.Fatal("A, with a call in flight, was dropped")
	}
	if m.open(didB) {
		t.Fatal("B (not in flight, not the most recent) kept past the budget")
	}
	m.advance(time.Second)
	endA() // A is now the most recent: C goes
	if !m.open(didA) || m.open(didC) {
		t.Fatalf("after A's call ended: open A=%v C=%v; want A kept (most recent), C dropped", m.open(didA), m.open(didC))
	}
	m.checkWithin(t, "after A's call")
}

// TestOversizeServed: a user bigger than the whole budget is served, kept
// while most recent, and said once on the log; the next user drops them.
func TestOversizeServed(t *testing.T) {
	m := newMemInstance(t, 0, map[string]int{didA: 2000, didB: 300})
	m.callOnce(t, didB)
	m.setBudget(m.sizeOf(didB) * 3 / 2) // B fits, A (2,000 bullets) alone does not
	m.advance(time.Second)
	m.callOnce(t, didA)
	m.callOnce(t, didA)
	if !m.open(didA) || m.opens[didA] != 1 {
		t.Fatalf("an oversize user: open %v, opened %d times; want kept and opened once", m.open(didA), m.opens[didA])
	}
	var said []string
	for _, l := range m.logs {
		if strings.Contains(l, didA) && strings.Contains(l, "more than the whole users' budget") {
			said = append(said, l)
		}
	}
	if len(said) != 1 {
		t.Fatalf("the log said %d times that A is bigger than the budget (want once): %q", len(said), m.logs)
	}
	m.advance(time.Second)
	m.callOnce(t, didB)
	if m.open(didA) {
		t.Fatal("the oversize user was kept once another was more recent")
	}
	if st := m.Memory(); st.Oversize != 1 {
		t.Errorf("stats %+v: want one oversize user", st)
	}
}

// opID is the operation id of a write tool's result.
func opID(t *testing.T, raw any) string {
	t.Helper()
	b, _ := json.Marshal(raw)
	var v struct {
		Operation string `json:"operation"`
	}
	json.Unmarshal(b, &v)
	if v.Operation == "" {
		t.Fatalf("no operation id in %s", b)
	}
	return v.Operation
}

// TestEvictedUserReopens (the reference PDS, Postgres): a user dropped for
// idleness is opened again by their next call from the read cache, brought
// current with what another instance wrote meanwhile, and undoes an
// operation made before they were dropped. Read back from the PDS.
func TestEvictedUserReopens(t *testing.T) {
	p := testPDS(t)
	e := newEnv(t)
	e.plc = p.PLCURL
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := e.start(t, func(c *Config) {
		c.Memory, c.Idle = 1<<30, time.Minute
		c.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	})
	b := e.start(t, func(c *Config) { c.PublicURL = a.public })
	acct := newAccount(t, p, fmt.Sprintf("evict%d", time.Now().UnixNano()%1e6))
	tok, _ := signIn(t, a, registerClient(t, a), acct, "")
	ca, cb := mcpClient(t, a, tok), mcpClient(t, b, tok)
	ctx := context.Background()
	res, err := call(ctx, ca, "insert_after", map[string]any{"text": "undo me later"})
	if err != nil || res.IsError {
		t.Fatalf("insert: %v %s", err, resultText(res))
	}
	undoID := opID(t, res.StructuredContent)
	if res, err := call(ctx, ca, "insert_after", map[string]any{"text": "kept"}); err != nil || res.IsError {
		t.Fatalf("insert: %v %s", err, resultText(res))
	}
	did := acct.DID.String()
	if _, err := os.Stat(filepath.Join(a.cfg.DataDir, "users", strings.ReplaceAll(did, ":", "_"), "repo.car")); err != nil {
		t.Fatalf("no read cache on disk: %v", err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	a.Sweep()
	if st := a.Memory(); st.Users != 0 || st.EvictedIdle != 1 {
		t.Fatalf("after the idle time: %+v; want the user dropped", st)
	}
	// another instance writes meanwhile
	if res, err := call(ctx, cb, "insert_after", map[string]any{"text": "written meanwhile"}); err != nil || res.IsError {
		t.Fatalf("insert on b: %v %s", err, resultText(res))
	}
	res, err = call(ctx, ca, "read_outline", nil)
	if err != nil || res.IsError {
		t.Fatalf("read after eviction: %v %s", err, resultText(res))
	}
	for _, want := range []string{"undo me later", "kept", "written meanwhile"} {
		if !strings.Contains(resultText(res), want) {
			t.Errorf("read after eviction misses %q: %.500s", want, resultText(res))
		}
	}
	if st := a.Memory(); st.Users != 1 || st.Reopens != 1 || st.Opens != 2 {
		t.Errorf("stats %+v: want the user open again, from the read cache (1 reopen of 2 opens)", st)
	}
	res, err = call(ctx, ca, "undo", map[string]any{"operation": undoID})
	if err != nil || res.IsError {
		t.Fatalf("undo of an operation made before eviction: %v %s", err, resultText(res))
	}
	if got := strings.Join(nodesOf(t, p, acct), "|"); got != "kept|written meanwhile" {
		t.Fatalf("the PDS holds %q after the undo; want kept|written meanwhile", got)
	}
}

// TestGoMemoryLimit: the Go runtime's soft limit is the budget less the
// reserve for memory outside it, and the sentence for stderr says so; a
// GOMEMLIMIT the operator set is kept and named (and flagged when above
// the budget); no budget sets nothing.
func TestGoMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	none := func(string) string { return "" }

	limit, say := GoMemoryLimit(2<<30, none)
	if want := int64(2<<30 - nonGoReserve); limit != want || debug.SetMemoryLimit(-1) != want {
		t.Errorf("2 GiB budget: limit %d (in force %d), want %d", limit, debug.SetMemoryLimit(-1), want)
	}
	if !strings.Contains(say, "Go soft memory limit 1.95 GiB") || !strings.Contains(say, "budget 2.00 GiB") {
		t.Errorf("2 GiB budget says %q", say)
	}
	// a small budget keeps three quarters
	if limit, _ := GoMemoryLimit(64<<20, none); limit != 48<<20 {
		t.Errorf("64 MiB budget: limit %d, want %d", limit, 48<<20)
	}

	debug.SetMemoryLimit(1 << 30) // as the runtime does from GOMEMLIMIT=1GiB
	env := func(k string) string {
		if k == "GOMEMLIMIT" {
			return "1GiB"
		}
		return ""
	}
	limit, say = GoMemoryLimit(2<<30, env)
	if limit != 1<<30 || debug.SetMemoryLimit(-1) != 1<<30 {
		t.Errorf("GOMEMLIMIT=1GiB: limit %d (in force %d), want it kept", limit, debug.SetMemoryLimit(-1))
	}
	if !strings.Contains(say, "GOMEMLIMIT=1GiB") || strings.Contains(say, "ABOVE") {
		t.Errorf("GOMEMLIMIT under the budget says %q", say)
	}
	if _, say = GoMemoryLimit(512<<20, env); !strings.Contains(say, "ABOVE the memory budget 512.0 MiB") {
		t.Errorf("GOMEMLIMIT above the budget says %q", say)
	}

	debug.SetMemoryLimit(old)
	limit, say = GoMemoryLimit(0, none)
	if debug.SetMemoryLimit(-1) != old || !strings.Contains(say, "no Go soft memory limit") {
		t.Errorf("no budget: limit in force %d (was %d), says %q", debug.SetMemoryLimit(-1), old, say)
	}
	_ = limit
}

// TestReopenMakesRoomFirst: a user measured before is made room for
// before they are read again (others dropped first), and a call's user is
// read and measured before they join, so the budget holds while the
// call runs, not only after it.
func TestReopenMakesRoomFirst(t *testing.T) {
	m := newMemInstance(t, 0, map[string]int{didA: 3000, didB: 3000})
	m.callOnce(t, didA)
	one := m.sizeOf(didA)
	m.setBudget(one * 3 / 2) // room for one
	open := m.Server.open
	var bOpenWhenAReads []bool
	m.Server.open = func(ctx context.Context, did string) (*user, error) {
		if did == didA {
			bOpenWhenAReads = append(bOpenWhenAReads, m.open(didB))
		}
		return open(ctx, did)
	}
	m.advance(time.Second)
	endB := m.begin(t, didB) // A dropped once B is measured
	if m.open(didA) {
		t.Fatal("A still open beside B with room for one")
	}
	if got := m.Memory(); got.Bytes <= one/2 {
		t.Fatalf("B in flight counts %d bytes: want it read and measured when it joined (A holds %d)", got.Bytes, one)
	}
	endB()
	m.advance(time.Second)
	m.callOnce(t, didA)
	if len(bOpenWhenAReads) != 1 || bOpenWhenAReads[0] {
		t.Fatalf("when A was read again, B open: %v; want B dropped first (A's size is known)", bOpenWhenAReads)
	}
	m.checkWithin(t, "A again")
	if st := m.Memory(); st.Reserved != 0 {
		t.Errorf("%d bytes still reserved after the reopen", st.Reserved)
	}
}

// TestDropForgetsSnapshots: a dropped user's paging snapshots go with
// their engine (each would hold a whole tree the budget no longer counts).
func TestDropForgetsSnapshots(t *testing.T) {
	// the user's DID is their generated repository's
	m := newMemInstance(t, 0, map[string]int{outlinegen.DID: 3000})
	ctx := context.WithValue(context.Background(), identityKey{}, principal{DID: outlinegen.DID})
	env, done, err := m.envFor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read, _ := tools.Find("read_outline")
	a, err := read.Check(tools.Args(map[string]any{"limit": 50.0}))
	if err != nil {
		t.Fatal(err)
	}
	res, err := read.Handle(ctx, env, a)
	done()
	if err != nil || res.IsError {
		t.Fatalf("read: %v %v", err, res)
	}
	kept := m.snapshots.Len
	if kept() == 0 {
		t.Fatal("a paged read kept no snapshot")
	}
	m.Server.mu.Lock()
	m.drop(m.users[outlinegen.DID])
	m.Server.mu.Unlock()
	if n := kept(); n != 0 {
		t.Errorf("%d snapshots kept after the user was dropped", n)
	}
}

// TestOneReadAtATime: a second user's read waits for the first one's, and
// goes on beside it once loadWait has passed (a slow PDS does not stall
// every first call); it is counted.
func TestOneReadAtATime(t *testing.T) {
	m := newMemInstance(t, 0, map[string]int{didA: 100, didB: 100, didC: 100})
	open := m.Server.open
	stuck, release := make(chan struct{}), make(chan struct{})
	var readsMu sync.Mutex
	var reads []string
	m.Server.open = func(ctx context.Context, did string) (*user, error) {
		readsMu.Lock()
		reads = append(reads, did)
		readsMu.Unlock()
		if did == didA {
			close(stuck)
			<-release
		}
		return open(ctx, did)
	}
	old := loadWait
	loadWait = time.Hour
	// a call from another goroutine (t.Fatal is for the test's own)
	call := func(did string) {
		ctx := context.WithValue(context.Background(), identityKey{}, principal{DID: did})
		env, done, err := m.envFor(ctx)
		if err == nil {
			_, err = env.Engine.Tree(ctx)
			done()
		}
		if err != nil {
			t.Errorf("call of %s: %v", did, err)
		}
	}
	aDone := make(chan struct{})
	go func() { defer close(aDone); call(didA) }()
	<-stuck
	bDone := make(chan struct{})
	go func() { defer close(bDone); call(didB) }()
	select {
	case <-bDone:
		t.Fatal("B was read while A's read was under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	<-aDone
	<-bDone
	readsMu.Lock()
	if got := strings.Join(reads, " "); got != didA+" "+didB {
		t.Errorf("reads in the order %s; want A then B", got)
	}
	readsMu.Unlock()
	if st := m.Memory(); st.LoadsBeside != 0 {
		t.Errorf("%d reads went on beside another; want 0", st.LoadsBeside)
	}

	// a read stuck longer than loadWait: the next one goes on beside it
	stuck, release = make(chan struct{}), make(chan struct{})
	m.Server.open = func(ctx context.Context, did string) (*user, error) {
		if did == didC {
			close(stuck)
			<-release
		}
		return open(ctx, did)
	}
	loadWait = 10 * time.Millisecond
	t.Cleanup(func() { loadWait = old })
	m.Server.mu.Lock()
	m.drop(m.users[didA])
	m.Server.mu.Unlock()
	cDone := make(chan struct{})
	go func() { defer close(cDone); call(didC) }()
	<-stuck
	m.callOnce(t, didA) // returns while C's read is stuck
	if st := m.Memory(); st.LoadsBeside != 1 {
		t.Errorf("%d reads went on beside another; want 1", st.LoadsBeside)
	}
	close(release)
	<-cDone
}
