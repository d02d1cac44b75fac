package hosted

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// The memory budget. An instance keeps the engines of the users it served
// (their tree, their read cache, their kept plans, their search index) so
// that the next call is fast; past its byte budget (Config.Memory) it drops
// the least recently used by their measured size (outline.Engine.Size,
// pds.Repo.Size, search.Cache.SizeOf), and any unused for Config.Idle. A
// user with a call in flight is never dropped. A dropped user's next call
// opens them again from the on-disk read cache (users/<did>/repo.car),
// brought current by getRepo?since; their operations journal is in
// Postgres, so nothing is lost. The most recently used user is kept even
// when alone bigger than the whole budget (said once on the log).
//
// The process as a whole is held to the budget: the Go runtime's soft
// limit is set from it (GoMemoryLimit), the users get half of it, users
// are read one at a time (Server.get), measured before their call goes
// on, with room made first for a size measured before, and a dropped
// user's paging snapshots go with them.

// Shares of the budget: the users' engines get UsersShare of it (less the
// snapshots' bound); the rest is headroom for calls in flight (a CAR being
// read, a plan being made), garbage not yet collected, the runtime and
// memory outside it (nonGoReserve). A half leaves the collector its usual
// room (GOGC=100: a heap twice what is live) before it meets the soft
// limit (GoMemoryLimit). Measured in the hosted simulation (-short, 190.7
// MiB budget): at 0.70 the live heap neared the soft limit, the collector
// ran without pause and RSS peaked at 203 MiB; at 0.60 at 185 MiB, at
// 0.50 at 181 MiB, with fewer reopens than the collector's cost.
const (
	UsersShare = 0.50
	// DefaultIdle is how long an unused user's engine is kept by default.
	DefaultIdle = 15 * time.Minute
	// DefaultRAMShare is the share of the machine's RAM the budget
	// defaults to outside a container with a memory limit.
	DefaultRAMShare = 0.5
	// userOverhead is what an open user costs besides their engine's
	// measured state: the session, the API client, the journal, the
	// tool environment.
	userOverhead = 64 << 10
	// snapshotShare bounds the paging snapshots at this share of the
	// budget (at most 64 MiB).
	snapshotShare = 16
)

// nonGoReserve is what the process holds outside the Go runtime's
// accounting (the program's code and read-only data paged in, the C
// library, the kernel's page tables): the Go soft memory limit is the
// budget less this, at most a quarter of the budget. Measured in the
// hosted simulation: 23–28 MiB for the test binary; the rest is room.
const nonGoReserve = 48 << 20

// GoMemoryLimit holds the Go runtime to the budget: its soft memory limit
// (debug.SetMemoryLimit; the collector works harder as the runtime's memory
// nears it) is set to the budget less nonGoReserve, unless the operator set
// GOMEMLIMIT (getenv reads the environment), which is then left in force.
// It returns the limit in force (math.MaxInt64: none) and a sentence for
// stderr saying which one it is and where it came from. A budget of 0 (off)
// sets nothing.
func GoMemoryLimit(budget int64, getenv func(string) string) (int64, string) {
	if env := getenv("GOMEMLIMIT"); env != "" {
		cur := debug.SetMemoryLimit(-1)
		say := fmt.Sprintf("Go soft memory limit %s from GOMEMLIMIT=%s (set by the operator, kept", FormatBytes(cur), env)
		switch {
		case budget == 0:
			say += "; no memory budget)"
		case cur > budget:
			say += fmt.Sprintf("): ABOVE the memory budget %s, so the process may grow past the budget", FormatBytes(budget))
		default:
			say += fmt.Sprintf("; the memory budget is %s)", FormatBytes(budget))
		}
		return cur, say
	}
	if budget == 0 {
		return math.MaxInt64, "no Go soft memory limit (no memory budget, no GOMEMLIMIT)"
	}
	reserve := min(int64(nonGoReserve), budget/4)
	limit := budget - reserve
	debug.SetMemoryLimit(limit)
	return limit, fmt.Sprintf("Go soft memory limit %s: the memory budget %s less %s for memory outside the Go runtime (GOMEMLIMIT overrides)",
		FormatBytes(limit), FormatBytes(budget), FormatBytes(reserve))
}

// MemoryStats are an instance's figures of its users' memory.
type MemoryStats struct {
	Budget      int64 // the users' share of Config.Memory (0: no byte budget)
	Bytes       int64 // the open users' measured bytes
	Users       int   // open users
	InFlight    int   // users with a call in flight
	Opens       int64 // users opened (a first call on this instance or after eviction)
	Reopens     int64 // of them, opened from an existing read cache
	EvictedSize int64 // users dropped to fit the budget
	EvictedIdle int64 // users dropped after the idle time
	Oversize    int64 // users found bigger than the whole budget (kept while most recent)
	Reserved    int64 // bytes made room for a user being read now
	LoadsBeside int64 // users read beside another after waiting loadWait for it
}

// memState is the bookkeeping of the budget (guarded by Server.mu).
type memState struct {
	budget int64 // users' share (0: none)
	idle   time.Duration
	stats  MemoryStats
	// known are users' sizes when last measured on this instance (kept
	// after they are dropped, at most maxKnown): a reopen makes room for
	// them before they are read
	known map[string]int64
	// reserved are the bytes made room for users being read now
	reserved int64
}

// maxKnown bounds memState.known (about 100 bytes an entry).
const maxKnown = 100_000

// remember keeps u's last measured size for their next open (s.mu held).
func (s *Server) remember(u *user) {
	if s.mem.known == nil || len(s.mem.known) >= maxKnown {
		s.mem.known = map[string]int64{}
	}
	s.mem.known[u.did] = u.size
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
}

func (s *Server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
		return
	}
	fmt.Fprintf(os.Stderr, "bulleted-mcp: "+format+"\n", args...)
}

// initMemory sets the budget's shares from cfg.
func (s *Server) initMemory() {
	s.mem.idle = s.cfg.Idle
	snapBytes := int64(64 << 20)
	if m := s.cfg.Memory; m > 0 {
		snapBytes = min(snapBytes, m/snapshotShare)
		s.mem.budget = max(int64(float64(m)*UsersShare)-snapBytes, 1)
		// the users' search indexes count in their sizes; indexes of other
		// repositories (contributors') are bounded by the cache itself
		s.search.MaxBytes = max(s.mem.budget/4, 1<<20)
	}
	s.snapshots.MaxBytes = snapBytes
}

// MemoryBudget says what the instance keeps and how it is bounded (for
// the log at start).
func (s *Server) MemoryBudget() string {
	idle := "never dropped for idleness"
	if s.mem.idle > 0 {
		idle = "dropped after " + s.mem.idle.String() + " unused"
	}
	if s.mem.budget == 0 {
		return fmt.Sprintf("no byte budget: up to %d users' engines kept, %s", maxUsers, idle)
	}
	return fmt.Sprintf("%s for the users' engines (%.0f %% of %s, less %s for paging snapshots), the least recently used dropped past it; %s",
		FormatBytes(s.mem.budget), UsersShare*100, FormatBytes(s.cfg.Memory), FormatBytes(s.snapshots.MaxBytes), idle)
}

// Memory returns the instance's figures now.
func (s *Server) Memory() MemoryStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.mem.stats
	st.Budget = s.mem.budget
	st.Users = len(s.users)
	st.Reserved = s.mem.reserved
	for _, u := range s.users {
		st.Bytes += u.size
		if u.refs > 0 {
			st.InFlight++
		}
	}
	return st
}

// sizing is what a user's last measure found (guarded by its mu).
type sizing struct {
	mu       sync.Mutex
	tree     *outline.Tree // the tree measured or scaled last
	count    int           // its records when measured whole
	perRec   float64       // bytes a record, tree and read cache, when measured whole
	scaled   int           // trees scaled since the last whole measure
	repoSize func() int64  // the repository's own bytes beyond the tree (nil: none)
}

// rescale: a tree is measured whole again after this many trees whose size
// was scaled from the last measure by their record count, or when the
// count moved by more than an eighth.
const rescale = 32

// measure estimates u's bytes: the engine's tree and the read cache (walked
// whole when they changed much, else scaled by the record count), the
// kept plans, the search index, a fixed overhead. No lock of the server is
// held.
func (s *Server) measure(u *user) int64 {
	z := &u.sizing
	z.mu.Lock()
	e := u.env.Engine
	t := e.Kept()
	var base int64
	switch {
	case t == nil:
	case t == z.tree:
		base = int64(z.perRec * float64(max(t.Count, 1)))
	case z.tree == nil || z.scaled >= rescale || math.Abs(float64(t.Count-z.count)) > float64(z.count)/8:
		base = t.Size()
		if z.repoSize != nil {
			base += z.repoSize()
		}
		z.tree, z.count, z.scaled = t, t.Count, 0
		z.perRec = float64(base) / float64(max(t.Count, 1))
	default:
		z.tree = t
		z.scaled++
		base = int64(z.perRec * float64(max(t.Count, 1)))
	}
	z.mu.Unlock()
	return userOverhead + base + e.PlansSize() + s.search.SizeOf(u.did)
}

// hold marks u in use by one more call (s.mu held).
func (s *Server) hold(u *user) {
	u.refs++
	u.used = s.now()
}

// release ends a call of u: measures them again and drops whoever must go
// to fit the budget.
func (s *Server) release(u *user) {
	size := s.measure(u)
	s.mu.Lock()
	defer s.mu.Unlock()
	u.refs--
	u.used = s.now()
	u.size = size
	s.fit()
}

// fit drops users, least recently used first, until the open users' bytes
// and those reserved for users being read fit the budget; a user with a
// call in flight, or the most recently used (when none is being read), is
// never dropped (s.mu held).
func (s *Server) fit() {
	if s.mem.budget == 0 {
		return
	}
	total := s.mem.reserved
	var mru *user
	for _, u := range s.users {
		total += u.size
		if mru == nil || u.used.After(mru.used) {
			mru = u
		}
	}
	if mru != nil && mru.size > s.mem.budget && !mru.oversize {
		mru.oversize = true
		s.mem.stats.Oversize++
		s.logf("user %s holds %s, more than the whole users' budget %s: served, and kept while they are the most recently used (others are dropped first)", mru.did, FormatBytes(mru.size), FormatBytes(s.mem.budget))
	}
	if total <= s.mem.budget {
		return
	}
	if s.mem.reserved > 0 {
		mru = nil // the user being read is the most recent one
	}
	// the users no session subscribes to here go first (least recently
	// used first), then those it does: a dropped user is no longer
	// followed, so its subscribers hear of others' edits only once it is
	// opened again (said in the log)
	type cand struct {
		u       *user
		watched bool
	}
	var cands []cand
	for _, u := range s.users {
		if u.refs == 0 && u != mru {
			cands = append(cands, cand{u, s.watched(u.did)})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.watched != b.watched {
			if a.watched {
				return 1
			}
			return -1
		}
		return a.u.used.Compare(b.u.used)
	})
	for _, c := range cands {
		if total <= s.mem.budget {
			break
		}
		total -= c.u.size
		s.drop(c.u)
		s.mem.stats.EvictedSize++
		if c.watched {
			s.logf("user %s dropped to fit the users' budget %s though a session subscribes to their outline: it is no longer followed, and its subscribers hear of changes again once a call opens it (raise --memory)", c.u.did, FormatBytes(s.mem.budget))
		}
	}
}

// watched reports whether a session subscribes here to a resource of did
// (s.mu held).
func (s *Server) watched(did string) bool {
	if s.watchedHook != nil {
		return s.watchedHook(did)
	}
	return s.subs.Watching(did)
}

// drop forgets u's engine, search index and paging snapshots (s.mu held).
func (s *Server) drop(u *user) {
	if u.leave != nil {
		u.leave() // no longer followed
		u.leave = nil
	}
	s.remember(u)
	delete(s.users, u.did)
	s.search.Drop(u.did)
	s.snapshots.Drop(u.did)
}

// Sweep drops the users unused for the idle time (none in flight), then
// whoever must go to fit the budget. The janitor runs it; tests call it.
func (s *Server) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mem.idle > 0 {
		cut := s.now().Add(-s.mem.idle)
		for _, u := range s.users {
			// (a user a session subscribes to here stays followed, so
			// that others' edits keep reaching it: follow.go)
			if u.refs == 0 && u.used.Before(cut) && !s.watched(u.did) {
				s.drop(u)
				s.mem.stats.EvictedIdle++
			}
		}
	}
	s.fit()
}

// RunJanitor sweeps every so often (every: a quarter of the idle time,
// between 1 s and 1 min, when zero) until ctx ends.
func (s *Server) RunJanitor(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = min(max(s.mem.idle/4, time.Second), time.Minute)
	}
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			s.Sweep()
		}
	}
}

// ParseBytes reads a byte count: a number of bytes, or one with a unit
// (KiB, MiB, GiB, TiB: powers of 1024; kB, MB, GB, TB: of 1000; K, M, G, T
// are read as the binary ones), a fraction allowed ("1.5GiB").
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	mult := map[string]float64{"": 1, "B": 1,
		"K": 1 << 10, "KB": 1e3, "KIB": 1 << 10, "M": 1 << 20, "MB": 1e6, "MIB": 1 << 20,
		"G": 1 << 30, "GB": 1e9, "GIB": 1 << 30, "T": 1 << 40, "TB": 1e12, "TIB": 1 << 40}[strings.ToUpper(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q (want bytes, KiB, MiB, GiB, TiB, kB, MB, GB, TB)", s, unit)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%q: not a byte count (want e.g. 2GiB, 512MiB, 1073741824)", s)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("%q: too large", s)
	}
	return int64(v), nil
}

// FormatBytes writes n in the largest binary unit that keeps it ≥ 1.
func FormatBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatFloat(float64(n)/(1<<30), 'f', 2, 64) + " GiB"
	case n >= 1<<20:
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
	case n >= 1<<10:
		return strconv.FormatFloat(float64(n)/(1<<10), 'f', 1, 64) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " B"
}

// DefaultMemory is the budget when --memory is not given, and where it
// came from: the memory limit of the container (cgroup v2 memory.max of
// this process's cgroup, else of the root; cgroup v1
// memory.limit_in_bytes), else DefaultRAMShare of the machine's RAM
// (/proc/meminfo). root prefixes every path ("" on a real system; tests
// give a fake tree). A limit at or above the RAM counts as none.
func DefaultMemory(root string) (int64, string, error) {
	ram, ramErr := memTotal(filepath.Join(root, "/proc/meminfo"))
	var paths []string
	if cg, err := os.ReadFile(filepath.Join(root, "/proc/self/cgroup")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(cg))
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "0::"); ok && rest != "/" && rest != "" {
				paths = append(paths, filepath.Join("/sys/fs/cgroup", rest, "memory.max"))
			}
			if _, rest, ok := strings.Cut(line, ":memory:"); ok && rest != "/" && rest != "" {
				paths = append(paths, filepath.Join("/sys/fs/cgroup/memory", rest, "memory.limit_in_bytes"))
			}
		}
	}
	paths = append(paths, "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || (ramErr == nil && n >= ram) || n >= 1<<62 {
			continue
		}
		return n, "the container's memory limit, " + p, nil
	}
	if ramErr != nil {
		return 0, "", fmt.Errorf("no container memory limit and the RAM is unknown (%v): give --memory", ramErr)
	}
	return int64(float64(ram) * DefaultRAMShare), fmt.Sprintf("%.0f %% of the machine's RAM (%s, /proc/meminfo; no container memory limit)", DefaultRAMShare*100, FormatBytes(ram)), nil
}

// memTotal reads MemTotal from a meminfo file.
func memTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				n, err := strconv.ParseInt(f[0], 10, 64)
				if err == nil && n > 0 {
					return n << 10, nil
				}
			}
		}
	}
	return 0, errors.New("no MemTotal in " + path)
}
