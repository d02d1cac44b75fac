package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/ui"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// /view: the outline view outside a chat, for a person watching what an
// agent does on `serve --http`: the outline live from the repository
// (server-sent events), the operations with Undo.
//
// The same rules as /mcp: a loopback Host when bound to loopback; with a
// token, every request carries it. A browser presents it once, as
// /view?token=TOKEN, and is answered with an HttpOnly, SameSite=Strict
// cookie (path /view) and a redirect to /view, so that the token leaves the
// address bar and the page's script never sees it; Authorization: Bearer
// works too. A request that changes something (POST /view/undo) must come
// from the page's own origin (its Origin header), as JSON: another site's
// page cannot make the browser undo.

// ViewCookie is the cookie /view keeps the token in.
const ViewCookie = "bulleted_view"

// ViewOptions configure ViewHandler.
type ViewOptions struct {
	Token        string   // as HTTPOptions.Token
	Addr         string   // as HTTPOptions.Addr
	AllowOrigins []string // as HTTPOptions.AllowOrigins (the Host check)
	// Poll is how often a live page's repository is looked at (default
	// ViewPoll); MaxStreams bounds the live pages (default ViewStreams).
	Poll       time.Duration
	MaxStreams int
	// Done, if set, ends the live streams (the server is stopping).
	Done <-chan struct{}

	// The hosted server's view (internal/hosted) sets these instead of
	// Token. Authenticate answers a request that is not signed in (it
	// writes the response itself and returns ok false); otherwise it
	// returns the request's context (carrying its user, for EnvFor and the
	// tools) and the key its live streams are counted under (MaxStreams
	// per key). EnvFor gives the environment whose tree a live page
	// watches (when env is nil). HostOnly: a request's Host must be one of
	// AllowOrigins' whatever the address (DNS rebinding). Origin is the
	// page's own origin a change must come from ("": the request's).
	Authenticate func(w http.ResponseWriter, r *http.Request) (ctx context.Context, key string, ok bool)
	EnvFor       func(ctx context.Context) (*tools.Env, func(), error)
	HostOnly     bool
	Origin       string
}

// ViewPoll and ViewStreams are the defaults of ViewOptions.
const (
	ViewPoll    = time.Second
	ViewStreams = 8
	// viewRows bounds the rows a live page shows (read_outline's limit).
	viewRows = 2000
	// viewCall bounds one tool call a page makes.
	viewCall = 30 * time.Second
)

// ViewHandler serves /view, /view/events and /view/undo on the MCP server
// s (its tools, through an in-process client: the code path an agent's
// calls take) over env's engine (changes are looked for in its tree).
func ViewHandler(s *mcpserver.MCPServer, env *tools.Env, o ViewOptions) http.Handler {
	if o.Poll <= 0 {
		o.Poll = ViewPoll
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = ViewStreams
	}
	v := &viewServer{s: s, env: env, o: o, want: sha256.Sum256([]byte(o.Token)), streams: map[string][]chan struct{}{}}
	v.allowedHosts = map[string]bool{}
	for _, a := range o.AllowOrigins {
		if n, err := NormalizeOrigin(a); err == nil {
			u, _ := url.Parse(n)
			v.allowedHosts[strings.ToLower(u.Host)] = true
		}
	}
	v.loopback = o.Addr == "" || IsLoopback(o.Addr)
	return v
}

type viewServer struct {
	s            *mcpserver.MCPServer
	env          *tools.Env
	o            ViewOptions
	smu          sync.Mutex
	streams      map[string][]chan struct{} // the live streams' ends by key, oldest first (closed: make room)
	want         [32]byte
	allowedHosts map[string]bool
	loopback     bool

	once sync.Once
	c    *client.Client
	cerr error
}

func (v *viewServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if v.o.HostOnly && !v.allowedHosts[strings.ToLower(r.Host)] || !v.o.HostOnly && v.loopback && !loopbackHost(hostname(r.Host)) && !v.allowedHosts[strings.ToLower(r.Host)] {
		http.Error(w, "forbidden Host "+r.Host, http.StatusForbidden)
		return
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.Header().Set("Cache-Control", "no-store")
	key := ""
	if v.o.Authenticate != nil {
		ctx, k, ok := v.o.Authenticate(w, r)
		if !ok {
			return
		}
		r, key = r.WithContext(ctx), k
	} else if v.o.Token != "" {
		if tok := r.URL.Query().Get("token"); tok != "" && r.URL.Path == "/view" && r.Method == http.MethodGet {
			if !v.good(tok) {
				http.Error(w, "wrong token", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: ViewCookie, Value: tok, Path: "/view", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			http.Redirect(w, r, "/view", http.StatusSeeOther)
			return
		}
		tok, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			if c, err := r.Cookie(ViewCookie); err == nil {
				tok, ok = c.Value, true
			}
		}
		if !ok || !v.good(tok) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="bulleted-mcp"`)
			http.Error(w, "missing or wrong token: open /view?token=TOKEN once (the token of BULLETED_MCP_TOKEN)", http.StatusUnauthorized)
			return
		}
	}
	switch {
	case r.URL.Path == "/view" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", ui.Outline.CSP())
		w.Header().Set("X-Frame-Options", "DENY")
		io.WriteString(w, ui.Outline.HTML)
	case r.URL.Path == "/view/events" && r.Method == http.MethodGet:
		v.events(w, r, key)
	case r.URL.Path == "/view/undo" && r.Method == http.MethodPost:
		v.undo(w, r)
	case r.URL.Path == "/view" || r.URL.Path == "/view/events" || r.URL.Path == "/view/undo":
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	default:
		http.NotFound(w, r)
	}
}

func (v *viewServer) good(tok string) bool {
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], v.want[:]) == 1
}

// client is the in-process client the pages' calls go through, started
// on first use.
func (v *viewServer) client() (*client.Client, error) {
	v.once.Do(func() {
		c, err := client.NewInProcessClient(v.s)
		if err == nil {
			err = c.Start(context.Background())
		}
		if err == nil {
			init := mcp.InitializeRequest{}
			init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
			init.Params.ClientInfo = mcp.Implementation{Name: "bulleted-mcp /view", Version: Version}
			_, err = c.Initialize(context.Background(), init)
		}
		v.c, v.cerr = c, err
	})
	return v.c, v.cerr
}

func (v *viewServer) call(ctx context.Context, name string, args map[string]any) (*mcp.CallToolResult, error) {
	c, err := v.client()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, viewCall)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	return c.CallTool(ctx, req)
}

// undo runs undo operation=ID for the page: same origin, JSON, bounded.
func (v *viewServer) undo(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own, _ := NormalizeOrigin(scheme + "://" + r.Host)
	if v.o.Origin != "" {
		own, _ = NormalizeOrigin(v.o.Origin)
	}
	if n, err := NormalizeOrigin(origin); origin == "" || err != nil || n != own {
		http.Error(w, "forbidden: a change must come from this page (Origin "+origin+")", http.StatusForbidden)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		http.Error(w, "send JSON", http.StatusUnsupportedMediaType)
		return
	}
	var in struct {
		Operation string `json:"operation"`
	}
	if err := json.NewDecoder(BoundBody(w, r.Body, 4<<10, BodyTimeout)).Decode(&in); err != nil || in.Operation == "" {
		http.Error(w, `send {"operation":"ID"}`, http.StatusBadRequest)
		return
	}
	res, err := v.call(r.Context(), "undo", map[string]any{"operation": in.Operation})
	if err != nil {
		http.Error(w, "undo: "+err.Error(), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(res)
}

// events streams the outline and the operations as server-sent events: a
// "state" event {rev, outline, operations} now and whenever the
// repository's revision changes (looked at every Poll), a comment every
// 15 s to keep the connection open. At most MaxStreams at once: a new one
// ends the oldest (idle pages, forgotten tabs, or a client holding streams
// open never lock a viewer out), which is told so and asked to come back
// in a minute (its page's EventSource reconnects then, and ends the
// oldest in turn).
func (v *viewServer) events(w http.ResponseWriter, r *http.Request, key string) {
	end := v.admit(key)
	defer v.leave(key, end)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	send := func(event string, data any) bool {
		b, _ := json.Marshal(data)
		rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	tick := time.NewTicker(v.o.Poll)
	defer tick.Stop()
	last, quiet := "", time.Now()
	for {
		rev := ""
		t, err := v.tree(ctx)
		if err == nil {
			rev = t.Rev
		}
		switch {
		case err != nil && ctx.Err() == nil:
			if !send("notice", "could not read the repository: "+err.Error()) {
				return
			}
		case rev != last:
			state, err := v.state(ctx, rev)
			if err != nil {
				if !send("notice", err.Error()) {
					return
				}
				break
			}
			if !send("state", state) {
				return
			}
			last, quiet = rev, time.Now()
		case time.Since(quiet) > 15*time.Second:
			rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
			quiet = time.Now()
		}
		select {
		case <-ctx.Done():
			return
		case <-v.o.Done:
			return
		case <-end:
			rc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			fmt.Fprintf(w, "retry: %d\n\n", viewComeBack.Milliseconds())
			send("notice", fmt.Sprintf("this live view was closed to make room for a newer one (at most %d at once); it reconnects in %s", v.o.MaxStreams, viewComeBack))
			return
		case <-tick.C:
		}
	}
}

// viewComeBack is when a page whose stream made room reconnects.
const viewComeBack = time.Minute

// admit makes room for a stream (ending the oldest when MaxStreams are
// live) and returns the channel that ends it.
func (v *viewServer) admit(key string) chan struct{} {
	end := make(chan struct{})
	v.smu.Lock()
	defer v.smu.Unlock()
	for len(v.streams[key]) >= v.o.MaxStreams {
		close(v.streams[key][0])
		v.streams[key] = v.streams[key][1:]
	}
	v.streams[key] = append(v.streams[key], end)
	return end
}

// leave forgets a stream that ended (unless it was made to).
func (v *viewServer) leave(key string, end chan struct{}) {
	v.smu.Lock()
	defer v.smu.Unlock()
	if i := slices.Index(v.streams[key], end); i >= 0 {
		v.streams[key] = slices.Delete(v.streams[key], i, i+1)
	}
	if len(v.streams[key]) == 0 {
		delete(v.streams, key)
	}
}

// tree is the outline a live page watches: env's, or EnvFor's for the
// request's user.
func (v *viewServer) tree(ctx context.Context) (*outline.Tree, error) {
	if v.env != nil || v.o.EnvFor == nil {
		return v.env.Engine.Tree(ctx)
	}
	env, done, err := v.o.EnvFor(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	return env.Engine.Tree(ctx)
}

// state is what a live page shows: the outline (read_outline as JSON,
// depth 20, at most viewRows rows; a cut read says so) and the operations.
func (v *viewServer) state(ctx context.Context, rev string) (map[string]any, error) {
	read, err := v.call(ctx, "read_outline", map[string]any{"format": "json", "depth": 20, "limit": viewRows, "notes": true})
	if err != nil {
		return nil, fmt.Errorf("could not read the outline: %v", err)
	}
	ops, err := v.call(ctx, "operations", map[string]any{})
	if err != nil {
		return nil, fmt.Errorf("could not list the operations: %v", err)
	}
	out := map[string]any{"rev": rev, "outline": read.StructuredContent, "operations": ops.StructuredContent}
	if read.IsError && read.StructuredContent == nil {
		out["outline"] = map[string]any{"error": map[string]any{"kind": "read", "message": textOf(read)}}
	}
	return out, nil
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
