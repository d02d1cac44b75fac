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
	"strings"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
)

// DPoP is the one DPoP-signed request loop of this project's OAuth clients
// (the CLI's session here, the hosted service's upstream sessions): each
// request carries the session's access token and a proof with the host's
// nonce; a use_dpop_nonce answer is retried with the new nonce, an expired
// access token is refreshed once and the request sent again, and a write
// outside the granted scope or a session that ended comes back as a clear
// XRPC error.
type DPoP struct {
	// Session is the session to sign with, read again on every attempt (a
	// refresh replaces it).
	Session func() *oauth.ClientSession
	// Refresh renews the tokens; used is the access token the host refused.
	Refresh func(ctx context.Context, used string) error
	// Ended reports a Refresh error that means the session is over (sign in
	// again): it is answered as 401 OAuthSessionExpired with its message.
	Ended func(err error) bool
	// Scope words the answer to a write outside the granted scope, given
	// the host's message.
	Scope func(detail string) string
	// What names the requests in the error after the last attempt.
	What string
}

// Do sends req (a request with a body must have GetBody to be sent again).
func (d DPoP) Do(c *http.Client, req *http.Request) (*http.Response, error) {
	durl := dpopURL(req.URL)
	for range 3 {
		sess := d.Session()
		access, nonce := sess.GetHostAccessData()
		proof, err := sess.NewHostDPoP(req.Method, durl)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "DPoP "+access)
		req.Header.Set("DPoP", proof)
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		hdr := resp.Header.Get("WWW-Authenticate")
		switch {
		case resp.StatusCode == http.StatusUnauthorized && strings.Contains(hdr, `error="use_dpop_nonce"`):
			n := resp.Header.Get("DPoP-Nonce")
			if n == "" || n == nonce {
				return resp, nil
			}
			drain(resp)
			sess.UpdateHostDPoPNonce(req.Context(), n)
		case resp.StatusCode == http.StatusUnauthorized && strings.Contains(hdr, `error="invalid_token"`):
			if err := d.Refresh(req.Context(), access); err != nil {
				drain(resp)
				if d.Ended(err) {
					return replaceBody(resp, http.StatusUnauthorized, expiredName, err.Error()), nil
				}
				return nil, err
			}
			drain(resp)
		case resp.StatusCode == http.StatusForbidden:
			b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			var eb atclient.ErrorBody
			if rerr == nil && json.Unmarshal(b, &eb) == nil && eb.Name == scopeName {
				return replaceBody(resp, http.StatusForbidden, scopeName, d.Scope(eb.Message)), nil
			}
			resp.Body = io.NopCloser(bytes.NewReader(b))
			return resp, nil
		default:
			return resp, nil
		}
		if req, err = retryable(req); err != nil {
			return nil, err
		}
	}
	return nil, errors.New(d.What + ": still unauthorized after renewing the nonce and the tokens")
}

func dpopURL(u *url.URL) string {
	c := *u
	c.RawQuery, c.ForceQuery, c.Fragment, c.RawFragment = "", false, "", ""
	return c.String()
}

func drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
}

func retryable(req *http.Request) (*http.Request, error) {
	r := req.Clone(req.Context())
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		r.Body = b
	} else if req.Body != nil && req.Body != http.NoBody {
		return nil, errors.New("cannot send the request body again")
	}
	return r, nil
}

// replaceBody gives resp a JSON XRPC error body.
func replaceBody(resp *http.Response, status int, name, message string) *http.Response {
	b, _ := json.Marshal(atclient.ErrorBody{Name: name, Message: message})
	resp.StatusCode = status
	resp.Status = fmt.Sprintf("%d %s", status, http.StatusText(status))
	resp.Header = resp.Header.Clone()
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	resp.ContentLength = int64(len(b))
	resp.Body = io.NopCloser(bytes.NewReader(b))
	return resp
}
