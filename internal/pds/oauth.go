package pds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/bluesky-social/indigo/util/ssrf"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// PermissionSet is the published permission set an OAuth login asks for:
// read and write the six app.bulleted collections.
const PermissionSet = "app.bulleted.authFull"

// Collections are the collections of PermissionSet, asked for one by one
// (repo:COLLECTION) when the authorization server cannot resolve it.
var Collections = []string{
	"app.bulleted.node", "app.bulleted.note", "app.bulleted.mirror",
	"app.bulleted.comment", "app.bulleted.commentPolicy", "app.bulleted.outline",
}

const (
	oauthTimeout    = 30 * time.Second // each OAuth request (metadata, PAR, token, revoke)
	oauthBodyLimit  = 1 << 20          // the largest OAuth answer read
	callbackTimeout = 5 * time.Minute  // default wait for the user in the browser
	userAgent       = "bulleted-mcp"
	expiredName     = "OAuthSessionExpired"
	scopeName       = "ScopeMissingError"
)

// ErrOAuthExpired means the OAuth session can no longer be used: it expired
// (public clients get two weeks), was revoked, or was removed by logout.
var ErrOAuthExpired = errors.New("the OAuth session has expired or was revoked: run `bulleted-mcp login` again")

// ErrNoOAuthSession means the data directory holds no OAuth session.
var ErrNoOAuthSession = errors.New("no OAuth session in the data directory (run `bulleted-mcp login`)")

// ErrInsecureURL means a PDS or authorization server URL is neither https
// nor plain http on a loopback host.
var ErrInsecureURL = errors.New("not an https URL (plain http is allowed only on a loopback host)")

// ErrRevoke means logout deleted the session file but the authorization
// server did not confirm the revocation.
var ErrRevoke = errors.New("the authorization server did not confirm the revocation")

// OAuthFile is the path of the OAuth session in dir.
func OAuthFile(dir string) string { return filepath.Join(dir, "oauth-session.json") }

func oauthLockFile(dir string) string { return filepath.Join(dir, "oauth-session.lock") }

// oauthFile is what the session file holds: the client (its client_id
// names the loopback redirect and the scope, and every refresh must send
// the same one) and indigo's session data (tokens, DPoP key, nonces).
type oauthFile struct {
	ClientID    string                  `json:"client_id"`
	CallbackURL string                  `json:"callback_url"`
	Session     oauth.ClientSessionData `json:"session"`
}

func readOAuthFile(dir string) (*oauthFile, error) {
	raw, err := os.ReadFile(OAuthFile(dir))
	if err != nil {
		return nil, err
	}
	var f oauthFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", OAuthFile(dir), err)
	}
	if f.ClientID == "" || f.Session.AccountDID == "" || f.Session.DPoPPrivateKeyMultibase == "" {
		return nil, fmt.Errorf("%s: incomplete OAuth session", OAuthFile(dir))
	}
	return &f, nil
}

func writeOAuthFile(dir string, f *oauthFile) error {
	raw, err := json.Marshal(f)
	if err != nil {
		return err
	}
	return atomicfile.Write(OAuthFile(dir), raw, 0o600)
}

// lockDir takes the data directory's OAuth lock (flock on a lock file,
// which also excludes other processes and other open clients of this one).
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(oauthLockFile(dir), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Lock(f, true); err != nil {
		f.Close()
		return nil, err
	}
	return func() { atomicfile.Unlock(f); f.Close() }, nil
}

// fileStore is indigo's ClientAuthStore over the session file: one session
// per data directory. Pending authorization requests (PKCE verifier, DPoP
// key) live only in memory: they belong to the login process.
type fileStore struct {
	dir                string
	clientID, callback string
	mu                 sync.Mutex
	requests           map[string]oauth.AuthRequestData
}

var _ oauth.ClientAuthStore = (*fileStore)(nil)

func (s *fileStore) GetSession(_ context.Context, did syntax.DID, sessionID string) (*oauth.ClientSessionData, error) {
	f, err := readOAuthFile(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNoOAuthSession
	}
	if err != nil {
		return nil, err
	}
	if f.Session.AccountDID != did || (sessionID != "" && f.Session.SessionID != sessionID) {
		return nil, ErrNoOAuthSession
	}
	return &f.Session, nil
}

func (s *fileStore) SaveSession(_ context.Context, sess oauth.ClientSessionData) error {
	unlock, err := lockDir(s.dir)
	if err != nil {
		return err
	}
	defer unlock()
	return writeOAuthFile(s.dir, &oauthFile{ClientID: s.clientID, CallbackURL: s.callback, Session: sess})
}

func (s *fileStore) DeleteSession(_ context.Context, did syntax.DID, sessionID string) error {
	unlock, err := lockDir(s.dir)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := readOAuthFile(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil && (f.Session.AccountDID != did || f.Session.SessionID != sessionID) {
		return nil // another login replaced it: keep that one
	}
	if err := os.Remove(OAuthFile(s.dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (s *fileStore) GetAuthRequestInfo(_ context.Context, state string) (*oauth.AuthRequestData, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.requests[state]
	if !ok {
		return nil, fmt.Errorf("no pending authorization request for this state")
	}
	return &info, nil
}

func (s *fileStore) SaveAuthRequestInfo(_ context.Context, info oauth.AuthRequestData) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requests == nil {
		s.requests = map[string]oauth.AuthRequestData{}
	}
	if _, ok := s.requests[info.State]; ok {
		return fmt.Errorf("authorization request %s exists", info.State)
	}
	s.requests[info.State] = info
	return nil
}

func (s *fileStore) DeleteAuthRequestInfo(_ context.Context, state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, state)
	return nil
}

// oauthClient is the HTTP client of OAuth requests: a timeout and a body
// limit on each; publicOnly also refuses private and loopback addresses.
func oauthClient(publicOnly bool) *http.Client {
	return BoundedClient(publicOnly, oauthTimeout, oauthBodyLimit)
}

// BoundedClient is an HTTP client whose every request has timeout and whose
// every response body is read to at most limit bytes; publicOnly refuses
// private and loopback addresses (SSRF). The OAuth clients here and in the
// hosted service use it.
func BoundedClient(publicOnly bool, timeout time.Duration, limit int64) *http.Client {
	var rt http.RoundTripper = http.DefaultTransport
	if publicOnly {
		rt = ssrf.PublicOnlyTransport()
	}
	return &http.Client{Timeout: timeout, Transport: limitBody{rt, limit}}
}

// limitBody caps every response body read through it.
type limitBody struct {
	rt    http.RoundTripper
	limit int64
}

func (l limitBody) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, l.limit), resp.Body}
	return resp, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkURL accepts https URLs, and plain http ones on a loopback host (a
// PDS on this machine, as in the tests). It reports which.
func checkURL(raw string) (loopback bool, err error) {
	u, err := url.Parse(raw)
	if err != nil {
		return false, fmt.Errorf("%q: %w", raw, err)
	}
	switch {
	case u.Host == "":
	case u.Scheme == "https":
		return false, nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return true, nil
	}
	return false, fmt.Errorf("%q: %w", raw, ErrInsecureURL)
}

func getJSON(ctx context.Context, hc *http.Client, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(out); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}

// authServer finds the authorization server of the PDS host and its
// metadata. https hosts go through indigo's resolver (public addresses
// only, full validation); a loopback http PDS is read directly.
func authServer(ctx context.Context, host string) (*oauth.AuthServerMetadata, *http.Client, error) {
	loop, err := checkURL(host)
	if err != nil {
		return nil, nil, err
	}
	if !loop {
		r := &oauth.Resolver{Client: oauthClient(true), UserAgent: userAgent}
		as, err := r.ResolveAuthServerURL(ctx, host)
		if err != nil {
			return nil, nil, fmt.Errorf("finding the authorization server of %s: %w", host, err)
		}
		meta, err := r.ResolveAuthServerMetadata(ctx, as)
		if err != nil {
			return nil, nil, fmt.Errorf("authorization server %s: %w", as, err)
		}
		return meta, r.Client, nil
	}
	hc := oauthClient(false)
	var pr oauth.ProtectedResourceMetadata
	if err := getJSON(ctx, hc, strings.TrimRight(host, "/")+"/.well-known/oauth-protected-resource", &pr); err != nil {
		return nil, nil, err
	}
	if len(pr.AuthorizationServers) == 0 {
		return nil, nil, fmt.Errorf("%s names no authorization server", host)
	}
	as := pr.AuthorizationServers[0]
	if loop, err := checkURL(as); err != nil || !loop {
		return nil, nil, fmt.Errorf("loopback PDS %s: authorization server %q is not on loopback", host, as)
	}
	var meta oauth.AuthServerMetadata
	if err := getJSON(ctx, hc, strings.TrimRight(as, "/")+"/.well-known/oauth-authorization-server", &meta); err != nil {
		return nil, nil, err
	}
	if err := validateLoopbackMeta(&meta, as); err != nil {
		return nil, nil, fmt.Errorf("authorization server %s: %w", as, err)
	}
	return &meta, hc, nil
}

// validateLoopbackMeta is indigo's AuthServerMetadata.Validate for an
// http://localhost:PORT issuer (which that refuses for scheme and port).
func validateLoopbackMeta(m *oauth.AuthServerMetadata, as string) error {
	iss, err := url.Parse(m.Issuer)
	if err != nil {
		return err
	}
	want, _ := url.Parse(as)
	if iss.Scheme != want.Scheme || iss.Host != want.Host || strings.Trim(iss.Path, "/") != "" {
		return fmt.Errorf("issuer %q does not match %q", m.Issuer, as)
	}
	for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint, m.PushedAuthorizationRequestEndpoint} {
		if !strings.HasPrefix(e, m.Issuer+"/") {
			return fmt.Errorf("endpoint %q is not on the issuer %s", e, m.Issuer)
		}
	}
	need := []struct {
		list []string
		v    string
	}{
		{m.ResponseTypesSupported, "code"}, {m.GrantTypesSupported, "authorization_code"},
		{m.GrantTypesSupported, "refresh_token"}, {m.CodeChallengeMethodsSupported, "S256"},
		{m.TokenEndpointAuthMethodsSupoorted, "none"}, {m.DPoPSigningAlgValuesSupported, "ES256"},
		{m.ScopesSupported, "atproto"},
	}
	for _, n := range need {
		if !slices.Contains(n.list, n.v) {
			return fmt.Errorf("metadata lacks %q", n.v)
		}
	}
	if !m.AuthorizationReponseISSParameterSupported || !m.RequirePushedAuthorizationRequests {
		return errors.New("metadata must support the iss parameter and require PAR")
	}
	return nil
}

// OAuthLogin signs in with AT Protocol OAuth as a loopback public client
// (PAR, PKCE, DPoP with ES256 and server nonces).
type OAuthLogin struct {
	Identifier string // handle or DID
	PDS        string // optional: the PDS URL (resolves the handle; must match the DID document)
	Dir        string // data directory: the session is written to OAuthFile(Dir)
	Directory  identity.Directory
	// Browse shows the user the authorization page (opens a browser or
	// prints the URL); it may return before the user is done.
	Browse func(ctx context.Context, authURL string) error
	// Listening, if set, is told the callback URL once it listens.
	Listening func(callbackURL string)
	// PermissionSet asked for ("" = PermissionSet).
	PermissionSet string
	// Wait bounds the wait for the browser's callback (0 = 5 minutes).
	Wait time.Duration
}

// OAuthGrant is the outcome of a login.
type OAuthGrant struct {
	DID    syntax.DID
	Host   string   // the PDS
	Scopes []string // as granted by the authorization server
	// Requested is the scope asked for; PermissionSet reports whether it
	// was the permission set (else the granular fallback, for Fallback).
	Requested     []string
	PermissionSet bool
	Fallback      string
}

// GranularScopes is the scope asked for when the permission set cannot be
// resolved: the same six collections, all actions.
func GranularScopes() []string {
	s := []string{"atproto"}
	for _, c := range Collections {
		s = append(s, "repo:"+c)
	}
	return s
}

func (l OAuthLogin) resolve(ctx context.Context) (syntax.DID, string, error) {
	if l.Directory == nil {
		return "", "", errors.New("no identity directory")
	}
	atid, err := syntax.ParseAtIdentifier(strings.TrimPrefix(l.Identifier, "@"))
	if err != nil {
		return "", "", fmt.Errorf("identifier %q: %w", l.Identifier, err)
	}
	var did syntax.DID
	switch {
	case atid.IsDID():
		did, _ = atid.AsDID()
	case l.PDS != "":
		if _, err := checkURL(l.PDS); err != nil {
			return "", "", err
		}
		c := atclient.NewAPIClient(strings.TrimRight(l.PDS, "/"))
		c.Client = oauthClient(false)
		var out struct {
			DID string `json:"did"`
		}
		if err := call(ctx, c, http.MethodGet, "com.atproto.identity.resolveHandle", url.Values{"handle": {atid.String()}}, nil, &out, nil); err != nil {
			return "", "", fmt.Errorf("resolving %s on %s: %w", atid, l.PDS, err)
		}
		if did, err = syntax.ParseDID(out.DID); err != nil {
			return "", "", err
		}
	default:
		h, _ := atid.AsHandle()
		ident, err := l.Directory.LookupHandle(ctx, h)
		if err != nil {
			return "", "", fmt.Errorf("resolving %s: %w", h, err)
		}
		did = ident.DID
	}
	ident, err := l.Directory.LookupDID(ctx, did)
	if err != nil {
		return "", "", fmt.Errorf("resolving %s: %w", did, err)
	}
	host := strings.TrimRight(ident.PDSEndpoint(), "/")
	if host == "" {
		return "", "", fmt.Errorf("%s has no PDS in its DID document", did)
	}
	if l.PDS != "" && strings.TrimRight(l.PDS, "/") != host {
		return "", "", fmt.Errorf("the DID document of %s names the PDS %s, not %s", did, host, l.PDS)
	}
	return did, host, nil
}

// Login runs the whole flow and saves the session in the data directory.
func (l OAuthLogin) Login(ctx context.Context) (*OAuthGrant, error) {
	if l.Browse == nil {
		return nil, errors.New("no way to show the authorization page")
	}
	did, host, err := l.resolve(ctx)
	if err != nil {
		return nil, err
	}
	meta, hc, err := authServer(ctx, host)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(l.Dir, 0o700); err != nil {
		return nil, err
	}
	// loopback redirects must use an IP literal, not localhost
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	callback := fmt.Sprintf("http://%s/callback", ln.Addr())

	ps := l.PermissionSet
	if ps == "" {
		ps = PermissionSet
	}
	store := &fileStore{dir: l.Dir, callback: callback}
	grant := &OAuthGrant{DID: did, Host: host}
	var app *oauth.ClientApp
	var info *oauth.AuthRequestData
	for _, scopes := range [][]string{{"atproto", "include:" + ps}, GranularScopes()} {
		cfg := oauth.NewLocalhostConfig(callback, scopes)
		cfg.UserAgent = userAgent
		app = &oauth.ClientApp{Client: hc, Dir: l.Directory, Config: &cfg, Store: store}
		info, err = app.SendAuthRequest(ctx, meta, scopes, did.String())
		grant.Requested = scopes
		if err != nil && strings.Contains(err.Error(), "invalid_scope") && grant.Fallback == "" && strings.HasPrefix(scopes[1], "include:") {
			// the authorization server could not resolve the permission set
			grant.Fallback = fmt.Sprintf("the authorization server could not resolve include:%s (%v)", ps, err)
			continue
		}
		break
	}
	if err != nil {
		return nil, fmt.Errorf("pushed authorization request to %s: %w", meta.Issuer, err)
	}
	grant.PermissionSet = grant.Fallback == ""
	store.clientID = app.Config.ClientID
	info.AccountDID = &did
	if err := store.SaveAuthRequestInfo(ctx, *info); err != nil {
		return nil, err
	}

	type result struct {
		sess *oauth.ClientSessionData
		err  error
	}
	done := make(chan result, 1)
	var once sync.Once
	mux := http.NewServeMux()
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("state") != info.State {
			http.Error(w, "unknown authorization request", http.StatusBadRequest)
			return
		}
		handled := false
		once.Do(func() {
			handled = true
			cctx, cancel := context.WithTimeout(ctx, 2*oauthTimeout)
			defer cancel()
			sess, err := app.ProcessCallback(cctx, q)
			// answer the browser first: Login returns (and stops this
			// server) once it has the result
			defer func() { done <- result{sess, err} }()
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if err != nil {
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprintf(w, "bulleted-mcp: sign-in failed: %v\n", err)
				return
			}
			fmt.Fprintln(w, "bulleted-mcp is signed in. You can close this window.")
		})
		if !handled {
			http.Error(w, "this authorization was already used", http.StatusBadRequest)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer func() {
		// let the callback's answer reach the browser
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	}()
	if l.Listening != nil {
		l.Listening(callback)
	}

	q := url.Values{"client_id": {app.Config.ClientID}, "request_uri": {info.RequestURI}}
	if err := l.Browse(ctx, meta.AuthorizationEndpoint+"?"+q.Encode()); err != nil {
		return nil, err
	}
	wait := l.Wait
	if wait == 0 {
		wait = callbackTimeout
	}
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("completing the sign-in: %w", r.err)
		}
		grant.Scopes = r.sess.Scopes
		grant.Host = r.sess.HostURL
		return grant, nil
	case <-time.After(wait):
		return nil, fmt.Errorf("no answer from the browser within %s", wait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// OAuthAuth is the atclient.AuthMethod of an OAuth session kept in a data
// directory. It signs requests with DPoP like indigo's ClientSession (which
// it wraps) but refreshes under the data directory's lock after reading
// the file again: when another process or client refreshed first, it takes
// that process's tokens instead of refreshing with a rotated token (the
// reference PDS deletes the whole session when a used refresh token comes
// back).
type OAuthAuth struct {
	dir  string
	http *http.Client // token requests

	sess atomic.Pointer[oauth.ClientSession]
	mu   sync.Mutex // serialises refreshes in this process

	pmu     sync.Mutex
	pending *oauth.ClientSessionData // the data last handed to persist
}

func (a *OAuthAuth) newSession(f *oauthFile) (*oauth.ClientSession, error) {
	key, err := atcrypto.ParsePrivateMultibase(f.Session.DPoPPrivateKeyMultibase)
	if err != nil {
		return nil, fmt.Errorf("the session's DPoP key: %w", err)
	}
	data := f.Session
	data.Scopes = slices.Clone(f.Session.Scopes)
	cfg := &oauth.ClientConfig{ClientID: f.ClientID, CallbackURL: f.CallbackURL, Scopes: data.Scopes, UserAgent: userAgent}
	return &oauth.ClientSession{
		Client:                 a.http,
		Config:                 cfg,
		Data:                   &data,
		DPoPPrivateKey:         key,
		PersistSessionCallback: a.persist,
	}, nil
}

// persist is indigo's callback after a refresh or a new host nonce (called
// with the session's lock held). A refresh's data is written by refresh,
// which holds the directory lock; a nonce is saved only if nobody holds
// the lock and the file still has this session's refresh token (so that a
// stale process never writes back a rotated token).
func (a *OAuthAuth) persist(_ context.Context, d *oauth.ClientSessionData) {
	cp := *d
	cp.Scopes = slices.Clone(d.Scopes)
	a.pmu.Lock()
	a.pending = &cp
	a.pmu.Unlock()
	lf, err := os.OpenFile(oauthLockFile(a.dir), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return
	}
	defer lf.Close()
	if ok, err := atomicfile.TryLock(lf); err != nil || !ok {
		return
	}
	defer atomicfile.Unlock(lf)
	f, err := readOAuthFile(a.dir)
	if err != nil || f.Session.SessionID != cp.SessionID || f.Session.RefreshToken != cp.RefreshToken {
		return
	}
	f.Session = cp
	_ = writeOAuthFile(a.dir, f) // a lost nonce costs one retry
}

// DID is the session's account.
func (a *OAuthAuth) DID() syntax.DID { return a.sess.Load().Data.AccountDID }

// Scopes are the scopes granted to the session.
func (a *OAuthAuth) Scopes() []string { return slices.Clone(a.sess.Load().Config.Scopes) }

// Refresh gets new tokens now (or takes those another client already
// got), as happens by itself when the PDS says the access token expired.
func (a *OAuthAuth) Refresh(ctx context.Context) error { return a.refresh(ctx, "", true) }

func (a *OAuthAuth) refresh(ctx context.Context, used string, force bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	sess := a.sess.Load()
	if at, _ := sess.GetHostAccessData(); !force && at != used {
		return nil // refreshed meanwhile in this process
	}
	// The refresh request is sent under the lock: it is what the lock
	// protects. It has a timeout, so the lock is held for a bounded time.
	unlock, err := lockDir(a.dir)
	if err != nil {
		return err
	}
	defer unlock()
	f, err := readOAuthFile(a.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (the session file %s is gone)", ErrOAuthExpired, OAuthFile(a.dir))
	}
	if err != nil {
		return err
	}
	if f.Session.SessionID != sess.Data.SessionID || f.Session.RefreshToken != sess.Data.RefreshToken {
		// another client refreshed (or logged in again): use its tokens
		ns, err := a.newSession(f)
		if err != nil {
			return err
		}
		a.sess.Store(ns)
		return nil
	}
	a.pmu.Lock()
	a.pending = nil
	a.pmu.Unlock()
	rctx, cancel := context.WithTimeout(ctx, oauthTimeout)
	defer cancel()
	if _, err := sess.RefreshTokens(rctx); err != nil {
		if rejected(err) {
			return fmt.Errorf("%w (%v)", ErrOAuthExpired, err)
		}
		return fmt.Errorf("refreshing the OAuth session: %w", err)
	}
	a.pmu.Lock()
	d := a.pending
	a.pmu.Unlock()
	if d == nil {
		return errors.New("refreshing the OAuth session: no session data after the refresh")
	}
	f.Session = *d
	if err := writeOAuthFile(a.dir, f); err != nil {
		return fmt.Errorf("saving the refreshed OAuth session (other processes will have to log in again): %w", err)
	}
	return nil
}

// rejected reports whether a refresh failed because the authorization
// server refused the refresh token (not for want of an answer).
func rejected(err error) bool {
	s := err.Error()
	return strings.Contains(s, "invalid_grant") || strings.Contains(s, "(HTTP 400)") || strings.Contains(s, "(HTTP 401)")
}

// DoWithAuth implements atclient.AuthMethod: DPoP-signed requests with the
// host's nonce, a refresh when the access token expired, and clear errors
// for an expired session and for a write outside the granted scope.
func (a *OAuthAuth) DoWithAuth(c *http.Client, req *http.Request, _ syntax.NSID) (*http.Response, error) {
	return DPoP{
		Session: a.sess.Load,
		Refresh: func(ctx context.Context, used string) error { return a.refresh(ctx, used, false) },
		Ended:   func(err error) bool { return errors.Is(err, ErrOAuthExpired) },
		Scope: func(detail string) string {
			return fmt.Sprintf("the OAuth session does not permit this (%s); it was granted %q, which covers the app.bulleted collections only",
				detail, strings.Join(a.Scopes(), " "))
		},
		What: "OAuth request",
	}.Do(c, req)
}

// IsScopeMissing reports whether err is the PDS refusing a request outside
// the OAuth session's scope.
func IsScopeMissing(err error) bool {
	var ae *atclient.APIError
	return errors.As(err, &ae) && ae.StatusCode == http.StatusForbidden && ae.Name == scopeName
}

// IsOAuthExpired reports whether err means the OAuth session is over
// (the user must log in again).
func IsOAuthExpired(err error) bool {
	var ae *atclient.APIError
	return errors.Is(err, ErrOAuthExpired) || (errors.As(err, &ae) && ae.Name == expiredName)
}

// HasOAuth reports whether dir holds an OAuth session (login was run).
func HasOAuth(dir string) bool {
	_, err := os.Stat(OAuthFile(dir))
	return err == nil
}

// OpenOAuth returns a client of the OAuth session saved in dir, checked
// with one request (which refreshes it when needed). ok is false, with no
// error, when dir holds no OAuth session (use the app password then). hc
// carries the API requests (nil: http.DefaultClient); token requests have
// their own timeout.
func OpenOAuth(ctx context.Context, dir string, hc *http.Client) (c *atclient.APIClient, did syntax.DID, ok bool, err error) {
	f, err := readOAuthFile(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", false, nil
	}
	if err != nil {
		return nil, "", true, err
	}
	loop, err := checkURL(f.Session.HostURL)
	if err != nil {
		return nil, "", true, err
	}
	a := &OAuthAuth{dir: dir, http: oauthClient(!loop)}
	sess, err := a.newSession(f)
	if err != nil {
		return nil, "", true, err
	}
	a.sess.Store(sess)
	did = f.Session.AccountDID
	if hc == nil {
		hc = http.DefaultClient
	}
	c = &atclient.APIClient{Client: hc, Host: f.Session.HostURL, Auth: a, AccountDID: &did, Headers: http.Header{}}
	c.Headers.Set("User-Agent", userAgent)
	if err := call(ctx, c, http.MethodGet, "com.atproto.server.getSession", nil, nil, nil, nil); err != nil {
		if IsOAuthExpired(err) {
			return nil, did, true, fmt.Errorf("%w (%s)", ErrOAuthExpired, did)
		}
		return nil, did, true, fmt.Errorf("checking the OAuth session of %s on %s: %w", did, f.Session.HostURL, err)
	}
	return c, did, true, nil
}

// OpenPreferOAuth opens the OAuth session kept in l.Dir when there is one
// (login was run), else logs in with the app password as Open does. isOAuth
// reports which. An Identifier that is a DID must match the OAuth
// session's account.
func (l Login) OpenPreferOAuth(ctx context.Context) (c *atclient.APIClient, did syntax.DID, isOAuth bool, err error) {
	c, did, ok, err := OpenOAuth(ctx, l.Dir, l.HTTP)
	if ok {
		if err == nil && strings.HasPrefix(l.Identifier, "did:") && l.Identifier != did.String() {
			return nil, "", true, fmt.Errorf("the OAuth session in %s is for %s, not %s (run `bulleted-mcp logout`, or use another data directory)", l.Dir, did, l.Identifier)
		}
		return c, did, true, err
	}
	if err != nil {
		return nil, "", false, err
	}
	if l.Identifier == "" {
		return nil, "", false, fmt.Errorf("no OAuth session in %s (run `bulleted-mcp login`) and no identifier for an app-password login", l.Dir)
	}
	c, did, err = l.Open(ctx)
	return c, did, false, err
}

// LogoutOAuth revokes the OAuth session saved in dir and deletes it. The
// file is deleted even when the revocation fails (the error then wraps
// ErrRevoke): nobody holds its tokens any more.
func LogoutOAuth(ctx context.Context, dir string) (syntax.DID, error) {
	f, err := readOAuthFile(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", ErrNoOAuthSession
	}
	if err != nil {
		return "", err
	}
	loop, err := checkURL(f.Session.HostURL)
	if err != nil {
		return "", err
	}
	a := &OAuthAuth{dir: dir, http: oauthClient(!loop)}
	sess, err := a.newSession(f)
	if err != nil {
		return "", err
	}
	sess.PersistSessionCallback = nil
	var rerr error
	if f.Session.AuthServerRevocationEndpoint == "" {
		rerr = fmt.Errorf("%w: %s has no revocation endpoint", ErrRevoke, f.Session.AuthServerURL)
	} else {
		rctx, cancel := context.WithTimeout(ctx, 2*oauthTimeout)
		defer cancel()
		if err := sess.RevokeSession(rctx); err != nil {
			rerr = fmt.Errorf("%w: %v", ErrRevoke, err)
		}
	}
	store := &fileStore{dir: dir}
	if err := store.DeleteSession(ctx, f.Session.AccountDID, f.Session.SessionID); err != nil {
		return f.Session.AccountDID, errors.Join(rerr, err)
	}
	return f.Session.AccountDID, rerr
}
