package pds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/budget"
)

// RateLimited is a 429 answer; Until is when the server lets writes in
// again, capped (capRetry).
type RateLimited struct {
	Until time.Time
	Err   *atclient.APIError
	// Note says how Until was capped ("" when the server's word was kept).
	Note string
}

func (e *RateLimited) Error() string {
	return fmt.Sprintf("rate limited by the PDS until %s: %v", e.Until.UTC().Format(time.RFC3339), e.Err)
}

func (e *RateLimited) Unwrap() error { return e.Err }

// call sends one XRPC request through atclient's Do (which keeps the
// response headers that Get and Post drop), within CallTimeout and with a
// body of at most MaxJSON bytes. A nil out with a non-nil raw returns the
// body bytes instead of decoding JSON.
func call(ctx context.Context, c *atclient.APIClient, method, nsid string, params url.Values, body any, out any, raw *[]byte) error {
	return callWith(ctx, c, bounds{timeout: CallTimeout, max: MaxJSON}, method, nsid, params, body, out, raw)
}

// callWith is call within b.
func callWith(ctx context.Context, c *atclient.APIClient, b bounds, method, nsid string, params url.Values, body any, out any, raw *[]byte) error {
	var read func(io.Reader) error
	switch {
	case raw != nil:
		read = func(r io.Reader) error {
			b, err := io.ReadAll(r)
			*raw = b
			return err
		}
	case out != nil:
		read = func(r io.Reader) error { return json.NewDecoder(r).Decode(out) }
	}
	return send(ctx, c, b, method, nsid, params, body, raw == nil, false, read)
}

// bounds of one request: its overall deadline, how long its response body
// may bring nothing (0: no stall detection) and its size.
type bounds struct {
	timeout, stall time.Duration
	max            int64
}

// errStalled cancels a request whose body stopped arriving.
var errStalled = errors.New("stalled")

// send is call with a reader of the successful response's body (nil:
// discard it), which may consume it while it arrives; identity asks for it
// uncompressed. The body read is bounded by b: past b.max bytes it fails
// with ErrTooLarge, past b.timeout (or b.stall without a byte) with
// ErrTimeout.
func send(ctx context.Context, c *atclient.APIClient, b bounds, method, nsid string, params url.Values, body any, wantJSON, identity bool, read func(io.Reader) error) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req := atclient.NewAPIRequest(method, syntax.NSID(nsid), rd)
	if params != nil {
		req.QueryParams = params
	}
	if body != nil {
		req.Headers.Set("Content-Type", "application/json")
	}
	if wantJSON {
		req.Headers.Set("Accept", "application/json")
	}
	if identity {
		// no gzip: Go's transport would otherwise ask for it
		req.Headers.Set("Accept-Encoding", "identity")
	}
	parent := ctx
	ctx, cancelTimeout := context.WithTimeout(context.WithValue(ctx, selfBounded{}, true), b.timeout)
	defer cancelTimeout()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var tick func()
	if b.stall > 0 {
		t := time.AfterFunc(b.stall, func() { cancel(errStalled) })
		defer t.Stop()
		tick = func() { t.Reset(b.stall) }
	}
	// why a failure happened: the deadline or a stall (not the caller)
	bounded := func(err error) error {
		if err == nil || parent.Err() != nil {
			return err
		}
		switch {
		case context.Cause(ctx) == errStalled:
			return &timeoutError{fmt.Sprintf("%s: no data for %s (%v)", nsid, b.stall, err)}
		case ctx.Err() != nil:
			return &timeoutError{fmt.Sprintf("%s: not done within %s (%v)", nsid, b.timeout, err)}
		}
		return err
	}
	resp, err := c.Do(ctx, req)
	if err != nil {
		return bounded(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var eb atclient.ErrorBody
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
		_ = json.Unmarshal(raw, &eb)
		apiErr := &atclient.APIError{StatusCode: resp.StatusCode, Name: eb.Name, Message: eb.Message}
		if resp.StatusCode == http.StatusTooManyRequests {
			now := time.Now()
			until, note := retryAfter(resp.Header, now)
			return &RateLimited{Until: until, Err: apiErr, Note: note}
		}
		return apiErr
	}
	var r io.Reader = limit(resp.Body, b.max)
	if tick != nil {
		r = &ticking{r: r, tick: tick}
	}
	if read == nil {
		_, err := io.Copy(io.Discard, r)
		return bounded(err)
	}
	return bounded(read(r))
}

// ticking calls tick whenever bytes arrive.
type ticking struct {
	r    io.Reader
	tick func()
}

func (t *ticking) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.tick()
	}
	return n, err
}

// retryAfter reads Retry-After (seconds or an HTTP date), else the
// RateLimit-Reset epoch seconds the reference PDS sends, else one minute;
// capped by capRetry, whose note it returns.
func retryAfter(h http.Header, now time.Time) (time.Time, string) {
	return capRetry(h, now, rawRetryAfter(h, now))
}

func rawRetryAfter(h http.Header, now time.Time) time.Time {
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			return now.Add(secs(s))
		}
		if t, err := http.ParseTime(v); err == nil {
			return t
		}
	}
	if v := strings.TrimSpace(h.Get("RateLimit-Reset")); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			if s > 1_000_000_000 {
				return time.Unix(s, 0)
			}
			return now.Add(secs(s))
		}
	}
	return now.Add(time.Minute)
}

// secs is s seconds, saturating instead of overflowing.
func secs(s int64) time.Duration {
	if s > int64(100*365*24*3600) {
		s = 100 * 365 * 24 * 3600
	}
	return time.Duration(s) * time.Second
}

// capRetry bounds a pause to what the limit that was hit can mean: its
// window, from the reference PDS's RateLimit-Policy ("5000;w=3600", at most
// a day, the longest write window); without a policy, an hour (the budget's
// own window), after which the next write probes whether the limit is
// still on. Never in the past. The note says when and why it capped.
func capRetry(h http.Header, now, t time.Time) (time.Time, string) {
	window, named := budget.Window, false
	if p := h.Get("RateLimit-Policy"); p != "" {
		for _, part := range strings.Split(p, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(part), "w="); ok {
				if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 {
					window, named = min(secs(s), budget.Day), true
				}
			}
		}
	}
	switch {
	case t.Before(now):
		return now, ""
	case t.After(now.Add(window)):
		capped := now.Add(window)
		asked := fmt.Sprintf("the server asked to wait %d s", int64(t.Sub(now).Round(time.Second)/time.Second))
		w := fmt.Sprintf("%d s", int64(window/time.Second))
		if window%time.Hour == 0 {
			w = fmt.Sprintf("%d h", int64(window/time.Hour))
		}
		if named {
			return capped, fmt.Sprintf("%s, longer than the %s window its RateLimit-Policy names: capped at %s; writes are tried again at %s", asked, w, w, capped.UTC().Format(time.RFC3339))
		}
		return capped, fmt.Sprintf("%s without naming its limit (no RateLimit-Policy); capped at %s, the write budget's window: writes are tried again at %s", asked, w, capped.UTC().Format(time.RFC3339))
	}
	return t, ""
}

// ambiguous reports whether err leaves it unknown if a write committed:
// transport failures and 5xx answers.
func ambiguous(err error) bool {
	if err == nil {
		return false
	}
	var ae *atclient.APIError
	if errors.As(err, &ae) {
		return ae.StatusCode >= 500
	}
	var rl *RateLimited
	if errors.As(err, &rl) {
		return false
	}
	return !errors.Is(err, context.Canceled)
}

func isErrorName(err error, status int, name string) bool {
	var ae *atclient.APIError
	return errors.As(err, &ae) && ae.StatusCode == status && ae.Name == name
}
