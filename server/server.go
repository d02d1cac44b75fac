package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"weak"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

//go:embed instructions.md
var Instructions string

// Version of the server, as it reports it in serverInfo: set by
// cmd/bulleted-mcp from its build (the release version, or the module
// version go install recorded).
var Version = "(devel)"

// New returns the MCP server over engine; readOnly exposes only read-only
// tools.
func New(engine *outline.Engine, readOnly bool) *mcpserver.MCPServer {
	return NewWith(&tools.Env{Engine: engine}, readOnly)
}

// NewWith is New with a full tool environment (the PDS backend adds a reader
// of other identities' repositories).
func NewWith(env *tools.Env, readOnly bool) *mcpserver.MCPServer {
	s, _ := NewWithOptions(env, Options{ReadOnly: readOnly})
	return s
}

// Options select what the server exposes.
type Options struct {
	ReadOnly bool     // only read-only tools
	Families []string // tool families (tools.Families); empty = all
	// EnvFor, if set, gives each call its environment (the hosted server:
	// the repository, budget and journal of the user the request's bearer
	// token belongs to); env is then unused. An error is the call's result;
	// done, if not nil, is called when the call's result is complete.
	EnvFor func(ctx context.Context) (env *tools.Env, done func(), err error)
	// Subscriptions, if set, keeps the resource subscriptions (so that a
	// caller can pass it commits it sees: Subscriptions.CommitSeen); nil:
	// the server makes its own.
	Subscriptions *Subscriptions
	// Payload is which part of a tool result carries it in full (serve
	// --payload, payload.go); "" is auto.
	Payload tools.Payload
	// Logf, if set, is told once per session the payload mode its client
	// gets (the CLI: stderr).
	Logf func(format string, args ...any)
}

// ListTTL is the caching hint on tools/list, prompts/list and
// resources/templates/list results: they do not change while the server
// runs (tools/list differs between clients only by the view links, which
// follow a client's own declaration: the hint's scope is private).
const ListTTL = time.Hour

// MaxResultBytes bounds a tool result (text and structured content
// together, as sent), about 15,000 tokens. Every tool sizes its pages and
// reports to fit (tools.MaxResult; TestResultsFit checks them on big
// inputs); bound is the last resort for a result that does not.
const MaxResultBytes = tools.MaxResult

// NewWithOptions is NewWith with a choice of tool families.
func NewWithOptions(env *tools.Env, o Options) (*mcpserver.MCPServer, error) {
	list, err := tools.Select(o.Families, o.ReadOnly)
	if err != nil {
		return nil, err
	}
	if o.Payload != "" {
		if _, err := tools.ParsePayload(string(o.Payload)); err != nil {
			return nil, err
		}
	}
	pl := newPayloads(o.Payload, o.Logf)
	hooks := &mcpserver.Hooks{}
	pl.hooks(hooks)
	opts := []mcpserver.ServerOption{
		mcpserver.WithToolCapabilities(false),
		mcpserver.WithInstructions(instructionsFor(list)),
		mcpserver.WithRecovery(),
		mcpserver.WithHooks(hooks),
	}
	// the outline as resources, with the read tools (resources.go)
	var rs *resources
	if slices.ContainsFunc(list, func(t tools.Tool) bool { return t.Name == "read_outline" }) {
		rs = newResources(env, o)
		opts = append(opts, rs.options(hooks)...)
	}
	// the tasks agents are asked most, as prompts (prompts.go)
	ps := newPrompts(env, o, list)
	if ps != nil {
		opts = append(opts, ps.options()...)
	}
	// caching hints (protocol 2026-07-28): the tool, prompt and template
	// lists stay as they are for the server's life; resources/list and
	// resources/read are the outline, which others may change at any
	// moment (mcp-go's default: revalidate every time, private)
	for _, m := range []mcp.MCPMethod{mcp.MethodToolsList, mcp.MethodPromptsList, mcp.MethodResourcesTemplatesList} {
		opts = append(opts, mcpserver.WithMethodCacheHints(m, ListTTL.Milliseconds(), mcp.CacheScopePrivate))
	}
	opts = append(opts, appOptions(list, rs != nil)...) // the views (apps.go)
	s := mcpserver.NewMCPServer("bulleted-mcp", Version, opts...)
	if rs != nil {
		rs.register(s)
		// (the HTTP transport may keep their subscriptions in its store)
		key := weak.Make(s)
		resourcesOf.Store(key, rs)
		runtime.AddCleanup(s, func(k weak.Pointer[mcpserver.MCPServer]) { resourcesOf.Delete(k) }, key)
	}
	if ps != nil {
		ps.register(s)
	}
	// what each session was last told of the outline (notice.go); the
	// HTTP transport forgets a session when it ends (StreamableHTTP)
	seen := newSeenRevs()
	key := weak.Make(s)
	seenOf.Store(key, seen)
	runtime.AddCleanup(s, func(k weak.Pointer[mcpserver.MCPServer]) { seenOf.Delete(k) }, key)
	registerApps(s)
	for _, t := range list {
		t := t
		m := t.MCP() // its view's link added per client (apps.go)
		if pl.mode == tools.PayloadText {
			m.RawOutputSchema = nil // no structured content: no output schema
		}
		s.AddTool(m, func(ctx context.Context, req mcp.CallToolRequest) (res *mcp.CallToolResult, _ error) {
			mode := pl.of(ctx)
			ctx = tools.WithPayload(ctx, mode) // pages fill the bound with the part shown
			defer func() {
				// last (after the recovery below): text mode sends no
				// structured content, also on errors
				if mode == tools.PayloadText {
					res = tools.Shape(res, mode, t.Name)
				}
			}()
			defer func() {
				// a bug must still answer as a tool result, not a protocol error
				if p := recover(); p != nil {
					res = tools.ErrorResult(fmt.Errorf("internal error in %s: %v", t.Name, p))
				}
			}()
			raw := req.GetArguments()
			if raw == nil {
				raw = map[string]any{}
			}
			// strict: the call must match the tool's input schema (after the
			// documented coercions) before anything runs
			args, err := t.Check(tools.Args(raw))
			if err != nil {
				return tools.ErrorResult(err), nil
			}
			// this session's writes are its own: the change notice leaves
			// them out (the other sessions hear of them)
			sid := sessionOf(ctx)
			if sid != "" {
				ctx = outline.WithWriter(ctx, sid)
			}
			if req.Params.Meta != nil && req.Params.Meta.ProgressToken != nil {
				ctx = outline.WithProgress(ctx, progressNotifier(ctx, req.Params.Meta.ProgressToken))
			}
			ctx = withCall(ctx, &CallInfo{Name: t.Name, ReadOnly: t.Ann.ReadOnly})
			env := env
			if o.EnvFor != nil {
				var done func()
				if env, done, err = o.EnvFor(ctx); err != nil {
					return tools.ErrorResult(err), nil
				}
				if done != nil {
					defer done()
				}
			}
			if c := confirmerFor(ctx, s, req); c != nil && env.Confirm != nil {
				ctx = tools.WithConfirmer(ctx, c)
			}
			// what the repository says of this call's reads (a followed
			// stream gone quiet: how stale the answer may be) comes back
			// with its result
			ctx, calls := store.WithCallNotes(ctx)
			if !t.Ann.ReadOnly && env.WriteRefused != nil {
				// a read-only store: refused before anything is planned
				// or journalled
				res, err = nil, env.WriteRefused
			} else {
				res, err = t.Handle(ctx, env, args)
			}
			if err == nil && res != nil && res.ResultType == mcp.ResultTypeInputRequired {
				return res, nil // the client asks the person and calls again
			}
			if err != nil {
				// engine and network failures are results the model can act
				// on, never protocol errors
				res = tools.ErrorResult(err)
			}
			if mode == tools.PayloadStructured {
				res = tools.Shape(res, mode, t.Name) // the text a short rendering
			}
			rs.seen(ctx, env) // subscribed sessions hear of a commit
			if t.Name != "operations" && t.Name != "undo" {
				noteIncomplete(env, res, mode)
			}
			// the notices go at the head, never cut: the rest is bound to
			// leave them room
			return noteStore(env, res, seen.take(sid, env), mode, calls.Take()...), nil
		})
	}
	return s, nil
}

// noteIncomplete tells the agent, on every result, about operations that
// stopped part-way (also those of a server that was killed).
func noteIncomplete(env *tools.Env, res *mcp.CallToolResult, mode tools.Payload) {
	inc := env.Engine.Incomplete()
	if len(inc) == 0 || res == nil {
		return
	}
	var ids []string
	for _, op := range inc {
		ids = append(ids, op.ID+" ("+op.Summary+")")
	}
	note := fmt.Sprintf("%d incomplete operation(s): %s; call operations, then operations resume=ID or undo operation=ID.", len(inc), strings.Join(ids, "; "))
	res.Content = append(res.Content, mcp.NewTextContent("Note: "+note))
	if mode != tools.PayloadText {
		addNotices(res, []string{note}) // in both parts: never silent
	}
}

// seenOf finds the sessions' told revisions of a server (for the HTTP
// transport, which forgets a session's when it ends).
var seenOf sync.Map // weak.Pointer[mcpserver.MCPServer] → *seenRevs (dropped with the server)

// noteStore tells the agent, once (the session's first result), what the
// repository found when it was opened (a HEAD recovered from the block
// log, a budget ledger missing while the journal shows spending), and,
// on every result, what others changed since the session's previous one
// (changed; nil: nothing): at the head of the text and as "notices" (and
// "changedByOthers") in the structured content. res is bound (bound) to
// leave them room within MaxResultBytes. calls are what the repository
// said of this call's reads (store.CallNotes), told first.
func noteStore(env *tools.Env, res *mcp.CallToolResult, changed *outline.Changed, mode tools.Payload, calls ...string) *mcp.CallToolResult {
	if res == nil || env == nil {
		return bound(res, 0, mode)
	}
	notes := calls
	if env.Engine != nil {
		if n, ok := env.Engine.Repo.(store.Noticer); ok {
			notes = append(notes, n.TakeNotices()...)
		}
		notes = append(notes, env.Engine.TakeNotices()...) // the operations journal's
	}
	if env.Notices != nil {
		notes = append(notes, env.Notices.TakeNotices()...)
	}
	heads := slices.Clone(notes)
	var obj map[string]any
	if changed.Any() {
		lines, notice, o := changeNotice(changed)
		heads = append(heads, strings.Join(lines, "\n"))
		notes, obj = append(notes, notice), o
	}
	if len(notes) == 0 {
		return bound(res, 0, mode)
	}
	text := "Notice: " + strings.Join(heads, "\nNotice: ")
	room, _ := json.Marshal(map[string]any{"t": text, "n": notes, "o": obj})
	res = bound(res, len(room)+64, mode)
	placed := false
	for i, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			tc.Text = text + "\n\n" + tc.Text
			res.Content[i] = tc
			placed = true
			break
		}
	}
	if !placed {
		res.Content = append([]mcp.Content{mcp.NewTextContent(text)}, res.Content...)
	}
	if mode == tools.PayloadText {
		return res // the text says them; no structured content
	}
	addNotices(res, notes)
	if obj != nil {
		if sc, ok := res.StructuredContent.(map[string]any); ok {
			sc["changedByOthers"] = obj
		}
	}
	return res
}

// addNotices adds notes to the structured content's notices (after the
// ones already there).
func addNotices(res *mcp.CallToolResult, notes []string) {
	sc, ok := res.StructuredContent.(map[string]any)
	if !ok {
		sc = map[string]any{}
		if res.StructuredContent != nil {
			// a typed result: its JSON fields, with the notices beside them
			raw, err := json.Marshal(res.StructuredContent)
			if err == nil {
				err = json.Unmarshal(raw, &sc)
			}
			if err != nil {
				sc = map[string]any{"structured": res.StructuredContent}
			}
		}
	}
	var all []string
	switch old := sc["notices"].(type) {
	case []string:
		all = append(all, old...)
	case []any:
		for _, n := range old {
			if s, ok := n.(string); ok {
				all = append(all, s)
			}
		}
	}
	sc["notices"] = append(all, notes...)
	res.StructuredContent = sc
}

// bound is the last resort for a result over MaxResultBytes less room
// (what the notices will add; a bug: every tool fits its results): the
// structured content is kept whole, never replaced or cut, and the text is
// shortened at a line end with a marker saying so, also in the structured
// content's notices.
func bound(res *mcp.CallToolResult, room int, mode tools.Payload) *mcp.CallToolResult {
	size := func() int {
		if mode == tools.PayloadText && res != nil {
			// the structured content is not sent (tools.Shape): not counted
			c := *res
			c.StructuredContent = nil
			return tools.ResultSize(&c)
		}
		return tools.ResultSize(res)
	}
	over := size() - MaxResultBytes + room
	if res == nil || over <= 0 {
		return res
	}
	for i, c := range res.Content {
		tc, ok := c.(mcp.TextContent)
		if !ok || over <= 0 || len(tc.Text) < 1024 {
			continue
		}
		keep := max(len(tc.Text)-over-512, len(tc.Text)/8)
		if nl := strings.LastIndexByte(tc.Text[:keep], '\n'); nl > keep/2 {
			keep = nl
		}
		for keep > 0 && !utf8.RuneStart(tc.Text[keep]) {
			keep--
		}
		msg := fmt.Sprintf("the text was cut after %d bytes (%d more not shown) to fit one result; the structured content is complete", keep, len(tc.Text)-keep)
		if mode == tools.PayloadText {
			msg = fmt.Sprintf("the text was cut after %d bytes (%d more not shown) to fit one result; ask for less (a smaller limit or depth)", keep, len(tc.Text)-keep)
		}
		tc.Text = tc.Text[:keep] + "\n[" + msg + "]"
		res.Content[i] = tc
		over = size() - MaxResultBytes + room
		if mode != tools.PayloadText {
			addNotices(res, []string{msg})
		}
	}
	return res
}

// progressNotifier sends notifications/progress for a request that asked
// for them (a multi-commit plan reports before each commit).
func progressNotifier(ctx context.Context, token mcp.ProgressToken) outline.Progress {
	return func(done, total, writes, allWrites int) {
		// progress is advisory: a client that cannot be told still gets
		// the result, which says what was committed
		_ = notify(ctx, "notifications/progress", map[string]any{
			"progressToken": token,
			"progress":      done,
			"total":         total,
			"message":       fmt.Sprintf("committing batch %d of %d (%d of %d writes committed so far)", done+1, total, writes, allWrites),
		})
	}
}

// ErrNeedToken: an HTTP listener off loopback needs BULLETED_MCP_TOKEN.
var ErrNeedToken = errors.New("refusing to listen beyond loopback without a bearer token (set BULLETED_MCP_TOKEN)")

// IsLoopback reports whether addr (host:port) binds only loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// MaxRequestBody bounds an HTTP request body (a JSON-RPC message).
const MaxRequestBody = 64 << 20

// BodyTimeout bounds reading an HTTP request body; the response that
// follows (possibly a long SSE stream) is not bounded.
const BodyTimeout = 30 * time.Second

// HTTPOptions configure HTTPHandler.
type HTTPOptions struct {
	// Token, if set, must come with every request as
	// "Authorization: Bearer TOKEN" (the scheme in any case).
	Token string
	// Addr is the listen address. On loopback ("" counts as loopback) a
	// request must name a loopback Host, and one from a browser (an Origin
	// header) must come from a loopback origin: a web page cannot reach
	// the server through DNS rebinding. Off loopback only AllowOrigins
	// are accepted as origins.
	Addr string
	// AllowOrigins are further origins (scheme://host[:port]) whose
	// requests are accepted.
	AllowOrigins []string
	// SessionIdle and MaxSessions bound the MCP sessions (see
	// StreamableHTTP); 0 means SessionIdle and MaxSessions.
	SessionIdle time.Duration
	MaxSessions int
}

// HTTPHandler serves streamable HTTP on /mcp: requests from origins other
// than loopback (when bound to loopback) and o.AllowOrigins are refused
// with 403; with a token, a request without it is refused with 401. A
// request naming a deleted, expired or unknown session is answered 404, one
// without a session id (other than initialize) 400 (see StreamableHTTP).
func HTTPHandler(s *mcpserver.MCPServer, o HTTPOptions) http.Handler {
	h := StreamableHTTP(s, o.SessionIdle, o.MaxSessions)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	allowed := map[string]bool{}
	allowedHosts := map[string]bool{}
	for _, a := range o.AllowOrigins {
		if n, err := NormalizeOrigin(a); err == nil {
			allowed[n] = true
			u, _ := url.Parse(n)
			allowedHosts[strings.ToLower(u.Host)] = true
		}
	}
	loopback := o.Addr == "" || IsLoopback(o.Addr)
	want := sha256.Sum256([]byte(o.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopback && !loopbackHost(hostname(r.Host)) && !allowedHosts[strings.ToLower(r.Host)] {
			http.Error(w, "forbidden Host "+r.Host, http.StatusForbidden)
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" {
			n, err := NormalizeOrigin(origin)
			ok := err == nil && allowed[n]
			if !ok && err == nil && loopback {
				u, _ := url.Parse(n)
				ok = loopbackHost(u.Hostname())
			}
			if !ok {
				http.Error(w, "forbidden Origin "+origin+" (allow it with --allow-origin)", http.StatusForbidden)
				return
			}
		}
		if o.Token != "" {
			tok, ok := bearer(r.Header.Get("Authorization"))
			got := sha256.Sum256([]byte(tok))
			if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="bulleted-mcp"`)
				http.Error(w, "missing or wrong bearer token", http.StatusUnauthorized)
				return
			}
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = boundBody(w, r.Body)
		}
		mux.ServeHTTP(w, r)
	})
}

// bearer returns the token of an "Authorization: Bearer TOKEN" header; the
// scheme is case-insensitive (RFC 9110), the token is not.
func bearer(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(tok, " ")
	return tok, tok != ""
}

// NormalizeOrigin returns origin as scheme://host[:port] in lower case
// without a default port; it fails on anything else (a path, "null").
func NormalizeOrigin(origin string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(origin))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", fmt.Errorf("%q is not an origin (scheme://host[:port])", origin)
	}
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if p := u.Port(); (scheme == "http" && p == "80") || (scheme == "https" && p == "443") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return scheme + "://" + host, nil
}

func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// boundBody bounds a request body to MaxRequestBody bytes read within
// BodyTimeout (see BoundBody).
func boundBody(w http.ResponseWriter, body io.ReadCloser) io.ReadCloser {
	return BoundBody(w, body, MaxRequestBody, BodyTimeout)
}

// BoundBody bounds a request body to limit bytes read within d; the read
// deadline is lifted once the body is read whole (a read that fails keeps
// it, so that the connection of a body too slow is closed), so that the
// response may stream for as long as it takes. A ResponseWriter without
// deadlines (a wrapper that does not Unwrap) keeps the size limit.
func BoundBody(w http.ResponseWriter, body io.ReadCloser, limit int64, d time.Duration) io.ReadCloser {
	rc := http.NewResponseController(w)
	mb := http.MaxBytesReader(w, body, limit)
	if rc.SetReadDeadline(time.Now().Add(d)) != nil {
		return mb
	}
	return &deadlineBody{ReadCloser: mb, rc: rc}
}

type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// NewHTTPServer is the HTTP server of h: request headers within 10 s, idle
// connections closed after 2 min, and no write timeout (a response may be
// an SSE stream that lasts the session).
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 1 << 20}
}

// Serve serves hs on ln until ctx is done, then shuts down: listening
// streams (GET /mcp) end at once, requests under way get grace to finish,
// then every connection is closed. It returns nil after a shutdown.
func Serve(ctx context.Context, hs *http.Server, ln net.Listener, grace time.Duration) error {
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	inner := hs.Handler
	hs.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			stop := context.AfterFunc(streams, cancel)
			defer stop()
			r = r.WithContext(ctx)
		}
		inner.ServeHTTP(w, r)
	})
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	endStreams()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := hs.Shutdown(sctx)
	if err != nil {
		err = errors.Join(fmt.Errorf("shutdown after %s: %w", grace, err), hs.Close())
	}
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// CheckHTTP validates an HTTP listen address and token.
func CheckHTTP(addr, token string) error {
	if !IsLoopback(addr) && token == "" {
		return fmt.Errorf("%s: %w", addr, ErrNeedToken)
	}
	return nil
}

// instructionsFor is Instructions for the tools exposed: a paragraph that
// names a tool left out (--read-only, --tools) is left out, and so is one
// about writes when no write tool is exposed; a server without one says
// it reads.
func instructionsFor(list []tools.Tool) string {
	exposed, writes := map[string]bool{}, false
	for _, t := range list {
		exposed[t.Name] = true
		writes = writes || !t.Ann.ReadOnly
	}
	known := map[string]bool{}
	for _, t := range tools.All() {
		known[t.Name] = true
	}
	var b strings.Builder
	for i, para := range strings.SplitAfter(Instructions, "\n") {
		if i == 0 && !writes {
			para = strings.Replace(para, " edits a Bulleted outline", " reads a Bulleted outline (read-only: no tool here writes)", 1)
		}
		names := strings.FieldsFunc(para, func(r rune) bool { return r != '_' && (r < 'a' || r > 'z') })
		if slices.ContainsFunc(names, func(w string) bool { return known[w] && !exposed[w] }) ||
			!writes && strings.Contains(strings.ToLower(para), "write") {
			continue
		}
		b.WriteString(para)
	}
	return b.String()
}
