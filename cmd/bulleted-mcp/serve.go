package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"io"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted"
	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/internal/view"
	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

func defaultStore() string {
	if d := os.Getenv("BULLETED_MCP_STORE"); d != "" {
		return d
	}
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "bulleted-mcp", "store")
	}
	return ".bulleted-mcp"
}

func newFlags(name, usage string, stderr io.Writer) (*flag.FlagSet, *string) {
	fs, dir, _ := newFlagsRemote(name, usage, stderr)
	return fs, dir
}

func newFlagsRemote(name, usage string, stderr io.Writer) (*flag.FlagSet, *string, remoteFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("store", defaultStore(), "data directory: the embedded repository, or with --pds the session, budget ledger and undo journal (env BULLETED_MCP_STORE)")
	rf := addRemoteFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), usage+"\n\nFlags:")
		fs.PrintDefaults()
	}
	return fs, dir, rf
}

func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	return 0, true
}

// originList is a repeatable, comma-separated --allow-origin.
type originList []string

func (l *originList) String() string { return strings.Join(*l, ",") }

func (l *originList) Set(v string) error {
	for _, o := range strings.Split(v, ",") {
		n, err := server.NormalizeOrigin(o)
		if err != nil {
			return err
		}
		*l = append(*l, n)
	}
	return nil
}

// prefixList is a repeatable, comma-separated --trusted-proxy (an address
// or a CIDR prefix).
type prefixList []netip.Prefix

func (l *prefixList) String() string {
	var s []string
	for _, p := range *l {
		s = append(s, p.String())
	}
	return strings.Join(s, ",")
}

func (l *prefixList) Set(v string) error {
	for _, x := range strings.Split(v, ",") {
		x = strings.TrimSpace(x)
		p, err := netip.ParsePrefix(x)
		if err != nil {
			a, aerr := netip.ParseAddr(x)
			if aerr != nil {
				return fmt.Errorf("%q is not an IP address or CIDR prefix", x)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		*l = append(*l, p.Masked())
	}
	return nil
}

// shutdownGrace is how long requests under way get to finish after
// SIGINT or SIGTERM.
const shutdownGrace = 10 * time.Second

func runServe(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return serveOrCheck(args, stdin, stdout, stderr, false)
}

// checkServeArgs parses args with serve's flags and runs nothing: 0 when
// they parse (install writes them into a client's configuration), 2 after
// saying why not on stderr.
func checkServeArgs(args []string, stderr io.Writer) int {
	return serveOrCheck(args, nil, io.Discard, stderr, true)
}

func serveOrCheck(args []string, stdin io.Reader, stdout, stderr io.Writer, checkOnly bool) int {
	fs, dir, rf := newFlagsRemote("serve", "Usage: bulleted-mcp serve [--store DIR] [--pds URL --identifier HANDLE] [--http ADDR [--allow-origin ORIGIN]] [--read-only]\n\nRuns the MCP server on the embedded repository (default) or your PDS\n(--pds, app password in BULLETED_APP_PASSWORD): over stdio (default), or\nstreamable HTTP on ADDR at /mcp, with the outline live for a person at\n/view (its operations with Undo; the token, if set, given once as\n/view?token=TOKEN). Off loopback, HTTP requires the bearer\ntoken in BULLETED_MCP_TOKEN; with a token set, every request must carry it.\nBrowser requests (an Origin header) are accepted from loopback origins when\nbound to loopback, and from --allow-origin origins. SIGINT or SIGTERM stops\nthe server; requests under way get "+shutdownGrace.String()+" to finish.", stderr)
	httpAddr := fs.String("http", "", "serve streamable HTTP on this address (e.g. 127.0.0.1:8080) instead of stdio")
	var origins originList
	fs.Var(&origins, "allow-origin", "with --http, also accept browser requests from this origin (scheme://host[:port]; repeatable or comma-separated)")
	readOnly := fs.Bool("read-only", false, "expose only the read-only tools")
	follow := fs.Bool("follow", true, "with --pds: follow the PDS's commit stream (verified commits taken in as they come): reads cost no request while it is live, and subscribed clients hear of others' edits without a call")
	jetstream := fs.String("jetstream", os.Getenv("BULLETED_JETSTREAM"), "with --pds and --follow: listen to this Jetstream /subscribe address (filtered to your repository and app.bulleted.*) instead of the PDS's own stream; each commit it announces is then read from the PDS (env BULLETED_JETSTREAM)")
	families := fs.String("tools", "all", "tool families to expose, comma-separated: "+strings.Join(tools.Families, ", ")+" (default all)")
	publicURL := fs.String("public-url", os.Getenv("BULLETED_MCP_PUBLIC_URL"), "hosted mode (with --database): the https URL clients reach this server at (env BULLETED_MCP_PUBLIC_URL)")
	database := fs.String("database", os.Getenv("BULLETED_MCP_DATABASE"), "hosted mode: a postgres:// URL; many users sign in with OAuth, all state in Postgres (env BULLETED_MCP_DATABASE; needs --http, --public-url and "+hosted.SealKeyEnv+")")
	payload := fs.String("payload", os.Getenv("BULLETED_PAYLOAD"), "which part of a tool result carries it in full: auto (structured for clients known to show the model only the structured content: Claude Code, Codex, VS Code; both for the others), both, structured (the text a short rendering) or text (no structured content, no output schemas); default auto (env BULLETED_PAYLOAD)")
	confirmDeletes := fs.Int("confirm-deletes", tools.DefaultConfirm.Deletes, "when the client can ask the person (elicitation), a write removing more than this many bullets and mirrors asks first, whatever made the plan (undo and plan=ID too); 0: never")
	confirmMoves := fs.Int("confirm-moves", tools.DefaultConfirm.Moves, "likewise for a write moving more than this many bullets; 0: never")
	confirmBudget := fs.Bool("confirm-budget", tools.DefaultConfirm.Budget, "likewise for a write costing more than half of the write budget left now (a PDS's hourly and daily limits)")
	var proxies prefixList
	fs.Var(&proxies, "trusted-proxy", "hosted mode: a reverse proxy (IP or CIDR; repeatable or comma-separated) whose X-Forwarded-For names the client address the rate limits count (default: none, the connection's address counts)")
	mem, ops := addMemoryFlags(fs), addOpsFlags(fs)
	var limits hosted.Limits
	fs.Var(&limits, "rate-limit", "hosted mode: per-client-address limits, NAME=N/UNIT[:BURST] or NAME=off for register, authorize, token (repeatable or comma-separated; e.g. token=20/s:200)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	mode, err := tools.ParsePayload(*payload)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: --payload: %v\n", err)
		return 2
	}
	if checkOnly {
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "bulleted-mcp: serve takes no argument %q\n", fs.Arg(0))
			return 2
		}
		return 0
	}
	// the mode each session gets, said once at its start
	var logMu sync.Mutex
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		fmt.Fprintf(stderr, format+"\n", args...)
	}
	ctx, stop := signal.NotifyContext(serveContext, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *database != "" {
		return serveHosted(ctx, stderr, hostedFlags{addr: *httpAddr, publicURL: *publicURL, database: *database, dir: *dir,
			plc: *rf.plc, origins: origins, proxies: proxies, limits: limits, mem: mem, ops: ops, opts: server.Options{ReadOnly: *readOnly, Families: strings.Split(*families, ","), Payload: mode, Logf: logf},
			confirm: &tools.ConfirmRules{Deletes: max(*confirmDeletes, 0), Moves: max(*confirmMoves, 0), Budget: *confirmBudget}})
	}
	be, err := openBackend(ctx, *dir, rf)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	defer be.close()
	be.tell(stderr)
	repo := be.repo
	if r, ok := repo.(*pds.Repo); ok {
		r.Warn = func(msg string) { fmt.Fprintf(stderr, "bulleted-mcp: %s\n", msg) } // and in the next result
	}
	if _, local := repo.(*store.Local); local {
		// the embedded store was read at open: build the tree now, and
		// (while the first requests are served) give the memory the load
		// used back to the system, so that a large outline's server holds
		// what it keeps, not its peak
		be.env.Engine.Tree(ctx)
		go func() {
			// what the load left behind goes back first: the heap's goal
			// after it is twice what the load kept, and the warm-up would
			// otherwise grow into that room (249k: RSS after the first searches
			// 309 → 268 MB)
			debug.FreeOSMemory()
			// the search index too, while the client connects: the first
			// search then costs what the others do
			be.env.WarmUp(ctx, stderr)
			debug.FreeOSMemory()
		}()
	}
	be.env.Confirm = &tools.ConfirmRules{Deletes: max(*confirmDeletes, 0), Moves: max(*confirmMoves, 0), Budget: *confirmBudget}
	be.env.GiveBack = debug.FreeOSMemory // after a big edit, its peak goes back to the system
	if d, err := time.ParseDuration(os.Getenv("BULLETED_CONFIRM_TIMEOUT")); err == nil && d > 0 {
		server.ConfirmTimeout = d // how long a confirmation waits for the person (tests)
	}
	subs := server.NewSubscriptions()
	s, err := server.NewWithOptions(be.env, server.Options{ReadOnly: *readOnly, Families: strings.Split(*families, ","), Subscriptions: subs, Payload: mode, Logf: logf})
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 2
	}
	if l, ok := repo.(*store.Local); ok {
		// commits by other processes on the directory (another server, a
		// shell's call) reach subscribed clients without waiting for a call
		if err := l.Watch(ctx, func() { subs.Seen(ctx, be.env.Engine) }); err != nil {
			fmt.Fprintf(stderr, "bulleted-mcp: %v: subscribed clients hear of other processes' commits at the next call only\n", err)
		}
	}
	// the PDS backend warms up too, after its first read (the follower's
	// catch-up, or a read of its own when not following): the first search
	// then costs what the others do. As with the embedded store, what the
	// tree's build left behind goes back before the index is built (the
	// whole read's own garbage went before the tree, pds AfterWholeRead),
	// and what the index's build left after it (249k records: RSS after the
	// first searches 351 → 313 MB, the same as settled)
	var warm sync.Once
	warmPDS := func(ctx context.Context) {
		warm.Do(func() {
			go func() {
				if _, err := be.env.Engine.Tree(ctx); err == nil {
					debug.FreeOSMemory()
				}
				be.env.WarmUp(ctx, stderr) // says a failed read
				debug.FreeOSMemory()
			}()
		})
	}
	if _, ok := repo.(*pds.Repo); ok && !*follow {
		warmPDS(ctx)
	}
	if r, ok := repo.(*pds.Repo); ok && *follow {
		r.Jetstream = *jetstream
		var said atomic.Bool
		fctx, stop := context.WithCancel(ctx)
		followed := make(chan struct{})
		defer func() {
			// the follower writes the cache and the stream's position as it
			// ends, so that the next start replays instead of reading
			stop()
			select {
			case <-followed:
			case <-time.After(5 * time.Second):
			}
		}()
		go func() {
			defer close(followed)
			r.Follow(fctx, func() {
				// the tree follows the stream without a call (no request while
				// the stream is live), and subscribed clients hear of it
				_, _ = be.env.Engine.Tree(fctx)
				subs.Seen(fctx, be.env.Engine)
				warmPDS(fctx)
			}, func(err error) {
				if !errors.Is(err, pds.ErrStreamDown) {
					fmt.Fprintf(stderr, "bulleted-mcp: following: %v\n", err)
				} else {
					if !said.Swap(true) {
						fmt.Fprintf(stderr, "bulleted-mcp: %v (retrying with backoff; until then reads ask the PDS and subscribed clients hear of others' edits at the next call; said once)\n", err)
					}
					warmPDS(fctx) // by a read of its own, the stream being down
				}
			})
		}()
	}
	if *httpAddr == "" {
		if err := server.ServeStdio(ctx, s, stdin, stdout); err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
			return 1
		}
		return 0
	}
	token := os.Getenv("BULLETED_MCP_TOKEN")
	if err := server.CheckHTTP(*httpAddr, token); err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 2
	}
	ln, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "bulleted-mcp: serving %s on http://%s/mcp; the outline live at http://%s/view\n", repo.DID(), ln.Addr(), ln.Addr())
	// /view: the outline and the operations for a person, in a browser
	// (server/view.go), under the same token and Host rules as /mcp
	mux := http.NewServeMux()
	mux.Handle("/", server.HTTPHandler(s, server.HTTPOptions{Token: token, Addr: *httpAddr, AllowOrigins: origins}))
	view := server.ViewHandler(s, be.env, server.ViewOptions{Token: token, Addr: *httpAddr, AllowOrigins: origins, Done: ctx.Done()})
	mux.Handle("/view", view)
	mux.Handle("/view/", view)
	hs := server.NewHTTPServer(mux)
	if err := server.Serve(ctx, hs, ln, shutdownGrace); err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	fmt.Fprintln(stderr, "bulleted-mcp: stopped")
	return 0
}

// newEngine is the engine over repo with its undo journal kept in dir, so
// that undo works across restarts and between `call` invocations.
func newEngine(repo store.Repository, dir string) (*outline.Engine, error) {
	return outline.Open(repo, outline.Options{Operations: dir})
}

// callTool runs one tool through an in-process MCP client: the same code
// path as an agent's call.
func callTool(ctx context.Context, env *tools.Env, name, argJSON string) (*mcp.CallToolResult, error) {
	s := server.NewWith(env, false)
	c, err := client.NewInProcessClient(s)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "bulleted-mcp call", Version: server.Version}
	if _, err := c.Initialize(ctx, init); err != nil {
		return nil, err
	}
	var args map[string]any
	if strings.TrimSpace(argJSON) != "" {
		if err := json.Unmarshal([]byte(argJSON), &args); err != nil {
			return nil, fmt.Errorf("arguments are not a JSON object: %w", err)
		}
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

func printResult(w io.Writer, res *mcp.CallToolResult, asJSON bool) {
	if asJSON && res.StructuredContent != nil {
		b, _ := json.MarshalIndent(res.StructuredContent, "", "  ")
		fmt.Fprintln(w, string(b))
		return
	}
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			fmt.Fprintln(w, strings.TrimRight(tc.Text, "\n"))
		}
	}
}

func runCall(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, dir, rf := newFlagsRemote("call", "Usage: bulleted-mcp call [--store DIR] [--pds URL --identifier HANDLE] [--json] TOOL [JSON]\n\nCalls one tool with JSON arguments (\"-\" reads them from standard input)\nthrough the same MCP code path an agent uses, and prints the result.\nExit status: 0 ok, 1 the tool reported an error, 2 usage error.", stderr)
	asJSON := fs.Bool("json", false, "print the structured result as JSON instead of the text summary")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		fs.Usage()
		return 2
	}
	argJSON := ""
	if fs.NArg() == 2 {
		argJSON = fs.Arg(1)
		if argJSON == "-" {
			b, _ := io.ReadAll(stdin)
			argJSON = string(b)
		}
	}
	be, err := openBackend(context.Background(), *dir, rf)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	defer be.close()
	be.tell(stderr)
	res, err := callTool(context.Background(), be.env, fs.Arg(0), argJSON)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 2
	}
	if res.IsError {
		printResult(stderr, res, false)
		return 1
	}
	printResult(stdout, res, *asJSON)
	return 0
}

// demoNodes is the guide's worked example (the mirror points at another
// identity's subtree).
const demoNodes = `{"nodes":[{"text":"Groceries","children":[
 {"text":"Eggs","layout":"todo","note":"Jumbo, if they have them"},
 {"text":"Bread","layout":"todo","completed":true}]}]}`

func runDemo(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keep := fs.String("store", "", "seed this data directory instead of a throwaway one")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: bulleted-mcp demo [--store DIR]\n\nSeeds a throwaway embedded repository with the guide's worked example\n(Groceries: Eggs with a note, Bread ticked, a mirror of another identity's\nrecipes) and prints read_outline. Works offline.\n\nFlags:")
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "bulleted-demo-")
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer os.RemoveAll(d)
		dir = d
	}
	repo, err := store.OpenLocal(dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer repo.Close()
	printNotices(stderr, repo.Notices())
	ctx := context.Background()
	eng, err := newEngine(repo, dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	res, err := callTool(ctx, &tools.Env{Engine: eng}, "insert_after", demoNodes)
	if err != nil || res.IsError {
		fmt.Fprintln(stderr, "seeding failed:", err)
		printResult(stderr, res, false)
		return 1
	}
	sc, _ := json.Marshal(res.StructuredContent)
	var created struct {
		Created []struct{ RKey string } `json:"created"`
	}
	json.Unmarshal(sc, &created)
	if len(created.Created) > 0 {
		m := fmt.Sprintf(`{"original":"at://did:plc:other/app.bulleted.node/3krecipes","parent":%q}`, created.Created[0].RKey)
		if r, err := callTool(ctx, &tools.Env{Engine: eng}, "add_mirror", m); err != nil || r.IsError {
			fmt.Fprintln(stderr, "mirror failed")
			return 1
		}
	}
	fmt.Fprintf(stdout, "Demo repository %s (store %s):\n\n", repo.DID(), dir)
	res, err = callTool(ctx, &tools.Env{Engine: eng}, "read_outline", "")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	printResult(stdout, res, false)
	fmt.Fprintln(stdout, "\nTry: bulleted-mcp call --store DIR insert_after '{\"text\":\"Milk\",\"layout\":\"todo\",\"parent\":\"<Groceries key>\"}'")
	return 0
}

func runExport(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, dir := newFlags("export", "Usage: bulleted-mcp export [--store DIR] [--format car|json|markdown|opml] [--node KEY] [FILE]\n\nWrites the embedded repository (standard output without FILE): car is the\nrepository itself; json the whole outline as app.bulleted.getOutline rows in\npre-order with every record field; markdown and opml the whole outline (or\nthe subtree of --node), with no depth or row limit. A whole-outline export ends\nwith the detached bullets (parent does not resolve; list_detached) and their\nchildren, marked: json \"detached\" rows, markdown a \"Detached\" section, opml an\n<outline _detached=\"section\">; stderr says how many.", stderr)
	format := fs.String("format", "car", "car, json, markdown or opml")
	node := fs.String("node", "", "export only this bullet's subtree (record key or at:// URI; not with car)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	switch *format {
	case "car", "json", "markdown", "opml":
	default:
		fmt.Fprintf(stderr, "bulleted-mcp: --format must be car, json, markdown or opml, not %q\n", *format)
		return 2
	}
	if *format == "car" && *node != "" {
		fmt.Fprintln(stderr, "bulleted-mcp: --node applies to json, markdown and opml; a CAR file is the whole repository")
		return 2
	}
	if fs.NArg() > 1 {
		fs.Usage()
		return 2
	}
	repo, err := store.OpenLocal(*dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer repo.Close()
	printNotices(stderr, repo.Notices())
	var out bytes.Buffer
	if *format == "car" {
		err = repo.ExportCAR(&out)
	} else {
		var det exportedDetached
		det, err = exportOutline(&out, repo, *format, *node)
		if err == nil {
			det.report(stderr, *format, *node)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp: %v\n", err)
		return 1
	}
	if fs.NArg() == 1 {
		if err := os.WriteFile(fs.Arg(0), out.Bytes(), 0o644); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		return 0
	}
	if _, err := stdout.Write(out.Bytes()); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// exportedDetached counts the detached bullets an export wrote (and the
// rows with their children), or, for a subtree export, those it left out.
type exportedDetached struct {
	bullets, rows int
	left          int
}

// report says on stderr what became of the detached bullets.
func (d exportedDetached) report(stderr io.Writer, format, node string) {
	switch {
	case node != "" && d.left > 0:
		fmt.Fprintf(stderr, "bulleted-mcp: export of %s's subtree: the %d detached bullet(s) of the repository are not in it (export without --node to include them)\n", node, d.left)
	case d.bullets > 0:
		where := `in "detached" (each row's "detached" field says why)`
		switch format {
		case "markdown":
			where = `in the "Detached" section at the end (after a ` + markup.DetachedMarker + ` comment; import_outline skips it)`
		case "opml":
			where = `in the <outline _detached="section"> at the end (import_outline skips it)`
		}
		fmt.Fprintf(stderr, "bulleted-mcp: exported %d detached bullet(s) (%d row(s) with their children) %s: their parent does not resolve; they are not part of the outline\n", d.bullets, d.rows, where)
	}
}

// exportOutline writes the whole outline (or node's subtree) with no row
// or depth limit; a whole-outline export ends with the detached bullets
// and their subtrees, marked as detached.
func exportOutline(w io.Writer, repo store.Repository, format, node string) (exportedDetached, error) {
	var det exportedDetached
	t, err := outline.New(repo).Tree(context.Background())
	if err != nil {
		return det, err
	}
	var root *outline.Item
	if node != "" {
		if root, err = t.Resolve(node); err != nil {
			return det, err
		}
		det.left = t.Detached.Len()
	}
	v, err := view.Read(t, root, view.Options{Depth: math.MaxInt32, Limit: -1, Fields: true, Detached: true})
	if err != nil {
		return det, err
	}
	v.Enrich(t, nil)
	det.bullets, det.rows = v.DetachedCount()
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return det, enc.Encode(v.FlatView())
	case "markdown":
		_, err = io.WriteString(w, v.Markdown())
	case "opml":
		_, err = io.WriteString(w, v.OPML())
	}
	return det, err
}

func runImport(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs, dir := newFlags("import", "Usage: bulleted-mcp import [--store DIR] [--allow-invalid] FILE\n\nReplaces the embedded repository's app.bulleted records with those of a CAR\nfile (\"-\" = standard input): an export of this or another store, or a\nPDS's com.atproto.sync.getRepo. References to the source repository are\nrewritten to this store's DID; every record is validated, and an invalid one\nrefuses the import (listed by path) unless --allow-invalid. A damaged CAR\n(a block not matching its CID, an MST node reached twice or nested over 64\ndeep, a missing block) or one over the bounds (512 MiB, 4 MiB a block,\n250,000 app.bulleted records) is refused. The swap is one commit: refused,\nor killed part-way, the store keeps its old records.", stderr)
	allowInvalid := fs.Bool("allow-invalid", false, "import records that do not validate (they are listed)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	var r io.Reader = stdin
	if fs.Arg(0) != "-" {
		f, err := os.Open(fs.Arg(0))
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		defer f.Close()
		r = f
	}
	repo, err := store.OpenLocal(*dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer repo.Close()
	printNotices(stderr, repo.Notices())
	v := validate.Default()
	rep, err := repo.ImportCAR(context.Background(), r, store.ImportOptions{AllowInvalid: *allowInvalid,
		Validate: func(val map[string]any, coll string, self syntax.ATURI) error { return v.Data(val, coll, &self) }})
	if rep != nil {
		for _, p := range rep.Invalid {
			fmt.Fprintln(stderr, "invalid:", p)
		}
	}
	if errors.Is(err, store.ErrDamagedCAR) || errors.Is(err, store.ErrCARTooLarge) || errors.Is(err, store.ErrInvalidRecords) {
		fmt.Fprintln(stderr, "import refused, the store is unchanged:", err)
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if rep.OtherApps > 0 {
		fmt.Fprintf(stderr, "left out: %d record(s) of other apps (an import brings only app.bulleted.* records)\n", rep.OtherApps)
	}
	fmt.Fprintf(stdout, "imported %d record(s) from %s into %s (replacing %d); %d reference(s) rewritten to this store's DID\n",
		rep.Records, rep.SourceDID, repo.DID(), rep.Replaced, rep.Rewritten)
	return 0
}
