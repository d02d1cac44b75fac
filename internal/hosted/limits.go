package hosted

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// ---- request bodies: a size limit and a read deadline on every endpoint ----

// Body read deadlines (Config.BodyTimeout, Config.MCPBodyTimeout): a body
// not read within them is cut with 408 and its connection closed.
const (
	defaultBodyTimeout    = 10 * time.Second
	defaultMCPBodyTimeout = 30 * time.Second
)

func (s *Server) bodyTimeout() time.Duration { return or(s.cfg.BodyTimeout, defaultBodyTimeout) }
func (s *Server) mcpBodyTimeout() time.Duration {
	return or(s.cfg.MCPBodyTimeout, defaultMCPBodyTimeout)
}

// guardBodies bounds every request body: at most formLimit bytes (a JSON-RPC
// message on /mcp: server.MaxRequestBody) read within bodyTimeout
// (mcpBodyTimeout on /mcp). Only the read is bounded: the read deadline is
// lifted once the body is read, so that a response may stream (SSE) for as
// long as it takes. (http.Server.ReadTimeout would do the same for the
// body but also cancel a long GET /mcp stream, so it is not used.)
func (s *Server) guardBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			limit, d := int64(formLimit), s.bodyTimeout()
			if r.URL.Path == "/mcp" {
				limit, d = server.MaxRequestBody, s.mcpBodyTimeout()
			}
			r.Body = server.BoundBody(w, r.Body, limit, d)
		}
		next.ServeHTTP(w, r)
	})
}

// bodyError is the answer to a request whose body could not be read: 408
// when it was not read in time, 413 when it is too large, 400 otherwise.
func bodyError(err error, what string) *oauthError {
	var mb *http.MaxBytesError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return oerr(http.StatusRequestTimeout, "invalid_request", "the request body was not received in time")
	case errors.As(err, &mb):
		return oerr(http.StatusRequestEntityTooLarge, "invalid_request", "the request body is over %d bytes", mb.Limit)
	}
	return oerr(400, "invalid_request", "%s: %v", what, err)
}

// ---- per-client-address rate limits ----

// RateLimit is a token bucket: Burst requests at once, then Rate per
// second. Rate rate.Inf turns the limit off.
type RateLimit struct {
	Rate  rate.Limit
	Burst int
}

// Limits are the per-client-address limits of the authorization server's
// endpoints (zero fields: the defaults).
type Limits struct {
	// Register is /register (default 30 at once, then 1 a second).
	Register RateLimit
	// Authorize is /authorize, the consent page and its form (default 30
	// at once, then 1 every 2 seconds).
	Authorize RateLimit
	// Token is /token, /revoke and POST /view/session (default 60 at once, then 5 a second:
	// an MCP client's backend exchanges and refreshes the tokens of all its
	// users from a few addresses).
	Token RateLimit
	// MaxAddresses bounds the addresses tracked per endpoint (default
	// 10,000).
	MaxAddresses int
}

var defaultLimits = Limits{
	Register:     RateLimit{Rate: 1, Burst: 30},
	Authorize:    RateLimit{Rate: 0.5, Burst: 30},
	Token:        RateLimit{Rate: 5, Burst: 60},
	MaxAddresses: 10_000,
}

func (l RateLimit) or(def RateLimit) RateLimit {
	if l.Rate == 0 && l.Burst == 0 {
		return def
	}
	if l.Burst <= 0 {
		l.Burst = 1
	}
	return l
}

// addrLimiter keeps one token bucket per client address, at most max of
// them: when full, the buckets idle long enough to have refilled are
// dropped (a fresh bucket is the same), and if that is not enough, any
// others until a tenth is free (an address dropped so gets a fresh burst).
type addrLimiter struct {
	endpoint string
	limit    RateLimit
	max      int

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

func newAddrLimiter(endpoint string, l RateLimit, max int) *addrLimiter {
	return &addrLimiter{endpoint: endpoint, limit: l, max: max, buckets: map[string]*bucket{}}
}

// refill is how long an idle bucket takes to be full again.
func (a *addrLimiter) refill() time.Duration {
	if a.limit.Rate <= 0 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(float64(a.limit.Burst) / float64(a.limit.Rate) * float64(time.Second))
}

// allow takes one request of addr at now; when refused, it says how long
// to wait.
func (a *addrLimiter) allow(addr string, now time.Time) (bool, time.Duration) {
	if a.limit.Rate == rate.Inf {
		return true, 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	b, ok := a.buckets[addr]
	if !ok {
		if len(a.buckets) >= a.max {
			a.evict(now)
		}
		b = &bucket{lim: rate.NewLimiter(a.limit.Rate, a.limit.Burst)}
		a.buckets[addr] = b
	}
	b.last = now
	r := b.lim.ReserveN(now, 1)
	if !r.OK() {
		return false, time.Hour
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

func (a *addrLimiter) evict(now time.Time) {
	idle := a.refill()
	for k, b := range a.buckets {
		if now.Sub(b.last) >= idle {
			delete(a.buckets, k)
		}
	}
	for k := range a.buckets {
		if len(a.buckets) < a.max-a.max/10 {
			break
		}
		delete(a.buckets, k)
	}
}

// size is how many addresses are tracked.
func (a *addrLimiter) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.buckets)
}

type limiters struct {
	register, authorize, token *addrLimiter
}

func newLimiters(l Limits) *limiters {
	max := l.MaxAddresses
	if max <= 0 {
		max = defaultLimits.MaxAddresses
	}
	return &limiters{
		register:  newAddrLimiter("/register", l.Register.or(defaultLimits.Register), max),
		authorize: newAddrLimiter("/authorize", l.Authorize.or(defaultLimits.Authorize), max),
		token:     newAddrLimiter("/token", l.Token.or(defaultLimits.Token), max),
	}
}

// limited refuses a request over a's limit for its client address with 429
// and Retry-After (CORS preflights are not counted): JSON for the API
// endpoints, a page for the browser's.
func (s *Server) limited(a *addrLimiter, page bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodOptions {
			h(w, r)
			return
		}
		addr := s.clientAddr(r)
		ok, wait := a.allow(addr, time.Now())
		if ok {
			h(w, r)
			return
		}
		secs := int(math.Ceil(wait.Seconds()))
		if secs < 1 {
			secs = 1
		}
		w.Header().Set("Retry-After", fmt.Sprint(secs))
		msg := fmt.Sprintf("too many %s requests from your address (%s): retry after %d s", a.endpoint, addr, secs)
		if page {
			s.pageError(w, http.StatusTooManyRequests, msg)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", "*")
		w.Header().Set("Access-Control-Expose-Headers", "Retry-After")
		writeJSON(w, http.StatusTooManyRequests, &oauthError{Code: "rate_limited", Desc: msg})
	}
}

// clientAddr is the address a request is counted against: the
// connection's remote address; when that is one of Config.TrustedProxies,
// the nearest address in X-Forwarded-For that is not (the header is
// otherwise ignored: any client can write it). IPv6 addresses count by
// their /64 (one subscriber's).
func (s *Server) clientAddr(r *http.Request) string {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	ip := ap.Addr().Unmap()
	if s.trusted(ip) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0; i-- {
			h, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break // a hop that is not an address: stop at the last good one
			}
			ip = h.Unmap()
			if !s.trusted(ip) {
				break
			}
		}
	}
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

func (s *Server) trusted(ip netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// Set sets endpoints' limits from NAME=N/UNIT[:BURST] (UNIT s, m or h;
// BURST defaults to N, at least 1) or NAME=off, NAME being register,
// authorize or token, comma-separated: the form of serve's --rate-limit.
func (l *Limits) Set(v string) error {
	for _, one := range strings.Split(v, ",") {
		if err := l.setOne(one); err != nil {
			return err
		}
	}
	return nil
}

func (l *Limits) setOne(v string) error {
	name, spec, ok := strings.Cut(strings.TrimSpace(v), "=")
	var target *RateLimit
	switch name {
	case "register":
		target = &l.Register
	case "authorize":
		target = &l.Authorize
	case "token":
		target = &l.Token
	}
	if !ok || target == nil {
		return fmt.Errorf("%q: want register, authorize or token=N/UNIT[:BURST] (e.g. token=20/s:200) or =off", v)
	}
	if spec == "off" {
		*target = RateLimit{Rate: rate.Inf}
		return nil
	}
	rs, bs, hasBurst := strings.Cut(spec, ":")
	ns, unit, ok := strings.Cut(rs, "/")
	per := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	n, err := strconv.ParseFloat(ns, 64)
	if !ok || per == 0 || err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return fmt.Errorf("%q: the rate must be N/s, N/m or N/h with N > 0 (e.g. %s=20/s:200)", v, name)
	}
	burst := int(math.Ceil(n))
	if hasBurst {
		if burst, err = strconv.Atoi(bs); err != nil || burst < 1 {
			return fmt.Errorf("%q: the burst must be a whole number of requests, at least 1", v)
		}
	}
	*target = RateLimit{Rate: rate.Limit(n / per.Seconds()), Burst: burst}
	return nil
}

// String is the limits in Set's form (defaults filled in).
func (l Limits) String() string {
	var out []string
	for _, x := range []struct {
		name   string
		l, def RateLimit
	}{{"register", l.Register, defaultLimits.Register}, {"authorize", l.Authorize, defaultLimits.Authorize}, {"token", l.Token, defaultLimits.Token}} {
		r := x.l.or(x.def)
		if r.Rate == rate.Inf {
			out = append(out, x.name+"=off")
			continue
		}
		out = append(out, fmt.Sprintf("%s=%s/s:%d", x.name, strconv.FormatFloat(float64(r.Rate), 'g', 4, 64), r.Burst))
	}
	return strings.Join(out, ",")
}
