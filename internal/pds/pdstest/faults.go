package pdstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
	car "github.com/ipld/go-car"
	carutil "github.com/ipld/go-car/util"
	"github.com/multiformats/go-multihash"
)

// FaultKind is what a FaultProxy does to a request a fault matches.
type FaultKind int

const (
	// DropAfterForward forwards the request, lets the PDS answer (and
	// commit), then closes the client's connection with no response.
	DropAfterForward FaultKind = iota + 1
	// Status5xxAfterCommit forwards the request, lets the PDS answer, then
	// answers the client Fault.Status (default 500) instead.
	Status5xxAfterCommit
	// Late answers 504 at once and forwards the request to the PDS only
	// after Fault.Delay: the write lands after the client saw the error.
	Late
	// RateLimit answers 429 with the Retry-After header Fault.RetryAfter;
	// the request is not forwarded.
	RateLimit
	// TooLarge answers 413 with the reference PDS's error body; the
	// request is not forwarded.
	TooLarge
	// Hang never answers and does not forward; the handler returns when
	// the client gives up or the proxy is closed.
	Hang
	// HangAfterForward forwards the request (the PDS commits), then never
	// answers, like Hang.
	HangAfterForward
	// EndlessBody answers 200 with a CAR content type and a body that
	// never ends: a valid CAR header and then random blocks, until the
	// client gives up or the proxy is closed. Not forwarded.
	EndlessBody
	// CorruptCAR forwards the request and flips bytes of the PDS's
	// answer body: one every 4 KiB from byte 40 on, the first inside a CAR
	// header's root CID (so that even a header-only CAR is spoiled).
	CorruptCAR
)

var kindNames = map[FaultKind]string{
	DropAfterForward: "drop-after-forward", Status5xxAfterCommit: "5xx-after-commit", Late: "late",
	RateLimit: "rate-limit", TooLarge: "too-large", Hang: "hang", HangAfterForward: "hang-after-forward",
	EndlessBody: "endless-body", CorruptCAR: "corrupt-car",
}

func (k FaultKind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("FaultKind(%d)", int(k))
}

// XRPC method names the faults are usually armed on.
const (
	ApplyWrites     = "com.atproto.repo.applyWrites"
	GetRepo         = "com.atproto.sync.getRepo"
	GetLatestCommit = "com.atproto.sync.getLatestCommit"
	ListRecords     = "com.atproto.repo.listRecords"
)

// Fault says which requests to spoil and how. Requests are matched by
// XRPC method (the NSID of the path /xrpc/NSID) and counted from the
// moment the fault is armed: Nth 1 is the next matching request.
type Fault struct {
	Method string // NSID, e.g. ApplyWrites
	Kind   FaultKind
	// Nth is the matching request (counted from arming, 1-based) the
	// fault applies to; 0 means 1.
	Nth int
	// Every applies the fault to the Nth matching request and every later
	// one, until the proxy is disarmed.
	Every bool
	// Status is the answer of Status5xxAfterCommit (default 500).
	Status int
	// Delay is how long Late waits before forwarding.
	Delay time.Duration
	// RetryAfter is the Retry-After header of RateLimit (e.g. "1").
	RetryAfter string
	// NoPolicy leaves out RateLimit's RateLimit-* headers (a server that
	// names no limit, only the Retry-After).
	NoPolicy bool
}

func (f Fault) String() string {
	when := fmt.Sprintf("#%d", max(f.Nth, 1))
	if f.Every {
		when = fmt.Sprintf("every from #%d", max(f.Nth, 1))
	}
	extra := ""
	switch f.Kind {
	case Status5xxAfterCommit:
		extra = fmt.Sprintf(" %d", f.status())
	case Late:
		extra = " " + f.Delay.String()
	case RateLimit:
		extra = " Retry-After " + f.RetryAfter
	}
	return fmt.Sprintf("%s%s on %s %s", f.Kind, extra, shortName(f.Method), when)
}

func (f Fault) status() int {
	if f.Status == 0 {
		return http.StatusInternalServerError
	}
	return f.Status
}

func shortName(nsid string) string { return nsid[strings.LastIndex(nsid, ".")+1:] }

// Armed is one armed fault.
type Armed struct {
	mu    *sync.Mutex // the proxy's
	f     Fault
	seen  int // matching requests since arming (guarded by the proxy's mu)
	fired int
	off   bool
}

// Fired is how many requests the fault spoiled.
func (a *Armed) Fired() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fired
}

// Event is one request the proxy spoiled.
type Event struct {
	Method string
	Kind   FaultKind
	// PDSStatus is the PDS's answer when the request was forwarded (0: not
	// forwarded, or not answered).
	PDSStatus int
	// PDSError is the PDS's error name, or the forwarding error.
	PDSError string
}

func (e Event) String() string {
	s := fmt.Sprintf("%s: %s", shortName(e.Method), e.Kind)
	if e.PDSStatus != 0 {
		s += fmt.Sprintf(" (PDS answered %d%s)", e.PDSStatus, strings.TrimSuffix(" "+e.PDSError, " "))
	} else if e.PDSError != "" {
		s += " (" + e.PDSError + ")"
	}
	return s
}

// FaultProxy is a reverse proxy on 127.0.0.1 in front of a PDS that spoils
// the requests its armed faults match and forwards every other one.
type FaultProxy struct {
	URL string

	target string
	srv    *httptest.Server
	client *http.Client
	closed chan struct{}
	once   sync.Once

	mu         sync.Mutex
	armed      []*Armed
	requests   map[string]int // received, by method
	forwarded  map[string]int // forwarded to the PDS (late ones included), by method
	events     []Event
	latePend   int // Late requests not yet answered by the PDS
	lateDone   int // Late requests forwarded and answered
	lateLanded int // ... with a 2xx answer
	lateCh     chan struct{}
}

// ForwardTimeout bounds one forwarded request (the whole answer).
const ForwardTimeout = 2 * time.Minute

// MaxForwardBody bounds a request body the proxy reads, and an answer it
// relays.
const MaxForwardBody = 256 << 20

// NewFaultProxy starts a proxy to targetURL, closed at tb's cleanup.
func NewFaultProxy(tb testing.TB, targetURL string) *FaultProxy {
	tb.Helper()
	p := &FaultProxy{
		target: strings.TrimRight(targetURL, "/"),
		client: &http.Client{Timeout: ForwardTimeout, Transport: &http.Transport{
			DisableCompression:  true, // relay exactly what the client asked for
			MaxIdleConnsPerHost: 16, ResponseHeaderTimeout: ForwardTimeout,
		}},
		closed:    make(chan struct{}),
		requests:  map[string]int{},
		forwarded: map[string]int{},
		lateCh:    make(chan struct{}),
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	tb.Cleanup(p.Close)
	return p
}

// Arm adds a fault; faults are tried in the order they were armed and the
// first that applies to a request spoils it.
func (p *FaultProxy) Arm(f Fault) *Armed {
	a := &Armed{mu: &p.mu, f: f}
	p.mu.Lock()
	p.armed = append(p.armed, a)
	p.mu.Unlock()
	return a
}

// Disarm removes every armed fault: from now on every request is forwarded.
// Late requests already accepted are still forwarded (WaitLate waits for
// them).
func (p *FaultProxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.armed {
		a.off = true
	}
	p.armed = nil
}

// Requests is how many requests of method the proxy received.
func (p *FaultProxy) Requests(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[method]
}

// Forwarded is how many requests of method reached the PDS (late ones once
// they were sent).
func (p *FaultProxy) Forwarded(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded[method]
}

// LateDone is how many Late requests were forwarded and answered by the
// PDS; LateLanded how many of them it answered with 2xx.
func (p *FaultProxy) LateDone() (done, landed int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lateDone, p.lateLanded
}

// Events lists the spoiled requests, in order.
func (p *FaultProxy) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.events...)
}

// WaitLate waits until every Late request accepted so far has been
// forwarded to the PDS and answered (or failed), or ctx ends.
func (p *FaultProxy) WaitLate(ctx context.Context) error {
	for {
		p.mu.Lock()
		pending, ch := p.latePend, p.lateCh
		p.mu.Unlock()
		if pending == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%d late request(s) still pending: %w", pending, ctx.Err())
		}
	}
}

// Close releases hanging and endless requests, waits (bounded) for late
// ones and stops the proxy. It is safe to call more than once.
func (p *FaultProxy) Close() {
	p.once.Do(func() {
		close(p.closed)
		ctx, cancel := context.WithTimeout(context.Background(), ForwardTimeout)
		defer cancel()
		_ = p.WaitLate(ctx)
		p.srv.CloseClientConnections()
		p.srv.Close()
		p.client.CloseIdleConnections()
	})
}

// match counts r against the armed faults and returns the one that
// spoils it, if any.
func (p *FaultProxy) match(method string) *Armed {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests[method]++
	var hit *Armed
	for _, a := range p.armed {
		if a.off || a.f.Method != method {
			continue
		}
		a.seen++
		nth := max(a.f.Nth, 1)
		if hit == nil && (a.seen == nth || (a.f.Every && a.seen > nth)) {
			a.fired++
			hit = a
		}
	}
	return hit
}

func (p *FaultProxy) event(e Event) {
	p.mu.Lock()
	p.events = append(p.events, e)
	p.mu.Unlock()
}

func (p *FaultProxy) countForward(method string) {
	p.mu.Lock()
	p.forwarded[method]++
	p.mu.Unlock()
}

var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends r (with body) to the PDS.
func (p *FaultProxy) forward(ctx context.Context, r *http.Request, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.ContentLength = int64(len(body))
	return p.client.Do(req)
}

// answered forwards r whatever the client does meanwhile, reads the PDS's
// whole answer and returns its status and error name.
func (p *FaultProxy) answered(r *http.Request, method string, body []byte) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), ForwardTimeout)
	defer cancel()
	p.countForward(method)
	resp, err := p.forward(ctx, r, body)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxForwardBody))
	name := ""
	if resp.StatusCode >= 300 {
		name = errorName(raw)
	}
	return resp.StatusCode, name
}

func errorName(raw []byte) string {
	// {"error":"Name",...}: enough for an event line
	s := string(raw)
	if i := strings.Index(s, `"error":"`); i >= 0 {
		s = s[i+len(`"error":"`):]
		if j := strings.IndexByte(s, '"'); j >= 0 {
			return s[:j]
		}
	}
	return ""
}

func (p *FaultProxy) serve(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, "/xrpc/")
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxForwardBody))
	if err != nil {
		http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
		return
	}
	a := p.match(method)
	if a == nil {
		p.relay(w, r, method, body, false)
		return
	}
	f := a.f
	switch f.Kind {
	case DropAfterForward:
		status, name := p.answered(r, method, body)
		p.event(Event{Method: method, Kind: f.Kind, PDSStatus: status, PDSError: name})
		drop(w)
	case Status5xxAfterCommit:
		status, name := p.answered(r, method, body)
		p.event(Event{Method: method, Kind: f.Kind, PDSStatus: status, PDSError: name})
		code := f.status()
		if code == http.StatusInternalServerError {
			writeJSONError(w, code, "InternalServerError", "Internal Server Error")
		} else {
			// what a gateway in front of a PDS sends: not XRPC JSON
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(code)
			fmt.Fprintf(w, "%d %s\n", code, http.StatusText(code))
		}
	case Late:
		p.mu.Lock()
		p.latePend++ // before the client can see the 504 and call WaitLate
		p.mu.Unlock()
		msg := []byte("504 Gateway Timeout\n")
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Content-Length", fmt.Sprint(len(msg)))
		w.WriteHeader(http.StatusGatewayTimeout)
		w.Write(msg)
		w.(http.Flusher).Flush()
		go p.late(r.Clone(context.Background()), method, body, f)
	case RateLimit:
		w.Header().Set("Retry-After", f.RetryAfter)
		if !f.NoPolicy {
			w.Header().Set("RateLimit-Limit", "5000")
			w.Header().Set("RateLimit-Remaining", "0")
			w.Header().Set("RateLimit-Policy", "5000;w=3600")
		}
		p.event(Event{Method: method, Kind: f.Kind})
		writeJSONError(w, http.StatusTooManyRequests, "RateLimitExceeded", "Rate Limit Exceeded")
	case TooLarge:
		p.event(Event{Method: method, Kind: f.Kind})
		writeJSONError(w, http.StatusRequestEntityTooLarge, "PayloadTooLarge", "request entity too large")
	case Hang:
		p.event(Event{Method: method, Kind: f.Kind})
		p.hang(r)
	case HangAfterForward:
		status, name := p.answered(r, method, body)
		p.event(Event{Method: method, Kind: f.Kind, PDSStatus: status, PDSError: name})
		p.hang(r)
	case EndlessBody:
		p.event(Event{Method: method, Kind: f.Kind})
		p.endless(w, r)
	case CorruptCAR:
		p.relay(w, r, method, body, true)
		p.event(Event{Method: method, Kind: f.Kind})
	default:
		http.Error(w, "unknown fault kind", http.StatusInternalServerError)
	}
}

// relay forwards r and copies the PDS's answer back, flipping bytes when
// corrupt is set.
func (p *FaultProxy) relay(w http.ResponseWriter, r *http.Request, method string, body []byte, corrupt bool) {
	p.countForward(method)
	ctx, cancel := context.WithTimeout(r.Context(), ForwardTimeout)
	defer cancel()
	resp, err := p.forward(ctx, r, body)
	if err != nil {
		http.Error(w, "proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	var src io.Reader = io.LimitReader(resp.Body, MaxForwardBody)
	if corrupt {
		src = &flipper{r: src}
	}
	io.Copy(w, src)
}

// flipper inverts one byte every 4 KiB, from byte flipFrom on.
type flipper struct {
	r   io.Reader
	off int64
}

func (f *flipper) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	for i := 0; i < n; i++ {
		if o := f.off + int64(i); o >= flipFrom && (o-flipFrom)%4096 == 0 {
			b[i] ^= 0xff
		}
	}
	f.off += int64(n)
	return n, err
}

// late forwards a request the client was already told had failed.
func (p *FaultProxy) late(r *http.Request, method string, body []byte, f Fault) {
	t := time.NewTimer(f.Delay)
	select {
	case <-t.C:
	case <-p.closed: // forward at once: the PDS must still see it
		t.Stop()
	}
	status, name := p.answered(r, method, body)
	p.mu.Lock()
	p.events = append(p.events, Event{Method: method, Kind: Late, PDSStatus: status, PDSError: name})
	p.latePend--
	p.lateDone++
	if status >= 200 && status < 300 {
		p.lateLanded++
	}
	close(p.lateCh)
	p.lateCh = make(chan struct{})
	p.mu.Unlock()
}

func (p *FaultProxy) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-p.closed:
	}
}

// endless streams a valid CAR header and random raw blocks until the
// client stops reading or the proxy is closed.
func (p *FaultProxy) endless(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/vnd.ipld.car")
	w.WriteHeader(http.StatusOK)
	data := make([]byte, 16<<10)
	block := func() (cid.Cid, error) {
		rand.Read(data)
		return cid.NewPrefixV1(cid.Raw, multihash.SHA2_256).Sum(data)
	}
	root, err := block()
	if err != nil {
		return
	}
	if err := car.WriteHeader(&car.CarHeader{Roots: []cid.Cid{root}, Version: 1}, w); err != nil {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-p.closed:
			return
		default:
		}
		c, err := block()
		if err != nil {
			return
		}
		if err := carutil.LdWrite(w, c.Bytes(), data); err != nil {
			return
		}
	}
}

// drop closes the client's connection without a response (a reset, where
// the platform allows it).
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("pdstest: the proxy's connection cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

func writeJSONError(w http.ResponseWriter, code int, name, msg string) {
	body := fmt.Sprintf(`{"error":%q,"message":%q}`, name, msg)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(code)
	io.WriteString(w, body)
}

// flipFrom is the first byte CorruptCAR flips: inside the root CID of a
// CAR v1 header (about 59 bytes for one CIDv1 root).
const flipFrom = 40
