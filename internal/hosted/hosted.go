package hosted

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/jackc/pgx/v5/pgxpool"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// Config configures a hosted server.
type Config struct {
	// PublicURL is where clients reach this server (https://HOST, no path):
	// the issuer of its authorization server, and PublicURL/mcp the
	// protected resource (the audience of its tokens).
	PublicURL string
	DB        *pgxpool.Pool
	Sealer    *Sealer
	// DataDir keeps this instance's working files: read caches (the
	// operations journal is in the database only).
	DataDir string
	// Directory resolves identities (handles, DIDs, PDSes).
	Directory identity.Directory
	// Server selects the tools exposed.
	Server server.Options
	// Confirm are the thresholds above which a write asks the person first
	// when the client can ask (nil: never; serve sets tools.DefaultConfirm
	// unless told otherwise).
	Confirm *tools.ConfirmRules
	// AllowOrigins are browser origins accepted on /mcp besides PublicURL's.
	AllowOrigins []string
	// AllowLoopback (tests, and serve's --allow-insecure-pds on a loopback
	// public URL) accepts a PDS on plain http loopback and
	// client ID metadata documents on http loopback. (Upstream, this server
	// is a confidential client whenever PublicURL is https, a loopback
	// public client when it is plain http on loopback.)
	AllowLoopback bool
	// PermissionSet asked for upstream ("" = PermissionSet).
	PermissionSet string
	// Ledger limits (zero: the reference PDS's).
	HourLimit, DayLimit int
	// Token lifetimes (zero: 1 h, 30 days, 30 s).
	AccessTTL, RefreshTTL, RefreshGrace time.Duration
	// BodyTimeout bounds reading a request body on the OAuth endpoints
	// (zero: 10 s), MCPBodyTimeout on /mcp (zero: 30 s): a body not read
	// in time is answered 408 and its connection closed.
	BodyTimeout, MCPBodyTimeout time.Duration
	// Limits are the per-client-address rate limits of /register,
	// /authorize and /token (zero: the defaults, see Limits).
	Limits Limits
	// TrustedProxies are the reverse proxies whose X-Forwarded-For is
	// believed: a request from one of them is counted against the address
	// the header names. Without them the header is ignored and the
	// connection's remote address counts.
	TrustedProxies []netip.Prefix
	// Memory is the instance's byte budget (0: none; users are then
	// bounded by count only): users' engines are dropped, least recently
	// used first, when their measured bytes pass UsersShare of it, and
	// reopened from the read cache on their next call (memory.go).
	Memory int64
	// Idle drops a user's engine unused this long (0: never).
	Idle time.Duration
	// Now is the clock of the idle times (nil: time.Now).
	Now func() time.Time
	// PerAddress caps the requests under way at once from one client
	// address (0: DefaultPerAddress; negative: no cap); beyond it 429.
	PerAddress int
	// ClientUnused: OAuth clients older than this with no pending request,
	// code or token left are deleted by Prune (zero: DefaultClientUnused).
	ClientUnused time.Duration
	// MetricsToken is the bearer token of /metrics (Prometheus text
	// format); "": /metrics is not served.
	MetricsToken string
	// Logf says what the operator should know (a user bigger than the
	// whole budget); nil: on stderr.
	Logf func(format string, args ...any)
}

// Server is one instance of the hosted service.
type Server struct {
	cfg      Config
	db       *pgxpool.Pool
	sealer   *Sealer
	public   string // PublicURL without a trailing slash
	resource string // public + "/mcp"
	origin   string
	ledger   *Ledger
	sessions *sessionStore
	mcp      *mcpserver.MCPServer
	readOnly map[string]bool // read-only tool names
	limits   *limiters
	metrics  *opsMetrics

	clientKey atcrypto.PrivateKeyExportable
	keyID     string

	// search keeps the search indexes of every user's calls, bounded by
	// bytes for the whole instance (an index is per repository, whoever
	// searches it)
	search *search.Cache
	// snapshots keeps the trees recent cursors were made from, for every
	// user's pages, bounded for the whole instance (by repository and
	// revision, whoever reads it)
	snapshots *tools.Snapshots

	// refused counts batches the PDS refused for their swapCommit (another
	// instance wrote first), writeQueue the per-user write queue (userlock.go)
	refused    atomic.Int64
	calls      atomic.Int64 // tool calls that had their user's engine
	writeQueue writeQueue

	mu    sync.Mutex
	users map[string]*user
	mem   memState
	// loading admits one user's read at a time (memory.go)
	loading chan struct{}

	// subs are the MCP sessions' resource subscriptions (a followed
	// commit notifies them: follow.go)
	subs *server.Subscriptions
	// watchedHook, tests: whether a session subscribes to did here (nil:
	// subs says)
	watchedHook func(did string) bool
	// follow: the users held are followed (RunFollowing; nil: not);
	// syncMissed counts calls that could not make sure they heard the
	// other instances' commits (caughtUp)
	follow     *following
	syncMissed atomic.Int64
	// notices counts the other instances' commit notices of users held
	notices atomic.Int64

	// open makes a user's engine (openPDS; the hosted simulation opens
	// generated outlines in memory instead)
	open func(ctx context.Context, did string) (*user, error)
}

// maxUsers bounds the users kept open on one instance (besides the byte
// budget, Config.Memory).
const maxUsers = 2000

// loadWait is how long a user's read waits for the one before it (a
// variable for tests).
var loadWait = 5 * time.Second

// New returns a hosted server instance (the database already migrated:
// OpenDB does that).
func New(ctx context.Context, cfg Config) (*Server, error) {
	u, err := url.Parse(strings.TrimRight(cfg.PublicURL, "/"))
	if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("--public-url %q: want scheme://host[:port] without a path", cfg.PublicURL)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname())) {
		return nil, fmt.Errorf("--public-url %q: must be https (plain http only on loopback, for tests)", cfg.PublicURL)
	}
	if cfg.DB == nil || cfg.Sealer == nil || cfg.Directory == nil {
		return nil, errors.New("hosted: a database, a sealer and a directory are required")
	}
	if cfg.DataDir == "" {
		return nil, errors.New("hosted: a data directory is required")
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, db: cfg.DB, sealer: cfg.Sealer, public: u.Scheme + "://" + u.Host, users: map[string]*user{}, search: search.NewCache(0),
		snapshots: &tools.Snapshots{MaxTrees: 32, MaxBytes: 64 << 20}}
	s.open = s.openPDS
	s.loading = make(chan struct{}, 1)
	s.initMemory()
	s.resource = s.public + "/mcp"
	s.origin = strings.ToLower(s.public)
	s.limits = newLimiters(cfg.Limits)
	s.metrics = newMetrics(s)
	s.ledger = &Ledger{DB: cfg.DB, Limit: cfg.HourLimit, DayLimit: cfg.DayLimit}
	s.sessions = newSessionStore(cfg.DB, 0, s.logf)
	s.sessions.adopted = s.metrics.adopted
	s.writeQueue.slots = make(chan struct{}, max(1, cfg.DB.Config().MaxConns/2))
	if err := s.loadClientKey(ctx); err != nil {
		return nil, fmt.Errorf("upstream client key: %w", err)
	}
	opts := cfg.Server
	opts.EnvFor = s.envFor
	if opts.Subscriptions == nil {
		opts.Subscriptions = server.NewSubscriptions()
	}
	s.subs = opts.Subscriptions
	if s.mcp, err = server.NewWithOptions(nil, opts); err != nil {
		return nil, err
	}
	ro, err := tools.Select(nil, true)
	if err != nil {
		return nil, err
	}
	s.readOnly = map[string]bool{}
	for _, t := range ro {
		s.readOnly[t.Name] = true
	}
	return s, nil
}

// Resource is the protected resource (the audience of this server's tokens).
func (s *Server) Resource() string { return s.resource }

// Ledger is the shared budget ledger.
func (s *Server) Ledger() *Ledger { return s.ledger }

// user is one identity opened on this instance.
type user struct {
	did     string
	env     *tools.Env
	journal *journal
	auth    *sessionAuth
	// guarded by Server.mu
	used     time.Time
	refs     int   // calls in flight: never dropped while > 0
	size     int64 // bytes as last measured (memory.go)
	oversize bool  // said to be bigger than the whole budget
	reopened bool  // opened from an existing read cache
	sizing   sizing
	// repo is the user's PDS repository (nil: not over a PDS); leave ends
	// its following (follow.go; nil: not followed)
	repo  *pds.Repo
	leave func()
}

// apiClient carries API requests to PDSes: bounded by pds' own per-call
// timeouts and limits; this bounds the connection.
var apiClient = &http.Client{Timeout: 5 * time.Minute}

// user returns did's user, opened if this instance holds none (not held:
// tests use it; calls go through acquire).
func (s *Server) user(ctx context.Context, did string) (*user, error) {
	return s.get(ctx, did, false)
}

// acquire returns did's user held for one call (release ends it): never
// dropped while held.
func (s *Server) acquire(ctx context.Context, did string) (*user, error) {
	return s.get(ctx, did, true)
}

func (s *Server) get(ctx context.Context, did string, held bool) (*user, error) {
	s.mu.Lock()
	if u, ok := s.users[did]; ok {
		u.used = s.now()
		if held {
			s.hold(u)
		}
		s.mu.Unlock()
		return u, nil
	}
	s.mu.Unlock()
	// one user is read at a time on an instance: what a read holds
	// before it is measured (the repository decoded, the tree built) is
	// then bounded by one user, besides the budget. A read waits at most
	// loadWait for the one before it (a slow PDS must not stall everyone's
	// first call), then goes on beside it.
	wait := time.NewTimer(loadWait)
	select {
	case s.loading <- struct{}{}:
		defer func() { <-s.loading }()
	case <-wait.C:
		s.mu.Lock()
		s.mem.stats.LoadsBeside++
		s.mu.Unlock()
	case <-ctx.Done():
		wait.Stop()
		return nil, ctx.Err()
	}
	wait.Stop()
	s.mu.Lock()
	if u, ok := s.users[did]; ok { // opened while this call waited
		u.used = s.now()
		if held {
			s.hold(u)
		}
		s.mu.Unlock()
		return u, nil
	}
	// room is made for a user measured before (on this instance) before
	// they are read
	reserve := s.mem.known[did]
	s.mem.reserved += reserve
	s.fit()
	s.mu.Unlock()
	u, err := s.open(ctx, did)
	if err != nil {
		s.mu.Lock()
		s.mem.reserved -= reserve
		s.mu.Unlock()
		return nil, err
	}
	if held {
		// a call's user is read now, before they are counted: their bytes
		// are known when they join, and others are dropped to fit them
		// before the call goes on (a read that fails here is made again by
		// the call, which reports it)
		_, _ = u.env.Engine.Tree(ctx)
	}
	u.size = s.measure(u)
	s.mu.Lock()
	s.mem.reserved -= reserve
	if prev, ok := s.users[did]; ok {
		prev.used = s.now()
		if held {
			s.hold(prev)
		}
		s.mu.Unlock()
		return prev, nil
	}
	u.used = s.now()
	if held {
		s.hold(u)
	}
	s.mem.stats.Opens++
	if u.reopened {
		s.mem.stats.Reopens++
	}
	if len(s.users) >= maxUsers {
		var oldest *user
		for _, x := range s.users {
			if x.refs == 0 && (oldest == nil || x.used.Before(oldest.used)) {
				oldest = x
			}
		}
		if oldest != nil {
			s.drop(oldest)
			s.mem.stats.EvictedSize++
		}
	}
	s.users[did] = u
	s.fit()
	s.mu.Unlock()
	s.join(u) // followed while held (follow.go)
	return u, nil
}

// openPDS opens did's engine over their PDS repository, through the read
// cache on this instance's disk (users/<did>/repo.car): a user dropped
// earlier is brought current from it by getRepo?since.
func (s *Server) openPDS(ctx context.Context, did string) (*user, error) {
	row, err := s.loadSession(ctx, s.db.QueryRow(ctx, "SELECT "+sessionColumns+" FROM atproto_sessions WHERE did = $1", did), did)
	if err != nil {
		return nil, err
	}
	a := &sessionAuth{s: s, did: did}
	sess, err := a.newSession(row)
	if err != nil {
		return nil, err
	}
	a.sess.Store(sess)
	pdid, err := syntax.ParseDID(did)
	if err != nil {
		return nil, err
	}
	c := &atclient.APIClient{Client: apiClient, Host: row.Data.HostURL, Auth: a, AccountDID: &pdid, Headers: http.Header{}}
	c.Headers.Set("User-Agent", userAgent)
	dir := filepath.Join(s.cfg.DataDir, "users", strings.ReplaceAll(did, ":", "_"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	r := pds.New(c, pdid)
	r.Directory = s.cfg.Directory // verifies the followed commits (follow.go)
	r.Cache = filepath.Join(dir, "repo.car")
	_, statErr := os.Stat(r.Cache)
	j := newJournal(s.db, did)
	j.logf = s.logf
	resolver := &pds.Resolver{Client: c, Directory: s.cfg.Directory}
	others := &pds.Others{Resolver: resolver}
	read := func(ctx context.Context, ident string) (*outline.Tree, error) {
		snap, err := others.Snapshot(ctx, ident)
		if err != nil {
			return nil, err
		}
		return outline.Rebuild(snap, nil), nil
	}
	eng, err := outline.Open(&userRepo{inner: r, ledger: s.ledger, journal: j, refused: &s.refused, budgetRefused: s.metrics.budgetRefused, committed: s.committed, logf: s.logf}, outline.Options{Resolver: resolver, Others: read, Journal: j})
	if err != nil {
		return nil, err
	}
	// plans as rows: a dry run's plan (or one held for the person's
	// confirmation) is applied by whichever instance gets the call
	eng.SetPlanStore(&planRows{db: s.db, did: did, applied: s.metrics.plansApplied})
	env := &tools.Env{Engine: eng, Search: s.search, Snapshots: s.snapshots, Confirm: s.cfg.Confirm}
	u := &user{did: did, env: env, journal: j, auth: a, reopened: statErr == nil, repo: r}
	u.sizing.repoSize = r.Size
	return u, nil
}

// envFor is the tool environment of the request's user: their repository,
// budget and operations journal (in the database, shared by every instance).
func (s *Server) envFor(ctx context.Context) (*tools.Env, func(), error) {
	id, ok := identityFrom(ctx)
	if !ok {
		return nil, nil, &outline.Error{Kind: outline.ErrUnavailable, Msg: "no signed-in user for this request", Next: "connect with OAuth (the server's authorization flow)"}
	}
	u, err := s.acquire(ctx, id.DID)
	if err != nil {
		if errors.Is(err, ErrSignInAgain) {
			return nil, nil, &outline.Error{Kind: outline.ErrUnavailable, Msg: err.Error(), Next: "reconnect the server in your MCP client to sign in again"}
		}
		return nil, nil, &outline.Error{Kind: outline.ErrUnavailable, Msg: "opening your repository failed: " + err.Error(), Next: "retry in a moment"}
	}
	// the other instances' commits of the user made before this call are
	// known before it reads the followed head (follow.go)
	s.syncCall(ctx, u)
	// a write waits for the user's turn (userlock.go): instances racing
	// for one user queue instead of sending batches refused as stale
	var turn *heldTurn
	if c, ok := server.CallOf(ctx); ok && !c.ReadOnly {
		end, err := s.queueWrite(ctx, id.DID)
		if err != nil {
			s.release(u)
			return nil, nil, &outline.Error{Kind: outline.ErrCancelled, Msg: "the call ended while it waited for the user's earlier writes to finish; nothing was written", Next: "call again"}
		}
		turn = &heldTurn{end: end}
		c.Yield = func() func() {
			turn.yield()
			return func() { turn.again(ctx, s, id.DID) }
		}
	}
	var once sync.Once
	start := time.Now()
	s.calls.Add(1)
	return u.env, func() {
		once.Do(func() {
			turn.yield()
			s.release(u)
			if c, ok := server.CallOf(ctx); ok {
				s.metrics.observeCall(c.Name, c.ReadOnly, time.Since(start))
			}
		})
	}, nil
}

// principal is who a request's access token belongs to.
type principal struct {
	DID, ClientID, Scope string
}

type identityKey struct{}

func identityFrom(ctx context.Context) (principal, bool) {
	id, ok := ctx.Value(identityKey{}).(principal)
	return id, ok
}
