package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted/pgtest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outlinegen"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// BenchmarkHostedLoad drives the shipped binary's hosted mode (issue #43):
// three `serve --database` processes on one Postgres behind a round-robin
// balancer (with a health check, as a real one has), the reference PDS,
// users signed in through the real OAuth flow (our consent page, the
// PDS's sign-in and consent, our callback, the token endpoint), each
// seeded with an outline of BULLETED_LOAD_RECORDS bullets straight on the
// PDS. Half the users are 2025-11-25 clients (sessions), half stateless
// 2026-07-28 ones; each runs BULLETED_LOAD_ROUNDS rounds of search,
// read_outline, insert_after (one bullet), move_node (a seeded leaf under
// the user's Inbox) and, every sixth round, a bulk insert_after of
// BULLETED_LOAD_BULK bullets. A third of the way through one instance is
// killed (kill -9; restarted 10 s later), two thirds of the way Postgres is
// restarted (pg_ctl restart -m fast). Clients retry as a careful agent does:
// a read again; a write whose call got no answer resumes the user's
// incomplete operations, then searches for what it wrote, and sends it
// again only when it is not there; a result's advice (retryable, resume=)
// is followed. Afterwards every user's repository is read back from the
// PDS: each acknowledged write must be there exactly once. It reports
// p50/p99 per call kind, PDS requests per call (counted inside the PDS's
// process), RSS per instance, the points landed per user per hour (from
// the repositories) and what the kill and the restart did, as a markdown
// table (also written to $BULLETED_LOAD_OUT when set).
//
// Not run by go test ./... (a benchmark). Full size:
//
//	go test ./cmd/bulleted-mcp -run '^$' -bench HostedLoad -benchtime 1x -timeout 2h
//
// BULLETED_LOAD_RECORDS_MAX spreads the users' sizes evenly from
// BULLETED_LOAD_RECORDS up to it. -short: 6 users × 200 bullets × 6 rounds. BULLETED_LOAD_LOGS=DIR keeps
// the instances' logs there.
func BenchmarkHostedLoad(b *testing.B) {
	cfg := loadConfig{users: envInt("BULLETED_LOAD_USERS", 50), bullets: envInt("BULLETED_LOAD_RECORDS", 1000), maxBullets: envInt("BULLETED_LOAD_RECORDS_MAX", 0),
		rounds: envInt("BULLETED_LOAD_ROUNDS", 12), bulk: envInt("BULLETED_LOAD_BULK", 250), instances: 3,
		think: time.Duration(envInt("BULLETED_LOAD_THINK_MS", 200)) * time.Millisecond}
	if testing.Short() {
		cfg.users, cfg.bullets, cfg.rounds = 6, 200, 6
	}
	if _, err := os.Stat("/proc/self/status"); err != nil {
		b.Skip("reads RSS from /proc")
	}
	for b.Loop() {
		lt := &loadTest{b: b, cfg: cfg}
		lt.run()
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

type loadConfig struct {
	users, bullets, rounds, bulk, instances int
	maxBullets                              int // users' sizes spread from bullets to this (0: all bullets)
	think                                   time.Duration
}

type loadTest struct {
	b   *testing.B
	cfg loadConfig

	bin     string
	tmp     string
	pg      *pgtest.Server
	dbURL   string
	pds     *countedPDS
	public  string
	lb      *balancer
	insts   []*loadInstance
	sealKey string

	users []*loadUser

	mu       sync.Mutex
	lat      map[string][]time.Duration // logical call (first attempt to success) by kind
	attempts map[string]int             // attempts by kind
	calls    atomic.Int64               // logical calls done
	total    int64

	// outcomes
	failedAttempts map[string]int    // by cause
	examples       map[string]string // the first message of each error kind
	recovered      map[string]int    // how a write with no answer was settled
	finalFailures  []string
	events         []string
	killAt, pgAt   time.Time
	killWindow     map[string]int
	pgWindow       map[string]int
	pgDown         time.Duration
	sessionsRenew  atomic.Int64
}

// ---- the PDS, with its requests counted inside its process ----

// countPreload patches node's http.Server so that the PDS's own server
// counts the requests it receives (by path: the XRPC method, the OAuth
// endpoint); COUNT_PORT serves the counts as JSON. A proxy in front of the
// PDS cannot count them: DPoP proofs name the PDS's own URL.
const countPreload = `'use strict'
const http = require('node:http')
const pdsPort = Number(process.env.PDS_PORT)
const counts = {}
const emit = http.Server.prototype.emit
http.Server.prototype.emit = function (ev, req, res) {
  if (ev === 'request' && !this.__counter) {
    const a = this.address()
    if (a && a.port === pdsPort) {
      const p = (req.url || '').split('?')[0].replace(/^\/xrpc\//, '')
      counts[p] = (counts[p] || 0) + 1
    }
  }
  return emit.apply(this, arguments)
}
const srv = http.createServer((req, res) => {
  res.setHeader('content-type', 'application/json')
  res.end(JSON.stringify(counts))
})
srv.__counter = true
srv.listen(Number(process.env.COUNT_PORT), '127.0.0.1')
`

type countedPDS struct {
	URL, PLCURL string
	countURL    string
	cmd         *exec.Cmd
	done        chan struct{}
}

func freeLoopbackPort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startCountedPDS(b *testing.B, tmp string) *countedPDS {
	dir, node, err := pdstest.Setup()
	if err != nil {
		b.Fatal(err)
	}
	pre := filepath.Join(tmp, "count.cjs")
	if err := os.WriteFile(pre, []byte(countPreload), 0o644); err != nil {
		b.Fatal(err)
	}
	data := filepath.Join(tmp, "pds")
	os.MkdirAll(data, 0o755)
	pdsPort, plcPort, countPort := freeLoopbackPort(b), freeLoopbackPort(b), freeLoopbackPort(b)
	cmd := exec.Command(node, "--require", pre, filepath.Join(dir, "pds.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("PDS_PORT=%d", pdsPort), fmt.Sprintf("PLC_PORT=%d", plcPort), fmt.Sprintf("COUNT_PORT=%d", countPort),
		"PDS_DATA="+data, "PDS_RATE_LIMITS_ENABLED=false", "LOG_ENABLED=false")
	if d, err := pdstest.PermissionSets(); err == nil {
		cmd.Env = append(cmd.Env, pdstest.LexiconAuthorityEnv+"="+d)
	}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := os.Create(filepath.Join(tmp, "pds.log"))
	cmd.Stderr = stderr
	if _, err := cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- line
			}
		}
		close(ready)
	}()
	p := &countedPDS{cmd: cmd, done: make(chan struct{}), countURL: fmt.Sprintf("http://127.0.0.1:%d/", countPort)}
	select {
	case line, ok := <-ready:
		if !ok {
			b.Fatalf("the PDS exited before it was ready (%s)", filepath.Join(tmp, "pds.log"))
		}
		var urls struct{ PDS, PLC string }
		json.Unmarshal([]byte(line), &urls)
		p.URL, p.PLCURL = urls.PDS, urls.PLC
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		b.Fatal("the PDS is not ready after 120 s")
	}
	go func() { cmd.Wait(); close(p.done) }()
	b.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
		}
	})
	return p
}

// counts are the PDS's requests so far by path.
func (p *countedPDS) counts(b *testing.B) map[string]int {
	resp, err := http.Get(p.countURL)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	m := map[string]int{}
	json.NewDecoder(resp.Body).Decode(&m)
	return m
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func diffCounts(after, before map[string]int) map[string]int {
	d := map[string]int{}
	for k, v := range after {
		if v-before[k] > 0 {
			d[k] = v - before[k]
		}
	}
	return d
}

// ---- the instances and the balancer ----

type loadInstance struct {
	i      int
	addr   string
	store  string
	logf   string
	cmd    *exec.Cmd
	exited chan struct{}
	up     atomic.Bool
	// answered counts the balancer's requests to it; bad its 502s, busy
	// its 503s
	answered, bad, busy atomic.Int64
	inflight            atomic.Int64 // requests under way through the balancer
	killedRSS           string
}

func (lt *loadTest) startInstance(in *loadInstance) {
	b := lt.b
	f, err := os.OpenFile(in.logf, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(lt.bin, "serve", "--database", lt.dbURL, "--http", in.addr, "--public-url", lt.public, "--plc", lt.pds.PLCURL,
		"--store", in.store, "--allow-insecure-pds", "--metrics-token", "load-metrics", "--max-per-address", "0",
		"--rate-limit", "register=off,authorize=off,token=off")
	cmd.Env = append(os.Environ(), "BULLETED_MCP_SEAL_KEY="+lt.sealKey)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	in.cmd = cmd
	in.exited = make(chan struct{})
	go func() { cmd.Wait(); f.Close(); close(in.exited) }()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get("http://" + in.addr + "/.well-known/oauth-authorization-server")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				in.up.Store(true)
				return
			}
		}
		select {
		case <-in.exited:
			log, _ := os.ReadFile(in.logf)
			b.Fatalf("instance %d exited:\n%s", in.i, log)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("instance %d does not answer: %v", in.i, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type ctxKeyInstance struct{}

type ctxKeyHolder struct{}

// holder carries the instance the balancer chose back to its handler.
type holder struct{ in *loadInstance }

// balancer is a round-robin reverse proxy without affinity over the
// instances that answer its health check (every 250 ms; an instance whose
// connection fails is taken out at once).
type balancer struct {
	insts []*loadInstance
	n     atomic.Int64
	srv   *http.Server
}

func (lt *loadTest) startBalancer(ln net.Listener) {
	lb := &balancer{insts: lt.insts}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			var in *loadInstance
			for range len(lb.insts) {
				c := lb.insts[int(lb.n.Add(1)-1)%len(lb.insts)]
				if c.up.Load() {
					in = c
					break
				}
			}
			if in == nil {
				in = lb.insts[0]
			}
			in.answered.Add(1)
			if h, _ := pr.In.Context().Value(ctxKeyHolder{}).(*holder); h != nil {
				h.in = in
				in.inflight.Add(1)
			}
			pr.Out = pr.Out.WithContext(context.WithValue(pr.Out.Context(), ctxKeyInstance{}, in))
			pr.SetURL(&url.URL{Scheme: "http", Host: in.addr})
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 200, ResponseHeaderTimeout: 5 * time.Minute},
		ModifyResponse: func(r *http.Response) error {
			if r.StatusCode == http.StatusServiceUnavailable {
				if in, _ := r.Request.Context().Value(ctxKeyInstance{}).(*loadInstance); in != nil {
					in.busy.Add(1)
				}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if in, _ := r.Context().Value(ctxKeyInstance{}).(*loadInstance); in != nil {
				in.bad.Add(1)
				in.up.Store(false)
			}
			http.Error(w, "bad gateway: "+err.Error(), http.StatusBadGateway)
		},
		FlushInterval: -1,
	}
	counted := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := &holder{}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKeyHolder{}, h)))
		if h.in != nil {
			h.in.inflight.Add(-1)
		}
	})
	lb.srv = &http.Server{Handler: counted, ReadHeaderTimeout: 10 * time.Second}
	go lb.srv.Serve(ln)
	lt.lb = lb
	lt.b.Cleanup(func() { lb.srv.Close() })
	go func() {
		hc := &http.Client{Timeout: time.Second}
		for {
			time.Sleep(250 * time.Millisecond)
			for _, in := range lb.insts {
				resp, err := hc.Get("http://" + in.addr + "/.well-known/oauth-authorization-server")
				ok := err == nil && resp.StatusCode == 200
				if err == nil {
					resp.Body.Close()
				}
				in.up.Store(ok)
			}
		}
	}()
}

// ---- Postgres restart ----

// restartPostgres runs pg_ctl restart -m fast on the test server (its data
// directory asked of the server itself) and returns how long it took.
func (lt *loadTest) restartPostgres() (time.Duration, error) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, lt.dbURL)
	if err != nil {
		return 0, err
	}
	var data string
	err = c.QueryRow(ctx, "SHOW data_directory").Scan(&data)
	c.Close(ctx)
	if err != nil {
		return 0, err
	}
	bin, err := pgtest.BinDir()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(filepath.Join(bin, "pg_ctl"), "restart", "-D", data, "-m", "fast", "-w", "-t", "60", "-l", filepath.Join(filepath.Dir(data), "log"))
	cmd.Dir = filepath.Dir(data)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	if os.Geteuid() == 0 {
		for _, name := range []string{"postgres", "nobody"} {
			if u, err := user.Lookup(name); err == nil {
				uid, _ := strconv.Atoi(u.Uid)
				gid, _ := strconv.Atoi(u.Gid)
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
				break
			}
		}
	}
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pg_ctl restart: %v\n%s", err, out)
	}
	return time.Since(t0), nil
}

// ---- signing in through the real flow ----

const loadRedirect = "http://127.0.0.1:9/callback"
const loadVerifier = "load-verifier-0123456789012345678901234567890123456789"

var loadNoRedirect = &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// signInUser does what the person and their MCP client do: our consent
// page (allow, naming the identity), the PDS's sign-in and consent, our
// callback, then the code exchanged at our token endpoint.
func (lt *loadTest) signInUser(ctx context.Context, cid string, a *pdstest.Account) (string, error) {
	q := url.Values{"client_id": {cid}, "redirect_uri": {loadRedirect}, "response_type": {"code"}, "state": {"s1"},
		"code_challenge": {oauth.S256CodeChallenge(loadVerifier)}, "code_challenge_method": {"S256"}, "resource": {lt.public + "/mcp"}}
	ours := map[string]string{}
	do := func(req *http.Request) (*http.Response, []byte, error) {
		for k, v := range ours {
			req.AddCookie(&http.Cookie{Name: k, Value: v})
		}
		resp, err := loadNoRedirect.Do(req)
		if err != nil {
			return nil, nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		for _, c := range resp.Cookies() {
			ours[c.Name] = c.Value
		}
		return resp, body, nil
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", lt.public+"/authorize?"+q.Encode(), nil)
	resp, body, err := do(req)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("consent page: %d %s", resp.StatusCode, body)
	}
	form := url.Values{"request": {hiddenField(string(body), "request")}, "csrf": {hiddenField(string(body), "csrf")}, "action": {"allow"}, "identifier": {a.DID.String()}}
	req, _ = http.NewRequestWithContext(ctx, "POST", lt.public+"/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", lt.public)
	resp, body, err = do(req)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 303 {
		return "", fmt.Errorf("consent: %d %s", resp.StatusCode, body)
	}
	cb, err := pdstest.ConsentAt(ctx, resp.Header.Get("Location"), a)
	if err != nil {
		return "", err
	}
	req, _ = http.NewRequestWithContext(ctx, "GET", cb, nil)
	resp, body, err = do(req)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != 302 {
		return "", fmt.Errorf("our callback: %d %s", resp.StatusCode, body)
	}
	back, _ := url.Parse(resp.Header.Get("Location"))
	tresp, err := loadNoRedirect.PostForm(lt.public+"/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {cid},
		"code": {back.Query().Get("code")}, "code_verifier": {loadVerifier}, "redirect_uri": {loadRedirect}, "resource": {lt.public + "/mcp"}})
	if err != nil {
		return "", err
	}
	defer tresp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	json.NewDecoder(tresp.Body).Decode(&tok)
	if tresp.StatusCode != 200 || tok.AccessToken == "" {
		return "", fmt.Errorf("token: %d", tresp.StatusCode)
	}
	return tok.AccessToken, nil
}

// ---- the users ----

type loadUser struct {
	i       int
	acct    *pdstest.Account
	modern  bool // 2026-07-28 (stateless); else 2025-11-25 (sessions)
	token   string
	mu      sync.Mutex
	c       *client.Client
	seedN   int               // app.bulleted.node records seeded
	seed    map[string]string // rkey → seeded record's JSON (nodes)
	leaves  []string          // seeded leaves, to move
	inbox   string            // rkey of the user's Inbox
	acked   []string          // texts of acknowledged created bullets
	moved   []string          // rkeys of acknowledged moves under inbox
	unacked []string          // texts of writes never acknowledged
	seq     int
}

func (lt *loadTest) newClient(u *loadUser) (*client.Client, error) {
	tr, err := transport.NewStreamableHTTP(lt.public+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + u.token}),
		transport.WithHTTPBasicClient(&http.Client{Timeout: 5 * time.Minute}))
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	if u.modern {
		init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	}
	init.Params.ClientInfo = mcp.Implementation{Name: "load-bench", Version: "1"}
	res, err := c.Initialize(ctx, init)
	if err != nil {
		c.Close()
		return nil, err
	}
	if res.ProtocolVersion != init.Params.ProtocolVersion {
		c.Close()
		return nil, fmt.Errorf("negotiated %s, want %s", res.ProtocolVersion, init.Params.ProtocolVersion)
	}
	return c, nil
}

type toolErr struct {
	Kind      string `json:"kind"`
	Message   string `json:"message"`
	Next      string `json:"next"`
	Retryable bool   `json:"retryable"`
}

func resultError(r *mcp.CallToolResult) toolErr {
	raw, _ := json.Marshal(r.StructuredContent)
	var v struct {
		Error toolErr `json:"error"`
	}
	json.Unmarshal(raw, &v)
	if v.Error.Kind == "" {
		for _, c := range r.Content {
			if tc, ok := c.(mcp.TextContent); ok {
				v.Error.Message += tc.Text
			}
		}
	}
	return v.Error
}

// attempt is one call as sent: the result, or the error of a call that got
// no result (the HTTP request failed).
func (lt *loadTest) attempt(u *loadUser, kind, name string, args map[string]any) (*mcp.CallToolResult, error) {
	u.mu.Lock()
	c := u.c
	u.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	lt.mu.Lock()
	lt.attempts[kind]++
	lt.mu.Unlock()
	res, err := c.CallTool(ctx, req)
	if err != nil {
		lt.failed(err.Error())
		if errors.Is(err, transport.ErrSessionTerminated) {
			lt.renew(u, c)
		}
	} else if res.IsError {
		e := resultError(res)
		lt.failed("result " + e.Kind)
		lt.mu.Lock()
		// the first of each kind and advice
		key := e.Kind + " / " + e.Next[:min(40, len(e.Next))]
		if w := strings.Fields(e.Message); len(w) >= 2 {
			key += " / " + w[0] + " " + w[1]
		}
		if _, ok := lt.examples[key]; !ok {
			lt.examples[key] = fmt.Sprintf("%s (%s, next: %s)", e.Message, name, e.Next)
		}
		lt.mu.Unlock()
	}
	return res, err
}

// renew starts a new session when the server no longer knows the client's.
func (lt *loadTest) renew(u *loadUser, old *client.Client) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.c != old {
		return
	}
	for i := 0; i < 30; i++ {
		if c, err := lt.newClient(u); err == nil {
			old.Close()
			u.c = c
			lt.sessionsRenew.Add(1)
			return
		}
		time.Sleep(time.Second)
	}
}

// failed counts a failed attempt by its cause, and in the kill's and the
// restart's windows.
func (lt *loadTest) failed(cause string) {
	switch {
	case strings.Contains(cause, "502"):
		cause = "HTTP 502 (balancer: instance gone)"
	case strings.Contains(cause, "503"):
		cause = "HTTP 503 (database unavailable)"
	case strings.Contains(cause, "session terminated"):
		cause = "HTTP 404 session terminated"
	case strings.HasPrefix(cause, "result "):
	default:
		if len(cause) > 80 {
			cause = cause[:80]
		}
	}
	now := time.Now()
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.failedAttempts[cause]++
	if !lt.killAt.IsZero() && now.Sub(lt.killAt) < 30*time.Second && (lt.pgAt.IsZero() || now.Before(lt.pgAt)) {
		lt.killWindow[cause]++
	}
	if !lt.pgAt.IsZero() && now.Sub(lt.pgAt) < 60*time.Second {
		lt.pgWindow[cause]++
	}
}

func (lt *loadTest) record(kind string, d time.Duration) {
	lt.mu.Lock()
	lt.lat[kind] = append(lt.lat[kind], d)
	lt.mu.Unlock()
	lt.calls.Add(1)
}

func (lt *loadTest) recover(how string) {
	lt.mu.Lock()
	lt.recovered[how]++
	lt.mu.Unlock()
}

func (lt *loadTest) finalFail(u *loadUser, kind, why string) {
	lt.mu.Lock()
	lt.finalFailures = append(lt.finalFailures, fmt.Sprintf("user %d %s: %s", u.i, kind, why))
	lt.mu.Unlock()
	lt.calls.Add(1)
}

const maxAttempts = 40

// read calls a read-only tool until it answers (a read is safe to repeat).
func (lt *loadTest) read(u *loadUser, kind, name string, args map[string]any) *mcp.CallToolResult {
	t0 := time.Now()
	for range maxAttempts {
		res, err := lt.attempt(u, kind, name, args)
		if err == nil && !res.IsError {
			lt.record(kind, time.Since(t0))
			return res
		}
		if err == nil && !resultError(res).Retryable {
			lt.finalFail(u, kind, resultError(res).Message)
			return nil
		}
		time.Sleep(time.Second)
	}
	lt.finalFail(u, kind, "no answer after retries")
	return nil
}

var resumeRE = regexp.MustCompile(`resume=([A-Za-z0-9._:-]+)`)

// write sends a write whose created bullets carry the texts marks until it
// is settled: acknowledged (its result, or its operation finished by a
// resume) or refused. A result's advice is followed: a retryable error
// (nothing written) is sent again; a partial one is resumed with the id
// it names. A call that got no answer is not sent again blindly: the
// user's operations are looked at first (an incomplete one resumed, one
// still claimed by an instance that died waited for until its claim runs
// out), then the outline searched for the first and the last bullet; it
// is sent again only when neither is there.
func (lt *loadTest) write(u *loadUser, kind, name string, args map[string]any, marks []string, idempotent bool) *mcp.CallToolResult {
	t0 := time.Now()
	for range maxAttempts {
		res, err := lt.attempt(u, kind, name, args)
		if err == nil && !res.IsError {
			lt.record(kind, time.Since(t0))
			return res
		}
		if err == nil {
			e := resultError(res)
			switch {
			case e.Kind == "no_change" && idempotent:
				lt.record(kind, time.Since(t0))
				return res
			case e.Kind == "partial":
				// the result's advice: resume=ID finishes it
				if m := resumeRE.FindStringSubmatch(e.Next); m != nil && lt.resume(u, m[1]) {
					lt.recover("partial result: resumed as advised")
					lt.record(kind, time.Since(t0))
					return res
				}
				lt.recover("partial result: resume=ID as advised refused for 3 min")
			case e.Retryable && e.Kind != "timeout":
				// nothing is known to have been written: send it again
				time.Sleep(time.Second)
				continue
			case e.Kind != "timeout":
				lt.finalFail(u, kind, e.Kind+": "+e.Message)
				u.unacked = append(u.unacked, marks...)
				return nil
			}
		}
		// no answer (or a timeout, or a partial result not resumed): did it land?
		time.Sleep(time.Second)
		if idempotent {
			continue
		}
		switch lt.settle(u, marks) {
		case "landed":
			lt.record(kind, time.Since(t0))
			return &mcp.CallToolResult{}
		case "partial":
			lt.finalFail(u, kind, "part of it landed and its operation could not be finished")
			u.unacked = append(u.unacked, marks...)
			return nil
		}
		lt.recover("no answer: not landed, sent again")
	}
	lt.finalFail(u, kind, "no answer after retries")
	u.unacked = append(u.unacked, marks...)
	return nil
}

// settle finds out what became of a write that got no answer: "landed"
// (all of it, after resuming what was incomplete), "none" (nothing of it:
// send it again) or "partial" (part of it, and it could not be finished).
func (lt *loadTest) settle(u *loadUser, marks []string) string {
	deadline := time.Now().Add(3 * time.Minute)
	resumed := false
	for {
		running, incomplete := lt.operations(u)
		for _, id := range incomplete {
			resumed = lt.resume(u, id) || resumed
		}
		first := lt.landed(u, marks[0])
		last := first
		if len(marks) > 1 {
			last = lt.landed(u, marks[len(marks)-1])
		}
		switch {
		case first && last && len(running) == 0:
			if resumed {
				lt.recover("no answer: incomplete operation resumed")
			} else {
				lt.recover("no answer: found landed (not sent again)")
			}
			return "landed"
		case !first && !last && len(running) == 0 && len(incomplete) == 0:
			return "none"
		case time.Now().After(deadline):
			return "partial"
		}
		// an operation claimed by an instance that died (its claim runs
		// out), or one that landed in part: wait, look again
		lt.recover("no answer: waited for an operation still claimed or in part")
		time.Sleep(2 * time.Second)
	}
}

// operations lists u's operations: the ids of those running (claimed by
// some instance) and of the incomplete ones.
func (lt *loadTest) operations(u *loadUser) (running, incomplete []string) {
	for range maxAttempts {
		res, err := lt.attempt(u, "operations", "operations", map[string]any{})
		if err != nil || res.IsError {
			time.Sleep(time.Second)
			continue
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var v struct {
			Operations []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"operations"`
		}
		json.Unmarshal(raw, &v)
		for _, op := range v.Operations {
			switch op.State {
			case "incomplete":
				incomplete = append(incomplete, op.ID)
			case "done", "undone", "landed":
			default:
				lt.recover("operations seen by the recovery: state " + op.State)
				running = append(running, op.ID)
			}
		}
		return running, incomplete
	}
	return nil, nil
}

// resume finishes operation id, retrying what can be retried for up to
// three minutes (a claim of an instance that died runs out in one).
func (lt *loadTest) resume(u *loadUser, id string) bool {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		res, err := lt.attempt(u, "resume", "operations", map[string]any{"resume": id})
		if err == nil && !res.IsError {
			return true
		}
		if err == nil && resultError(res).Kind == "no_change" {
			return true // already complete
		}
		if err == nil && !resultError(res).Retryable {
			return false
		}
		time.Sleep(time.Second)
	}
	return false
}

// landed searches u's outline for a bullet whose text is exactly text.
func (lt *loadTest) landed(u *loadUser, text string) bool {
	for range maxAttempts {
		res, err := lt.attempt(u, "search (recovery)", "search", map[string]any{"text": text, "fields": "compact"})
		if err == nil && !res.IsError {
			raw, _ := json.Marshal(res.StructuredContent)
			q, _ := json.Marshal(text)
			return bytes.Contains(raw, q)
		}
		time.Sleep(time.Second)
	}
	return false
}

func (u *loadUser) mark() string {
	u.seq++
	return fmt.Sprintf("L%03dw%04dx", u.i, u.seq)
}

var searchWords = []string{"budget", "review", "plan", "draft", "call", "meeting", "report", "design", "travel", "launch"}

// work is one user's session: the Inbox, then the rounds.
func (lt *loadTest) work(u *loadUser) {
	r := mrand.New(mrand.NewPCG(uint64(u.i), 7))
	inbox := fmt.Sprintf("Inbox L%03d", u.i)
	res := lt.write(u, "insert_after", "insert_after", map[string]any{"text": inbox}, []string{inbox}, false)
	if res == nil {
		return
	}
	u.acked = append(u.acked, inbox)
	u.inbox = lt.findKey(u, inbox)
	if u.inbox == "" {
		lt.finalFail(u, "inbox", "the Inbox's key not found")
		return
	}
	think := func() {
		if lt.cfg.think > 0 {
			time.Sleep(time.Duration(r.Int64N(int64(2 * lt.cfg.think))))
		}
	}
	for round := range lt.cfg.rounds {
		think()
		lt.read(u, "search", "search", map[string]any{"text": searchWords[r.IntN(len(searchWords))], "limit": 20})
		think()
		lt.read(u, "read_outline", "read_outline", map[string]any{"depth": 2, "limit": 100})
		think()
		m := u.mark()
		if lt.write(u, "insert_after", "insert_after", map[string]any{"text": m, "parent": u.inbox}, []string{m}, false) != nil {
			u.acked = append(u.acked, m)
		}
		think()
		if len(u.leaves) > 0 {
			leaf := u.leaves[0]
			u.leaves = u.leaves[1:]
			if lt.write(u, "move_node", "move_node", map[string]any{"node": leaf, "parent": u.inbox}, nil, true) != nil {
				u.moved = append(u.moved, leaf)
			}
		}
		if round%6 == 3 {
			think()
			base := u.mark()
			var nodes []any
			var marks []string
			for k := range lt.cfg.bulk {
				t := fmt.Sprintf("%s%03d", base, k)
				marks = append(marks, t)
				nodes = append(nodes, map[string]any{"text": t})
			}
			if lt.write(u, "insert_after (bulk)", "insert_after", map[string]any{"nodes": nodes}, marks, false) != nil {
				u.acked = append(u.acked, marks...)
			}
		}
	}
}

// findKey is the record key of the bullet whose text is exactly text.
func (lt *loadTest) findKey(u *loadUser, text string) string {
	res := lt.read(u, "search", "search", map[string]any{"text": text, "fields": "full"})
	if res == nil {
		return ""
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var walk func(v any) string
	walk = func(v any) string {
		switch x := v.(type) {
		case map[string]any:
			if x["text"] == text {
				if k, ok := x["rkey"].(string); ok {
					return k
				}
				if k, ok := x["uri"].(string); ok {
					return k[strings.LastIndex(k, "/")+1:]
				}
			}
			for _, y := range x {
				if k := walk(y); k != "" {
					return k
				}
			}
		case []any:
			for _, y := range x {
				if k := walk(y); k != "" {
					return k
				}
			}
		}
		return ""
	}
	var v any
	json.Unmarshal(raw, &v)
	return walk(v)
}

// ---- the run ----

func (lt *loadTest) run() {
	b := lt.b
	cfg := lt.cfg
	lt.lat, lt.attempts = map[string][]time.Duration{}, map[string]int{}
	lt.examples = map[string]string{}
	lt.failedAttempts, lt.recovered, lt.killWindow, lt.pgWindow = map[string]int{}, map[string]int{}, map[string]int{}, map[string]int{}
	lt.tmp = b.TempDir()
	lt.bin = filepath.Join(lt.tmp, "bulleted-mcp")
	if out, err := exec.Command("go", "build", "-o", lt.bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	var err error
	lt.pg, err = pgtest.Start()
	if err != nil {
		b.Fatalf("needs PostgreSQL: %v", err)
	}
	b.Cleanup(lt.pg.Stop)
	lt.dbURL = lt.pg.NewDatabase(b)
	lt.pds = startCountedPDS(b, lt.tmp)
	key := make([]byte, 32)
	rand.Read(key)
	lt.sealKey = base64.StdEncoding.EncodeToString(key)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	lt.public = "http://" + ln.Addr().String()
	for i := range cfg.instances {
		in := &loadInstance{i: i, addr: fmt.Sprintf("127.0.0.1:%d", freeLoopbackPort(b)), store: filepath.Join(lt.tmp, fmt.Sprintf("store%d", i)),
			logf: filepath.Join(lt.tmp, fmt.Sprintf("instance%d.log", i))}
		lt.insts = append(lt.insts, in)
		lt.startInstance(in)
	}
	b.Cleanup(func() {
		for _, in := range lt.insts {
			if in.cmd != nil && in.cmd.Process != nil {
				in.cmd.Process.Signal(syscall.SIGTERM)
				select {
				case <-in.exited:
				case <-time.After(15 * time.Second):
					in.cmd.Process.Kill()
				}
			}
		}
	})
	lt.startBalancer(ln)
	if dir := os.Getenv("BULLETED_LOAD_LOGS"); dir != "" {
		// the instances' logs (stderr) copied there at the end
		b.Cleanup(func() {
			os.MkdirAll(dir, 0o755)
			for _, in := range lt.insts {
				if raw, err := os.ReadFile(in.logf); err == nil {
					os.WriteFile(filepath.Join(dir, filepath.Base(in.logf)), raw, 0o644)
				}
			}
		})
	}

	// accounts, seeded on the PDS, then signed in through the flow
	ctx := context.Background()
	t0 := time.Now()
	lt.users = make([]*loadUser, cfg.users)
	// user i's outline: cfg.bullets, or spread evenly up to cfg.maxBullets
	type outline struct {
		recs    []store.Record
		parents map[string]bool
	}
	outlines := map[int]*outline{}
	sizeOf := func(i int) int {
		if cfg.maxBullets <= cfg.bullets || cfg.users < 2 {
			return cfg.bullets
		}
		return cfg.bullets + (cfg.maxBullets-cfg.bullets)*i/(cfg.users-1)
	}
	records := 0
	for i := range cfg.users {
		n := sizeOf(i)
		if outlines[n] == nil {
			o := &outline{recs: outlinegen.Generate(n, 43), parents: map[string]bool{}}
			for _, r := range o.recs {
				if p, ok := r.Value.Map()["parent"].(string); ok {
					o.parents[p[strings.LastIndex(p, "/")+1:]] = true
				}
			}
			outlines[n] = o
		}
		records += len(outlines[n].recs)
	}
	sizes := fmt.Sprintf("%d bullets each (%d records)", cfg.bullets, len(outlines[cfg.bullets].recs))
	if len(outlines) > 1 {
		sizes = fmt.Sprintf("%d–%d bullets each (%d records in all)", cfg.bullets, sizeOf(cfg.users-1), records)
	}
	lt.parallel(4, cfg.users, func(i int) error {
		recs, parents := outlines[sizeOf(i)].recs, outlines[sizeOf(i)].parents
		a, err := lt.pdsAccount(ctx, fmt.Sprintf("load%d-%d", time.Now().UnixNano()%1e6, i))
		if err != nil {
			return err
		}
		u := &loadUser{i: i, acct: a, modern: i%2 == 1, seed: map[string]string{}}
		c, err := atclientFor(ctx, lt.pds.URL, a)
		if err != nil {
			return err
		}
		w := pds.New(c, a.DID)
		ws := outlinegen.Writes(recs, a.DID.String())
		for rest := ws; len(rest) > 0; {
			k := min(len(rest), store.MaxBatch)
			if _, err := w.Apply(ctx, "", rest[:k]); err != nil {
				return err
			}
			rest = rest[k:]
		}
		for _, wr := range ws {
			if wr.Collection != lexicon.Node {
				continue
			}
			u.seedN++
			raw, _ := json.Marshal(wr.Value)
			u.seed[wr.RKey] = string(raw)
			if !parents[wr.RKey] && len(u.leaves) < cfg.rounds {
				u.leaves = append(u.leaves, wr.RKey)
			}
		}
		lt.users[i] = u
		return nil
	})
	seeded := time.Since(t0)
	t0 = time.Now()
	cid, err := lt.register()
	if err != nil {
		b.Fatal(err)
	}
	lt.parallel(4, cfg.users, func(i int) error {
		u := lt.users[i]
		var err error
		for range 3 {
			if u.token, err = lt.signInUser(ctx, cid, u.acct); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			return fmt.Errorf("sign-in of %s: %w", u.acct.Handle, err)
		}
		u.c, err = lt.newClient(u)
		return err
	})
	signedIn := time.Since(t0)
	phase("%d users: seeded %s in %v; signed in through the OAuth flow in %v", cfg.users, sizes, seeded.Round(time.Second), signedIn.Round(time.Second))

	// the workload, with the kill and the restart in the middle
	perUser := 2 + cfg.rounds*4 + (cfg.rounds+2)/6 // the Inbox and its key, the rounds, the bulk inserts
	lt.total = int64(cfg.users * perUser)
	before := lt.pds.counts(b)
	var load1, load5 string
	start := time.Now()
	stop := make(chan struct{})
	eventsDone := make(chan struct{})
	go func() {
		defer close(eventsDone)
		lt.events = append(lt.events, lt.chaos(stop)...)
	}()
	var wg sync.WaitGroup
	for _, u := range lt.users {
		wg.Add(1)
		go func() { defer wg.Done(); lt.work(u) }()
	}
	wg.Wait()
	wall := time.Since(start)
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(raw))
		load1, load5 = f[0], f[1]
	}
	close(stop)
	<-eventsDone
	after := lt.pds.counts(b)
	pdsDelta := diffCounts(after, before)
	attempts := 0
	for _, n := range lt.attempts {
		attempts += n
	}

	// RSS per instance, then the per-kind PDS cost (one user, calls one at a time)
	rss := lt.rss()
	phase("workload done in %v", wall.Round(time.Second))
	perKind := lt.calibrate()
	phase("calibrated")
	follow := lt.externalEdit()
	phase("external edits")

	// every acknowledged write, read back from the PDS
	check := lt.readBack()
	phase("read back")

	// the table
	var sb strings.Builder
	host, _ := os.Hostname()
	cpus := 0
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		cpus = strings.Count(string(raw), "processor\t:")
	}
	model := ""
	if raw, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(l, "model name\t: "); ok {
				model = v
				break
			}
		}
	}
	fmt.Fprintf(&sb, "\n### Hosted load: %d instances, %d users (%d on 2025-11-25 sessions, %d stateless 2026-07-28), %s\n\n",
		cfg.instances, cfg.users, cfg.users-cfg.users/2, cfg.users/2, sizes)
	fmt.Fprintf(&sb, "Machine: %s, %d CPUs (%s); load average at the end %s (1 min), %s (5 min). Workload: %d rounds per user (search, read_outline, insert_after, move_node; a bulk insert_after of %d every sixth round), think time 0–%v; wall %v.\n\n",
		host, cpus, model, load1, load5, cfg.rounds, cfg.bulk, 2*cfg.think, wall.Round(time.Second))
	fmt.Fprintf(&sb, "| call kind | calls | attempts | p50 | p99 | max | PDS requests per call (alone) |\n|---|---|---|---|---|---|---|\n")
	kinds := make([]string, 0, len(lt.lat))
	for k := range lt.attempts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		l := lt.lat[k]
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		p50, p99, mx := "–", "–", "–"
		if len(l) > 0 {
			p50, p99, mx = fmtDur(l[len(l)/2]), fmtDur(l[min(len(l)-1, len(l)*99/100)]), fmtDur(l[len(l)-1])
		}
		pk := "–"
		if v, ok := perKind[k]; ok {
			pk = v
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %s | %s | %s | %s |\n", k, len(l), lt.attempts[k], p50, p99, mx, pk)
	}
	fmt.Fprintf(&sb, "\nPDS requests during the workload: %d for %d call attempts (%.2f per attempt): %s.\n", sumCounts(pdsDelta), attempts, float64(sumCounts(pdsDelta))/float64(max(attempts, 1)), topCounts(pdsDelta, 8))
	fmt.Fprintf(&sb, "\nRSS per instance at the end (VmRSS / VmHWM peak): %s.\n", rss)
	fmt.Fprintf(&sb, "\nFollow latency: %s.\n", follow)
	fmt.Fprintf(&sb, "\nPoints landed per user (read from the repositories: 3 a create, 2 an update, 1 a delete): %s; over the %v run, per user per hour: %s. The budget ledger charged %s.\n", check.points, wall.Round(time.Second), check.perHour(wall), check.ledger)
	fmt.Fprintf(&sb, "\nEvents: %s.\n", strings.Join(lt.events, "; "))
	fmt.Fprintf(&sb, "\nFailed attempts by cause (all retried): %s. In the 30 s after the kill: %s. In the 60 s after the Postgres restart: %s.\n", fmtMap(lt.failedAttempts), fmtMap(lt.killWindow), fmtMap(lt.pgWindow))
	fmt.Fprintf(&sb, "\nWrites that got no answer, settled by the client: %s. Sessions started again: %d. Requests by instance (502s, 503s): %s.\n", fmtMap(lt.recovered), lt.sessionsRenew.Load(), lt.byInstance())
	fmt.Fprintf(&sb, "\nRead back from the PDS: %s.\n", check.summary)
	if len(lt.examples) > 0 {
		fmt.Fprintf(&sb, "\nError results (the first of each kind): %s.\n", fmtExamples(lt.examples))
	}
	if len(lt.finalFailures) > 0 {
		fmt.Fprintf(&sb, "\nCalls that failed for good (%d): %s\n", len(lt.finalFailures), strings.Join(lt.finalFailures[:min(10, len(lt.finalFailures))], "; "))
	}
	// (a benchmark's log is cut to a few lines: the table goes to stderr too)
	fmt.Fprintln(os.Stderr, sb.String())
	b.Log(sb.String())
	if out := os.Getenv("BULLETED_LOAD_OUT"); out != "" {
		os.WriteFile(out, []byte(sb.String()), 0o644)
	}
	if check.bad > 0 {
		b.Errorf("%d acknowledged writes missing or duplicated", check.bad)
	}
	if len(lt.finalFailures) > 0 {
		b.Errorf("%d calls failed for good", len(lt.finalFailures))
	}
}

// phase says on stderr how far the run is (a benchmark's log is cut).
func phase(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "hosted load %s: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func fmtDur(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

func fmtExamples(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+": "+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func fmtMap(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func topCounts(m map[string]int, n int) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] })
	var parts []string
	for _, k := range ks[:min(n, len(ks))] {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func (lt *loadTest) byInstance() string {
	var parts []string
	for _, in := range lt.insts {
		parts = append(parts, fmt.Sprintf("#%d %d (%d, %d)", in.i, in.answered.Load(), in.bad.Load(), in.busy.Load()))
	}
	return strings.Join(parts, ", ")
}

// parallel runs f(0..n-1), k at a time; the first error fails the benchmark.
func (lt *loadTest) parallel(k, n int, f func(i int) error) {
	sem := make(chan struct{}, k)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		lt.b.Fatal(first)
	}
}

func (lt *loadTest) pdsAccount(ctx context.Context, name string) (*pdstest.Account, error) {
	s := &pdstest.Server{URL: lt.pds.URL, PLCURL: lt.pds.PLCURL}
	return s.CreateAccount(ctx, name)
}

func atclientFor(ctx context.Context, pdsURL string, a *pdstest.Account) (*atclient.APIClient, error) {
	s := &pdstest.Server{URL: pdsURL}
	return s.Client(ctx, a)
}

func (lt *loadTest) register() (string, error) {
	reg, _ := json.Marshal(map[string]any{"client_name": "load benchmark", "redirect_uris": []string{loadRedirect}, "token_endpoint_auth_method": "none"})
	resp, err := http.Post(lt.public+"/register", "application/json", bytes.NewReader(reg))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var c struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(resp.Body).Decode(&c)
	if c.ClientID == "" {
		return "", fmt.Errorf("register: %d", resp.StatusCode)
	}
	return c.ClientID, nil
}

// chaos kills an instance a third of the way through the calls (and
// starts it again 10 s later), and restarts Postgres two thirds of the way.
func (lt *loadTest) chaos(stop chan struct{}) []string {
	var out []string
	wait := func(frac float64) bool {
		for lt.calls.Load() < int64(float64(lt.total)*frac) {
			select {
			case <-stop:
				return false
			case <-time.After(50 * time.Millisecond):
			}
		}
		return true
	}
	if !wait(1.0 / 3) {
		return append(out, "the workload ended before the kill")
	}
	victim := lt.insts[1]
	// (when requests are under way on it: they are what the kill tests)
	for t0 := time.Now(); victim.inflight.Load() < 2 && time.Since(t0) < 30*time.Second; {
		time.Sleep(5 * time.Millisecond)
	}
	inflight := victim.inflight.Load()
	victim.killedRSS = procRSS(victim.cmd.Process.Pid)
	lt.mu.Lock()
	lt.killAt = time.Now()
	lt.mu.Unlock()
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.exited
	phase("instance #1 killed")
	victim.up.Store(false)
	out = append(out, fmt.Sprintf("kill -9 of instance #1 after %d of %d calls, with %d requests under way on it (its RSS then %s); started again 10 s later", lt.calls.Load(), lt.total, inflight, victim.killedRSS))
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(10 * time.Second)
		lt.startInstance(victim)
		phase("instance #1 started again")
	}()
	defer func() { <-restarted }()
	if !wait(2.0 / 3) {
		return append(out, "the workload ended before the Postgres restart")
	}
	lt.mu.Lock()
	lt.pgAt = time.Now()
	lt.mu.Unlock()
	n := lt.calls.Load()
	d, err := lt.restartPostgres()
	if err != nil {
		return append(out, "Postgres restart failed: "+err.Error())
	}
	lt.pgDown = d
	phase("Postgres restarted in %v", d)
	return append(out, fmt.Sprintf("pg_ctl restart -m fast after %d of %d calls (took %v)", n, lt.total, d.Round(time.Millisecond)))
}

// procRSS is a process's VmRSS and VmHWM.
func procRSS(pid int) string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	var rss, hwm string
	for _, l := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rss = kbToMB(v)
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm = kbToMB(v)
		}
	}
	return rss + " / " + hwm
}

func kbToMB(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return "?"
	}
	kb, _ := strconv.Atoi(f[0])
	return fmt.Sprintf("%d MB", kb/1024)
}

func (lt *loadTest) rss() string {
	var parts []string
	for _, in := range lt.insts {
		s := fmt.Sprintf("#%d %s", in.i, procRSS(in.cmd.Process.Pid))
		if in.killedRSS != "" {
			s += fmt.Sprintf(" (restarted after the kill; %s when killed)", in.killedRSS)
		}
		parts = append(parts, s)
	}
	parts = append(parts, "the reference PDS "+procRSS(lt.pds.cmd.Process.Pid))
	return strings.Join(parts, ", ")
}

// calibrate measures the PDS requests of each call kind alone: one user
// (whose engine is open on every instance by now, the balancer's round
// robin), five calls of each kind one after another.
func (lt *loadTest) calibrate() map[string]string {
	u := lt.users[0]
	out := map[string]string{}
	const n = 6
	for _, k := range []struct {
		kind string
		do   func()
	}{
		{"search", func() { lt.read(u, "cal", "search", map[string]any{"text": "plan", "limit": 20}) }},
		{"read_outline", func() { lt.read(u, "cal", "read_outline", map[string]any{"depth": 2, "limit": 100}) }},
		{"insert_after", func() {
			m := u.mark()
			if lt.write(u, "cal", "insert_after", map[string]any{"text": m, "parent": u.inbox}, []string{m}, false) != nil {
				u.acked = append(u.acked, m)
			}
		}},
	} {
		before := lt.pds.counts(lt.b)
		for range n {
			k.do()
		}
		d := diffCounts(lt.pds.counts(lt.b), before)
		out[k.kind] = fmt.Sprintf("%.1f (%s)", float64(sumCounts(d))/n, topCounts(d, 3))
	}
	lt.mu.Lock()
	delete(lt.lat, "cal")
	delete(lt.attempts, "cal")
	lt.mu.Unlock()
	return out
}

// externalEdit: hosted mode follows no commit stream, so an edit made
// elsewhere (another app writing to the PDS) is seen at the next call,
// which asks the PDS for the head. It measures that for five users: the
// write, then searches until it is found.
func (lt *loadTest) externalEdit() string {
	ctx := context.Background()
	var ds []time.Duration
	for _, u := range lt.users[:min(5, len(lt.users))] {
		c, err := atclientFor(ctx, lt.pds.URL, u.acct)
		if err != nil {
			return "external edit: " + err.Error()
		}
		text := fmt.Sprintf("external L%03d", u.i)
		rk := syntax.NewTIDNow(0).String()
		w := pds.New(c, u.acct.DID)
		if _, err := w.Apply(ctx, "", outlinegen.Writes([]store.Record{{Collection: lexicon.Node, RKey: rk,
			Value: store.MustValue(map[string]any{"$type": lexicon.Node, "text": text, "sortKey": "zz", "createdAt": "2026-01-01T00:00:00.000Z"})}}, u.acct.DID.String())); err != nil {
			return "external edit: " + err.Error()
		}
		t0 := time.Now()
		for time.Since(t0) < time.Minute {
			if lt.landed(u, text) {
				ds = append(ds, time.Since(t0))
				u.acked = append(u.acked, text)
				break
			}
		}
	}
	lt.mu.Lock()
	delete(lt.attempts, "search (recovery)")
	lt.mu.Unlock()
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	if len(ds) == 0 {
		return "an edit made on the PDS directly was not seen within a minute"
	}
	return fmt.Sprintf("an edit written on the PDS directly was shown by a search through the balancer (searches ask the PDS nothing while a user's commit stream is live: the stream brought it) for %d of %d users, median %s after the write", len(ds), min(5, len(lt.users)), fmtDur(ds[len(ds)/2]))
}

type readBackResult struct {
	summary, points, ledger string
	bad                     int
	userPoints              []int
}

func (r readBackResult) perHour(wall time.Duration) string {
	if len(r.userPoints) == 0 {
		return "–"
	}
	p := append([]int(nil), r.userPoints...)
	sort.Ints(p)
	h := wall.Hours()
	return fmt.Sprintf("median %.0f, max %.0f at the run's rate (the budget lets %d land in any hour)", float64(p[len(p)/2])/h, float64(p[len(p)-1])/h, budget.Limit)
}

// readBack reads every user's app.bulleted.node records from the PDS:
// each acknowledged bullet there exactly once, each acknowledged move
// under the Inbox, the seeded bullets all there; and the points the
// workload landed, from the difference with the seed.
func (lt *loadTest) readBack() readBackResult {
	ctx := context.Background()
	var res readBackResult
	var mu sync.Mutex
	ackedTotal, movedTotal, dupes, missing, unackedLanded, unackedTotal, seedLost, moveWrong := 0, 0, 0, 0, 0, 0, 0, 0
	var examples []string
	lt.parallel(4, len(lt.users), func(i int) error {
		u := lt.users[i]
		c, err := atclientFor(ctx, lt.pds.URL, u.acct)
		if err != nil {
			return err
		}
		texts := map[string]int{}
		vals := map[string]string{}
		parent := map[string]string{}
		cursor := ""
		for {
			var out struct {
				Cursor  string `json:"cursor"`
				Records []struct {
					URI   string         `json:"uri"`
					Value map[string]any `json:"value"`
				} `json:"records"`
			}
			params := map[string]any{"repo": u.acct.DID.String(), "collection": lexicon.Node, "limit": 100}
			if cursor != "" {
				params["cursor"] = cursor
			}
			if err := c.Get(ctx, "com.atproto.repo.listRecords", params, &out); err != nil {
				return err
			}
			for _, r := range out.Records {
				rk := r.URI[strings.LastIndex(r.URI, "/")+1:]
				t, _ := r.Value["text"].(string)
				texts[t]++
				raw, _ := json.Marshal(r.Value)
				vals[rk] = string(raw)
				p, _ := r.Value["parent"].(string)
				parent[rk] = p[strings.LastIndex(p, "/")+1:]
			}
			if out.Cursor == "" || len(out.Records) == 0 {
				break
			}
			cursor = out.Cursor
		}
		mu.Lock()
		defer mu.Unlock()
		for _, t := range u.acked {
			ackedTotal++
			switch n := texts[t]; {
			case n == 0:
				missing++
				examples = append(examples, fmt.Sprintf("user %d: %q missing", u.i, t))
			case n > 1:
				dupes++
				examples = append(examples, fmt.Sprintf("user %d: %q ×%d", u.i, t, n))
			}
		}
		for _, t := range u.unacked {
			unackedTotal++
			if texts[t] > 0 {
				unackedLanded++
			}
			if texts[t] > 1 {
				dupes++
			}
		}
		for _, rk := range u.moved {
			movedTotal++
			if parent[rk] != u.inbox {
				moveWrong++
				examples = append(examples, fmt.Sprintf("user %d: moved %s not under the Inbox", u.i, rk))
			}
		}
		creates, updates, deletes := 0, 0, 0
		for rk, v := range u.seed {
			w, ok := vals[rk]
			switch {
			case !ok:
				deletes++
				seedLost++
			case w != v:
				updates++
			}
		}
		creates = len(vals) - (len(u.seed) - deletes)
		res.userPoints = append(res.userPoints, 3*creates+2*updates+deletes)
		return nil
	})
	res.bad = dupes + missing + moveWrong
	res.summary = fmt.Sprintf("%d acknowledged bullets: %d missing, %d duplicated; %d acknowledged moves: %d not where they were put; %d writes never acknowledged (%d of them landed); %d seeded bullets gone",
		ackedTotal, missing, dupes, movedTotal, moveWrong, unackedTotal, unackedLanded, seedLost)
	if len(examples) > 0 {
		res.summary += " (" + strings.Join(examples[:min(5, len(examples))], "; ") + ")"
	}
	p := append([]int(nil), res.userPoints...)
	sort.Ints(p)
	if len(p) > 0 {
		res.points = fmt.Sprintf("median %d, min %d, max %d", p[len(p)/2], p[0], p[len(p)-1])
	}
	// the ledger's figure, for comparison
	if c, err := pgx.Connect(ctx, lt.dbURL); err == nil {
		var sum, users int
		c.QueryRow(ctx, "SELECT coalesce(sum(points),0), count(DISTINCT did) FROM budget_spent").Scan(&sum, &users)
		c.Close(ctx)
		if users > 0 {
			res.ledger = fmt.Sprintf("%d points over %d users (%d a user on average)", sum, users, sum/users)
		}
	}
	return res
}
