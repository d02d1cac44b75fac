package pds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
)

// Timeouts and size limits of outgoing requests (see the package
// documentation for why each has the value it has).
const (
	// DialTimeout bounds opening a TCP connection.
	DialTimeout = 10 * time.Second
	// TLSHandshakeTimeout bounds the TLS handshake.
	TLSHandshakeTimeout = 10 * time.Second
	// ResponseHeaderTimeout bounds the wait for a response's headers once
	// the request is sent.
	ResponseHeaderTimeout = 30 * time.Second
	// CallTimeout is the overall deadline of one XRPC call (headers and
	// body), and of any other request (identity resolution, session
	// refresh) that does not set its own.
	CallTimeout = 30 * time.Second
	// CARTimeout is the overall deadline of one repository download of
	// the user's own repository.
	CARTimeout = 5 * time.Minute
	// StallTimeout fails a CAR download that brings no byte for this long
	// (a PDS that stopped sending long before CARTimeout).
	StallTimeout = 30 * time.Second
	// MaxCAR bounds one CAR download of the user's own repository. A
	// 10,000-bullet repository is about 4.1 MB, so the 250,000-record
	// bound is about 100 MB: five times that.
	MaxCAR = 512 << 20
	// MaxJSON bounds a JSON response (a listRecords page of 100 records is
	// well under 1 MiB).
	MaxJSON = 16 << 20
	// MaxErrorBody is how much of an error response is read.
	MaxErrorBody = 64 << 10
	// OthersTimeout is the overall deadline of reading another identity's
	// repository (resolution and download): a mirror of a bullet on a PDS
	// that does not answer costs a read of the user's own outline this
	// long at most.
	OthersTimeout = 20 * time.Second
	// OthersMaxCAR bounds one CAR download of another identity.
	OthersMaxCAR = 64 << 20
	// OthersMaxBlocks bounds the blocks (records of any app, MST nodes) of
	// other identities' repositories kept in memory together, least
	// recently read dropped first: about 300,000 records, 120 MB.
	OthersMaxBlocks = 300_000
	// OthersRetryAfter is how long a failed read of another identity is
	// remembered: a page with ten mirrors of one unreachable PDS waits for
	// it once, not ten times.
	OthersRetryAfter = 30 * time.Second
	// IdentityCacheSize, IdentityTTL and IdentityErrTTL configure the
	// identity directory's cache.
	IdentityCacheSize = 10_000
	IdentityTTL       = time.Hour
	IdentityErrTTL    = time.Minute
)

// ErrTooLarge means a response was larger than its bound; reading stopped
// there.
var ErrTooLarge = errors.New("response too large")

// ErrTimeout means a request did not complete within its deadline, or a
// download stalled; errors.Is also matches context.DeadlineExceeded.
var ErrTimeout = fmt.Errorf("timeout: %w", context.DeadlineExceeded)

// timeoutError keeps the message of the failure while matching ErrTimeout
// and context.DeadlineExceeded.
type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }
func (e *timeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}
func (e *timeoutError) Timeout() bool { return true }

// HTTPConfig configures NewHTTPClient; zero fields take the defaults above.
type HTTPConfig struct {
	DialTimeout           time.Duration
	TLSHandshakeTimeout   time.Duration
	ResponseHeaderTimeout time.Duration
	// RequestTimeout is the overall deadline of requests that do not come
	// through this package's XRPC calls (which set their own): identity
	// resolution, session refresh. Default CallTimeout.
	RequestTimeout time.Duration
	// MaxBody bounds those requests' response bodies. Default MaxJSON.
	MaxBody int64
}

// NewHTTPClient is the HTTP client of every outgoing request: the user's
// PDS, other identities' PDSes, identity resolution. Connections are
// bounded by dial, TLS and response-header timeouts; requests sent outside
// this package's XRPC calls get an overall deadline and a body bound.
func NewHTTPClient(cfg HTTPConfig) *http.Client {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DialTimeout
	}
	if cfg.TLSHandshakeTimeout <= 0 {
		cfg.TLSHandshakeTimeout = TLSHandshakeTimeout
	}
	if cfg.ResponseHeaderTimeout <= 0 {
		cfg.ResponseHeaderTimeout = ResponseHeaderTimeout
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = CallTimeout
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = MaxJSON
	}
	d := &net.Dialer{Timeout: cfg.DialTimeout, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout: cfg.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
	}
	return &http.Client{Transport: &bounded{base: t, timeout: cfg.RequestTimeout, max: cfg.MaxBody}}
}

var defaultClient = NewHTTPClient(HTTPConfig{})

// DefaultHTTPClient is NewHTTPClient(HTTPConfig{}), shared.
func DefaultHTTPClient() *http.Client { return defaultClient }

// NewAPIClient is an XRPC client of host using hc (nil: DefaultHTTPClient).
func NewAPIClient(host string, hc *http.Client) *atclient.APIClient {
	c := atclient.NewAPIClient(strings.TrimRight(host, "/"))
	c.Client = hc
	if c.Client == nil {
		c.Client = defaultClient
	}
	c.Headers.Set("User-Agent", "bulleted-mcp")
	return c
}

// selfBounded marks a request's context: send set its deadline and bounds
// its body, so the transport leaves it alone.
type selfBounded struct{}

// bounded gives requests that do not bound themselves an overall deadline
// and a body bound.
type bounded struct {
	base    http.RoundTripper
	timeout time.Duration
	max     int64
}

func (b *bounded) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Context().Value(selfBounded{}) != nil {
		return b.base.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), b.timeout)
	resp, err := b.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		if ctx.Err() == context.DeadlineExceeded && req.Context().Err() == nil {
			return nil, &timeoutError{fmt.Sprintf("%s %s: no answer within %s", req.Method, req.URL.Redacted(), b.timeout)}
		}
		return nil, err
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, r: limit(resp.Body, b.max), cancel: cancel}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	r      io.Reader
	cancel context.CancelFunc
}

func (b *boundedBody) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *boundedBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// limit reads at most max bytes of r; one more is ErrTooLarge.
func limit(r io.Reader, max int64) io.Reader { return &limitReader{r: r, left: max, max: max} }

type limitReader struct {
	r         io.Reader
	left, max int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, l.max)
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		// the byte past the bound is read only to know there is one
		return n + int(l.left), fmt.Errorf("%w: more than %d bytes", ErrTooLarge, l.max)
	}
	return n, err
}

// Limits bound a Repo's repository downloads (getRepo); zero fields take
// MaxCAR, CARTimeout and StallTimeout. XRPC calls are bounded by
// CallTimeout and MaxJSON.
type Limits struct {
	MaxCAR     int64         // bytes of one CAR
	CARTimeout time.Duration // overall deadline of one download
	Stall      time.Duration // a download bringing no byte for this long fails
}

func (l Limits) car() bounds {
	b := bounds{timeout: l.CARTimeout, stall: l.Stall, max: l.MaxCAR}
	if b.timeout <= 0 {
		b.timeout = CARTimeout
	}
	if b.stall <= 0 {
		b.stall = StallTimeout
	}
	if b.max <= 0 {
		b.max = MaxCAR
	}
	return b
}
