package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

type hostedFlags struct {
	addr, publicURL, database, dir, plc string
	origins                             []string
	proxies                             []netip.Prefix
	limits                              hosted.Limits
	opts                                server.Options
	confirm                             *tools.ConfirmRules
	mem                                 *memoryFlags
	ops                                 *opsFlags
}

// serveContext is what serve's context derives from (a test cancels it
// to stop a server it started through the flags).
var serveContext = context.Background()

// opsFlags are the hosted instance's operator flags: a loopback PDS for
// testing the shipped binary on one machine, the metrics endpoint, the
// per-address connection cap.
type opsFlags struct {
	insecurePDS  bool
	metricsToken string
	perAddress   int
	clientUnused time.Duration
}

func addOpsFlags(fs *flag.FlagSet) *opsFlags {
	o := &opsFlags{}
	fs.BoolVar(&o.insecurePDS, "allow-insecure-pds", false, "hosted mode, tests and local development only: accept a PDS (and its authorization server) on plain http:// at a loopback address (127.0.0.1, [::1], localhost), and client ID documents there; refused unless --public-url is itself on a loopback host")
	fs.StringVar(&o.metricsToken, "metrics-token", os.Getenv("BULLETED_MCP_METRICS_TOKEN"), "hosted mode: serve /metrics (Prometheus text format) to requests bearing this token (env BULLETED_MCP_METRICS_TOKEN, better than the command line, which other local users may see); without it /metrics is not served")
	fs.DurationVar(&o.clientUnused, "oauth-client-unused", hosted.DefaultClientUnused, "hosted mode: delete an OAuth client (registered, or a kept client ID document) this much older than its registration once no authorization request, code or token of it is left")
	fs.IntVar(&o.perAddress, "max-per-address", hosted.DefaultPerAddress, "hosted mode: requests under way at once from one client address (the address the rate limits count; an open event stream is one), beyond it 429 with Retry-After; 0: no cap")
	return o
}

// publicLoopback reports whether the public URL's host is a loopback one.
func publicLoopback(raw string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// memoryFlags are the hosted instance's memory budget flags.
type memoryFlags struct {
	memory string
	idle   time.Duration
}

func addMemoryFlags(fs *flag.FlagSet) *memoryFlags {
	m := &memoryFlags{}
	fs.StringVar(&m.memory, "memory", "", "hosted mode: this instance's memory budget (e.g. 2GiB, 512MiB, bytes; off: none); users' engines are dropped least recently used past it and reopened from their read cache (default: the container's memory limit, else half the RAM)")
	fs.DurationVar(&m.idle, "idle", hosted.DefaultIdle, "hosted mode: drop a user's engine unused this long (0: never)")
	return m
}

// budget is the memory budget the flags ask for, and where it came from.
func (m *memoryFlags) budget() (int64, string, error) {
	switch strings.ToLower(strings.TrimSpace(m.memory)) {
	case "":
		return hosted.DefaultMemory("")
	case "off", "0":
		return 0, "--memory " + m.memory, nil
	}
	n, err := hosted.ParseBytes(m.memory)
	if err != nil {
		return 0, "", fmt.Errorf("--memory %w", err)
	}
	if n < 64<<20 {
		return 0, "", fmt.Errorf("--memory %s: at least 64MiB", m.memory)
	}
	return n, "--memory", nil
}

// serveHosted runs the hosted service (serve --database): many users, each
// signed in with OAuth, all shared state in Postgres.
func serveHosted(ctx context.Context, stderr io.Writer, f hostedFlags) int {
	if f.addr == "" || f.publicURL == "" {
		fmt.Fprintln(stderr, "bulleted-mcp: --database needs --http ADDR and --public-url https://HOST")
		return 2
	}
	if f.ops == nil {
		f.ops = &opsFlags{perAddress: hosted.DefaultPerAddress, clientUnused: hosted.DefaultClientUnused}
	}
	if f.ops.insecurePDS && !publicLoopback(f.publicURL) {
		fmt.Fprintf(stderr, "bulleted-mcp: --allow-insecure-pds is for a server on one machine: --public-url %s is not on a loopback host (127.0.0.1, [::1], localhost); a public server talks to PDSes over https only\n", f.publicURL)
		return 2
	}
	if f.ops.clientUnused <= 0 {
		fmt.Fprintln(stderr, "bulleted-mcp: --oauth-client-unused must be positive")
		return 2
	}
	sealer, err := hosted.SealerFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 2
	}
	if f.mem == nil {
		f.mem = &memoryFlags{idle: hosted.DefaultIdle}
	}
	memory, from, err := f.mem.budget()
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 2
	}
	if f.mem.idle < 0 {
		fmt.Fprintln(stderr, "bulleted-mcp: --idle must not be negative")
		return 2
	}
	db, err := hosted.OpenDB(ctx, f.database)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: database: %v\n", err)
		return 1
	}
	defer db.Close()
	s, err := hosted.New(ctx, hosted.Config{PublicURL: f.publicURL, DB: db, Sealer: sealer, DataDir: f.dir,
		Directory: pds.Directory(f.plc), Server: f.opts, AllowOrigins: f.origins, TrustedProxies: f.proxies, Limits: f.limits, Confirm: f.confirm,
		Memory: memory, Idle: f.mem.idle, AllowLoopback: f.ops.insecurePDS, MetricsToken: f.ops.metricsToken, PerAddress: perAddress(f.ops.perAddress), ClientUnused: f.ops.clientUnused, Logf: func(format string, args ...any) { fmt.Fprintf(stderr, "bulleted-mcp: "+format+"\n", args...) }})
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "bulleted-mcp: hosted on %s (listening on %s), resource %s\n", f.publicURL, ln.Addr(), s.Resource())
	fmt.Fprintf(stderr, "bulleted-mcp: rate limits per client address: %s, at most %s under way at once (%s)\n", f.limits, capText(f.ops.perAddress), clientAddrSource(f.proxies))
	fmt.Fprintln(stderr, "bulleted-mcp: MCP sessions, plans and pending confirmations are kept in the database: any instance serves any request (a balancer needs no affinity); a user's writes queue on the user across instances")
	fmt.Fprintf(stderr, "bulleted-mcp: /view: each signed-in user's own outline: sign in at %s/view in a browser, or POST /view/session with an access token (docs/hosted.md)\n", strings.TrimRight(f.publicURL, "/"))
	if f.ops.metricsToken != "" {
		fmt.Fprintf(stderr, "bulleted-mcp: metrics on %s/metrics (Prometheus text format) for the bearer token of --metrics-token\n", strings.TrimRight(f.publicURL, "/"))
	} else {
		fmt.Fprintln(stderr, "bulleted-mcp: metrics not served (no --metrics-token)")
	}
	if f.ops.insecurePDS {
		fmt.Fprintln(stderr, "bulleted-mcp: --allow-insecure-pds: PDSes on plain http at loopback addresses are accepted (tests and local development only)")
	}
	fmt.Fprintf(stderr, "bulleted-mcp: memory budget %s (from %s): %s\n", budgetText(memory), from, s.MemoryBudget())
	// the process as a whole is held to the budget: the Go runtime's soft
	// limit from it, unless the operator's GOMEMLIMIT says otherwise
	_, say := hosted.GoMemoryLimit(memory, os.Getenv)
	fmt.Fprintf(stderr, "bulleted-mcp: %s\n", say)
	go s.RunJanitor(ctx, 0)
	// every user held is followed (one commit stream per PDS host):
	// others' edits reach subscribed sessions without a call
	go s.RunFollowing(ctx)
	// thrashing (users dropped for the budget and reopened) is said
	go s.RunThrashWatch(ctx, 0, func(format string, args ...any) {
		fmt.Fprintf(stderr, "bulleted-mcp: "+format+"\n", args...)
	})
	// expired authorization requests, codes and tokens: pruned by every
	// instance (in batches the others skip)
	go s.RunPruner(ctx, 0, func(format string, args ...any) {
		fmt.Fprintf(stderr, "bulleted-mcp: "+format+"\n", args...)
	})
	hs := server.NewHTTPServer(s.Handler())
	if err := server.Serve(ctx, hs, ln, shutdownGrace); err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	fmt.Fprintln(stderr, "bulleted-mcp: stopped")
	return 0
}

// clientAddrSource says which address the rate limits count.
func clientAddrSource(proxies []netip.Prefix) string {
	if len(proxies) == 0 {
		return "the connection's remote address; X-Forwarded-For ignored"
	}
	return fmt.Sprintf("X-Forwarded-For from the trusted proxies %v, else the connection's remote address", proxies)
}

// perAddress is Config.PerAddress for --max-per-address n (0: no cap).
func perAddress(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

func capText(n int) string {
	if n <= 0 {
		return "no cap on the requests"
	}
	return fmt.Sprintf("%d requests", n)
}

func budgetText(n int64) string {
	if n == 0 {
		return "off"
	}
	return hosted.FormatBytes(n)
}
