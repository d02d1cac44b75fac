package hosted

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/bulleted-mcp/bulleted-mcp/server"
)

// Scopes this server grants to MCP clients.
const (
	ScopeRead  = "bulleted:read"
	ScopeWrite = "bulleted:write"
)

var allScopes = []string{ScopeRead, ScopeWrite}

const (
	codeTTL     = time.Minute
	requestTTL  = 10 * time.Minute
	cimdMaxAge  = time.Hour
	formLimit   = 64 << 10
	csrfCookie  = "bmcp_csrf"
	metaTimeout = 10 * time.Second
)

func (s *Server) accessTTL() time.Duration  { return or(s.cfg.AccessTTL, time.Hour) }
func (s *Server) refreshTTL() time.Duration { return or(s.cfg.RefreshTTL, 30*24*time.Hour) }
func (s *Server) grace() time.Duration      { return or(s.cfg.RefreshGrace, 30*time.Second) }

func or(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Handler serves everything: /mcp (bearer tokens), the protected-resource
// and authorization-server metadata, /register, /authorize, /token,
// /revoke, and the upstream client's metadata, JWKS and callback.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	prm := mcpserver.ProtectedResourceMetadataConfig{
		Resource: s.resource, AuthorizationServers: []string{s.public}, ScopesSupported: allScopes,
		BearerMethodsSupported: []string{"header"}, ResourceName: "Bulleted outlines",
	}
	prmHandler := mcpserver.NewProtectedResourceMetadataHandler(prm)
	mux.Handle("/.well-known/oauth-protected-resource/mcp", prmHandler)
	mux.Handle("/.well-known/oauth-protected-resource", prmHandler)
	mux.HandleFunc("/.well-known/oauth-authorization-server", s.asMetadata)
	mux.HandleFunc("/.well-known/openid-configuration", s.asMetadata)
	mux.HandleFunc("/register", s.limited(s.limits.register, false, s.register))
	mux.HandleFunc("/authorize", s.limited(s.limits.authorize, true, s.authorize))
	mux.HandleFunc("/token", s.limited(s.limits.token, false, s.token))
	mux.HandleFunc("/revoke", s.limited(s.limits.token, false, s.revoke))
	mux.HandleFunc("/oauth/client-metadata.json", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.ClientMetadata()) })
	mux.HandleFunc("/oauth/jwks.json", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, s.JWKS()) })
	mux.HandleFunc("/oauth/callback", s.callback)
	h := server.StreamableHTTPWith(s.mcp, s.sessions, mcpserver.WithDisableLocalhostProtection(true))
	mux.Handle("/mcp", s.bearer(h))
	mux.HandleFunc("/metrics", s.serveMetrics)
	vh := s.viewHandler() // the signed-in user's outline page (view.go)
	mux.Handle("/view", vh)
	mux.Handle("/view/", vh)
	return s.perAddress(s.guardBodies(mux))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func (s *Server) asMetadata(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, 200, map[string]any{
		"issuer":                                         s.public,
		"authorization_endpoint":                         s.public + "/authorize",
		"token_endpoint":                                 s.public + "/token",
		"registration_endpoint":                          s.public + "/register",
		"revocation_endpoint":                            s.public + "/revoke",
		"scopes_supported":                               allScopes,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none", "client_secret_post", "client_secret_basic"},
		"revocation_endpoint_auth_methods_supported":     []string{"none", "client_secret_post", "client_secret_basic"},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
	})
}

// ---- errors ----

type oauthError struct {
	Code   string `json:"error"`
	Desc   string `json:"error_description,omitempty"`
	status int
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Desc }

func oerr(status int, code, format string, args ...any) *oauthError {
	return &oauthError{Code: code, Desc: fmt.Sprintf(format, args...), status: status}
}

// writeOAuthError answers err as RFC 6749 wants. An error that is not an
// oauthError is the server's own: its details (a database's user, host
// and port, say) go to the operator's log, and the client is told only
// what it may know: the service is unavailable (503, Retry-After) when the
// database does not answer, an internal error otherwise.
func (s *Server) writeOAuthError(w http.ResponseWriter, err error) {
	var oe *oauthError
	if !errors.As(err, &oe) {
		if dbDown(err) {
			s.unavailable(w, "token endpoint", err)
			return
		}
		s.logf("oauth: internal error: %v", err)
		oe = oerr(500, "server_error", "internal error (the details are in the service's log)")
	}
	if oe.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="bulleted-mcp"`)
	}
	writeJSON(w, oe.status, oe)
}

// ---- clients ----

// clientMeta is an MCP client's registration (RFC 7591) or client ID
// metadata document.
type clientMeta struct {
	ClientID                string   `json:"client_id"`
	ClientSecret            string   `json:"client_secret,omitempty"`
	ClientIDIssuedAt        int64    `json:"client_id_issued_at,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	ClientURI               string   `json:"client_uri,omitempty"`
	LogoURI                 string   `json:"logo_uri,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	Scope                   string   `json:"scope,omitempty"`
}

type regClient struct {
	meta       clientMeta
	secretHash []byte
}

// Redirect URI limits: at most maxRedirects per client, each at most
// maxRedirectLen bytes.
const (
	maxRedirects   = 10
	maxRedirectLen = 2000
)

// validRedirect admits https, plain http on a loopback host (127.0.0.1,
// [::1], localhost), and private-use schemes in reverse-domain form (RFC
// 8252 §7.1: the scheme contains a period, com.example.app:/cb). Every
// other scheme (blob:, about:, filesystem:, ms-settings:, javascript:,
// data:, file: ...) is refused.
func validRedirect(raw string) error {
	if len(raw) > maxRedirectLen {
		return fmt.Errorf("redirect URI %.40q... is over %d bytes", raw, maxRedirectLen)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Fragment != "" || u.Scheme == "" {
		return fmt.Errorf("redirect URI %q is not an absolute URI without a fragment", raw)
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https":
		if u.Host == "" {
			return fmt.Errorf("redirect URI %q has no host", raw)
		}
	case scheme == "http":
		if !isLoopbackHost(u.Hostname()) {
			return fmt.Errorf("redirect URI %q: plain http only on loopback (127.0.0.1, [::1], localhost)", raw)
		}
	case strings.Contains(scheme, "."):
		// a private-use scheme of a native application (RFC 8252 §7.1)
	default:
		return fmt.Errorf("redirect URI %q: scheme %q not allowed (https, http on loopback, or an application's reverse-domain scheme such as com.example.app:/callback)", raw, u.Scheme+":")
	}
	return nil
}

func (m *clientMeta) check() error {
	if len(m.RedirectURIs) == 0 {
		return oerr(400, "invalid_redirect_uri", "redirect_uris is required")
	}
	if len(m.RedirectURIs) > maxRedirects {
		return oerr(400, "invalid_redirect_uri", "%d redirect_uris: at most %d", len(m.RedirectURIs), maxRedirects)
	}
	for _, r := range m.RedirectURIs {
		if err := validRedirect(r); err != nil {
			return oerr(400, "invalid_redirect_uri", "%v", err)
		}
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return oerr(400, "invalid_client_metadata", "grant type %q is not supported (authorization_code, refresh_token)", g)
		}
	}
	for _, rt := range m.ResponseTypes {
		if rt != "code" {
			return oerr(400, "invalid_client_metadata", "response type %q is not supported (code)", rt)
		}
	}
	switch m.TokenEndpointAuthMethod {
	case "", "none", "client_secret_post", "client_secret_basic":
	default:
		return oerr(400, "invalid_client_metadata", "token_endpoint_auth_method %q is not supported (none, client_secret_post, client_secret_basic)", m.TokenEndpointAuthMethod)
	}
	if len(m.ClientName) > 200 {
		m.ClientName = m.ClientName[:200]
	}
	return nil
}

// register is dynamic client registration (RFC 7591).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type")
		w.WriteHeader(204)
		return
	}
	if r.Method != http.MethodPost {
		s.writeOAuthError(w, oerr(405, "invalid_request", "POST a JSON client metadata document"))
		return
	}
	var m clientMeta
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeOAuthError(w, bodyError(err, "reading the body"))
		return
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		s.writeOAuthError(w, oerr(400, "invalid_client_metadata", "the body is not a JSON client metadata document: %v", err))
		return
	}
	if err := m.check(); err != nil {
		s.writeOAuthError(w, err)
		return
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = "client_secret_basic" // RFC 7591's default
	}
	if len(m.GrantTypes) == 0 {
		m.GrantTypes = []string{"authorization_code", "refresh_token"}
	}
	m.ResponseTypes = []string{"code"}
	m.ClientID = newToken("mcp-")
	m.ClientIDIssuedAt = time.Now().Unix()
	var secretHash []byte
	if m.TokenEndpointAuthMethod != "none" {
		m.ClientSecret = newToken("")
		secretHash = hashToken(m.ClientSecret)
	}
	stored := m
	stored.ClientSecret = ""
	raw, _ = json.Marshal(stored)
	if _, err := s.db.Exec(r.Context(), "INSERT INTO oauth_clients (client_id, kind, secret_hash, metadata) VALUES ($1, 'dcr', $2, $3)", m.ClientID, secretHash, raw); err != nil {
		s.writeOAuthError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, m)
}

// isCIMD reports whether clientID is a client ID metadata document URL.
func (s *Server) isCIMD(clientID string) bool {
	u, err := url.Parse(clientID)
	if err != nil || u.Host == "" || u.Path == "" || u.Path == "/" || u.Fragment != "" || u.User != nil {
		return false
	}
	return u.Scheme == "https" || (s.cfg.AllowLoopback && loopbackURL(clientID))
}

// client finds a registered client, or fetches (and caches) the client ID
// metadata document a URL client_id names.
func (s *Server) client(ctx context.Context, clientID string) (*regClient, error) {
	var raw []byte
	var c regClient
	var kind string
	var fetched time.Time
	err := s.db.QueryRow(ctx, "SELECT kind, secret_hash, metadata, fetched_at FROM oauth_clients WHERE client_id = $1", clientID).Scan(&kind, &c.secretHash, &raw, &fetched)
	if err == nil && (kind == "dcr" || time.Since(fetched) < cimdMaxAge) {
		if err := json.Unmarshal(raw, &c.meta); err != nil {
			return nil, err
		}
		return &c, nil
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	if !s.isCIMD(clientID) {
		return nil, oerr(400, "invalid_client", "unknown client_id %q: register it first (registration_endpoint) or use a client ID metadata document URL", clientID)
	}
	m, err := s.fetchCIMD(ctx, clientID)
	if err != nil {
		return nil, oerr(400, "invalid_client", "client ID metadata document %s: %v", clientID, err)
	}
	raw, _ = json.Marshal(m)
	if _, err := s.db.Exec(ctx, `INSERT INTO oauth_clients (client_id, kind, metadata) VALUES ($1, 'cimd', $2)
		ON CONFLICT (client_id) DO UPDATE SET metadata = excluded.metadata, fetched_at = now() WHERE oauth_clients.kind = 'cimd'`, clientID, raw); err != nil {
		return nil, err
	}
	return &regClient{meta: *m}, nil
}

func (s *Server) fetchCIMD(ctx context.Context, clientID string) (*clientMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientID, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	hc := httpClient(!(s.cfg.AllowLoopback && loopbackURL(clientID)))
	hc.Timeout = metaTimeout
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return errors.New("redirects are not followed") }
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var m clientMeta
	if err := json.NewDecoder(io.LimitReader(resp.Body, formLimit)).Decode(&m); err != nil {
		return nil, err
	}
	if m.ClientID != clientID {
		return nil, fmt.Errorf("its client_id %q is not its URL", m.ClientID)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	if m.TokenEndpointAuthMethod != "" && m.TokenEndpointAuthMethod != "none" {
		return nil, fmt.Errorf("token_endpoint_auth_method %q: documents are public clients here (none)", m.TokenEndpointAuthMethod)
	}
	m.TokenEndpointAuthMethod = "none"
	return &m, nil
}

// redirectMatches: exact, except that a loopback http redirect may use any
// port (RFC 8252 §7.3).
func redirectMatches(registered []string, got string) bool {
	if slices.Contains(registered, got) {
		return true
	}
	g, err := url.Parse(got)
	if err != nil || g.Scheme != "http" || !isLoopbackHost(g.Hostname()) {
		return false
	}
	for _, r := range registered {
		u, err := url.Parse(r)
		if err == nil && u.Scheme == "http" && u.Hostname() == g.Hostname() && u.Path == g.Path && u.RawQuery == g.RawQuery {
			return true
		}
	}
	return false
}

// ---- /authorize and the consent page ----

func (s *Server) scopeOf(requested string) (string, error) {
	if strings.TrimSpace(requested) == "" {
		return strings.Join(allScopes, " "), nil
	}
	var out []string
	for _, sc := range strings.Fields(requested) {
		if !slices.Contains(allScopes, sc) {
			return "", fmt.Errorf("unknown scope %q (known: %s)", sc, strings.Join(allScopes, " "))
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	if slices.Contains(out, ScopeWrite) && !slices.Contains(out, ScopeRead) {
		out = append([]string{ScopeRead}, out...)
	}
	return strings.Join(out, " "), nil
}

func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, redirect, state, code, desc string) {
	u, _ := url.Parse(redirect)
	q := u.Query()
	q.Set("error", code)
	q.Set("error_description", desc)
	if state != "" {
		q.Set("state", state)
	}
	q.Set("iss", s.public)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

var errorPage = template.Must(template.New("e").Parse(`<!doctype html><title>Bulleted MCP: cannot authorize</title>
<h1>This authorization request cannot be served</h1><p>{{.}}</p>`))

func (s *Server) pageError(w http.ResponseWriter, status int, msg string) {
	pageHeaders(w)
	w.WriteHeader(status)
	errorPage.Execute(w, msg)
}

var consentPage = template.Must(template.New("c").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Allow {{.Name}} to use your Bulleted outline?</title>
<style>body{font:16px system-ui,sans-serif;max-width:34em;margin:3em auto;padding:0 1em}code{word-break:break-all}</style></head>
<body><h1>Allow <em>{{.Name}}</em> to use your Bulleted outline?</h1>
<p>The application <strong>{{.Name}}</strong> (client <code>{{.ClientID}}</code>) asks to
{{if .Write}}read and edit{{else}}read{{end}} your outline through this server. After you allow it, it is sent back to
<code>{{.RedirectHost}}</code>. Only allow applications you trust and started yourself.</p>
<form method="post" action="/authorize">
<input type="hidden" name="request" value="{{.Request}}"><input type="hidden" name="csrf" value="{{.CSRF}}">
<p><label>Your handle or DID: <input name="identifier" required autocomplete="username" placeholder="you.bsky.social"></label></p>
<p>You will sign in at your own server (PDS), which asks you to grant Bulleted access.</p>
<button name="action" value="allow" type="submit">Allow and sign in</button>
<button name="action" value="deny" type="submit" formnovalidate>Deny</button>
</form></body></html>`))

func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
		s.authorizeGet(w, r)
	case http.MethodPost:
		s.authorizePost(w, r)
	default:
		s.pageError(w, 405, "use GET")
	}
}

func (s *Server) authorizeGet(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	c, err := s.client(ctx, q.Get("client_id"))
	if err != nil {
		s.pageError(w, 400, err.Error())
		return
	}
	redirect := q.Get("redirect_uri")
	if redirect == "" && len(c.meta.RedirectURIs) == 1 {
		redirect = c.meta.RedirectURIs[0]
	}
	if !redirectMatches(c.meta.RedirectURIs, redirect) {
		// never redirect to an unregistered URI
		s.pageError(w, 400, fmt.Sprintf("redirect_uri %q is not registered for this client", redirect))
		return
	}
	state := q.Get("state")
	fail := func(code, desc string) { s.redirectError(w, r, redirect, state, code, desc) }
	if q.Get("response_type") != "code" {
		fail("unsupported_response_type", "response_type must be code")
		return
	}
	if q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256" {
		fail("invalid_request", "PKCE is required: code_challenge with code_challenge_method=S256")
		return
	}
	if res := q.Get("resource"); res != "" && strings.TrimRight(res, "/") != s.resource {
		fail("invalid_target", "this server issues tokens only for the resource "+s.resource)
		return
	}
	scope, err := s.scopeOf(q.Get("scope"))
	if err != nil {
		fail("invalid_scope", err.Error())
		return
	}
	id, csrf := newToken("ar-"), newToken("")
	if _, err := s.db.Exec(ctx, `INSERT INTO auth_requests (id, client_id, redirect_uri, state, code_challenge, scope, resource, csrf_hash, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, now() + interval '10 minutes')`,
		id, c.meta.ClientID, redirect, state, q.Get("code_challenge"), scope, s.resource, hashToken(csrf)); err != nil {
		s.pageError(w, 500, "could not record the request: "+err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: csrf, Path: "/", HttpOnly: true, Secure: strings.HasPrefix(s.public, "https:"),
		SameSite: http.SameSiteLaxMode, MaxAge: int(requestTTL.Seconds())})
	ru, _ := url.Parse(redirect)
	name := c.meta.ClientName
	if name == "" {
		name = "An unnamed application"
	}
	pageHeaders(w)
	consentPage.Execute(w, map[string]any{"Name": name, "ClientID": c.meta.ClientID, "RedirectHost": ru.Scheme + "://" + ru.Host,
		"Write": strings.Contains(scope, ScopeWrite), "Request": id, "CSRF": csrf})
}

type pendingRequest struct {
	id, clientID, redirect, state, challenge, scope, resource string
	csrfHash                                                  []byte
	upstream                                                  []byte
	// view: a browser's sign-in to /view (view.go), no MCP client
	view bool
}

func (s *Server) loadRequest(ctx context.Context, where string, arg string, del bool) (*pendingRequest, error) {
	verb := "SELECT"
	if del {
		verb = "DELETE FROM auth_requests WHERE " + where + " AND expires_at > now() RETURNING"
	}
	q := verb + " id, coalesce(client_id, ''), redirect_uri, state, code_challenge, scope, resource, csrf_hash, upstream, view"
	if !del {
		q += " FROM auth_requests WHERE " + where + " AND expires_at > now()"
	}
	var p pendingRequest
	err := s.db.QueryRow(ctx, q, arg).Scan(&p.id, &p.clientID, &p.redirect, &p.state, &p.challenge, &p.scope, &p.resource, &p.csrfHash, &p.upstream, &p.view)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errors.New("this authorization request is unknown or expired: start again from your application")
	}
	return &p, err
}

// csrfOK checks the form's token against the cookie and the request's hash.
func csrfOK(r *http.Request, formValue string, hash []byte) bool {
	ck, err := r.Cookie(csrfCookie)
	if err != nil || formValue == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(formValue)) != 1 {
		return false
	}
	return subtle.ConstantTimeCompare(hashToken(formValue), hash) == 1
}

// sameOriginForm parses a form posted to one of this server's pages,
// refusing (with a page saying why) one posted from another origin or one
// that cannot be read.
func (s *Server) sameOriginForm(w http.ResponseWriter, r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" && o != "null" && strings.ToLower(o) != s.origin {
		s.pageError(w, 403, "cross-origin form submission refused")
		return false
	}
	if err := r.ParseForm(); err != nil {
		oe := bodyError(err, "bad form")
		s.pageError(w, oe.status, oe.Desc)
		return false
	}
	return true
}

func (s *Server) authorizePost(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !s.sameOriginForm(w, r) {
		return
	}
	p, err := s.loadRequest(ctx, "id = $1", r.PostForm.Get("request"), false)
	if err != nil {
		s.pageError(w, 400, err.Error())
		return
	}
	if !csrfOK(r, r.PostForm.Get("csrf"), p.csrfHash) {
		s.pageError(w, 403, "the consent form's CSRF token does not match (reload the authorization page from your application)")
		return
	}
	if r.PostForm.Get("action") != "allow" {
		s.db.Exec(ctx, "DELETE FROM auth_requests WHERE id = $1", p.id)
		s.redirectError(w, r, p.redirect, p.state, "access_denied", "the user denied the request")
		return
	}
	authURL, err := s.startUpstream(ctx, p, strings.TrimSpace(r.PostForm.Get("identifier")))
	if err != nil {
		s.pageError(w, 400, "signing in to your PDS failed: "+err.Error())
		return
	}
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// upstreamRequest is what the callback needs of the upstream sign-in.
type upstreamRequest struct {
	Info         oauth.AuthRequestData `json:"info"`
	Confidential bool                  `json:"confidential"`
	Scopes       []string              `json:"scopes"`
}

// authServerOf finds the PDS's authorization server metadata (https via
// indigo's resolver, public addresses only; a loopback PDS, when allowed,
// read directly).
func (s *Server) authServerOf(ctx context.Context, host string) (*oauth.AuthServerMetadata, *http.Client, error) {
	if !loopbackURL(host) {
		if !strings.HasPrefix(host, "https://") {
			return nil, nil, fmt.Errorf("PDS %s is not https", host)
		}
		res := &oauth.Resolver{Client: httpClient(true), UserAgent: userAgent}
		as, err := res.ResolveAuthServerURL(ctx, host)
		if err != nil {
			return nil, nil, err
		}
		meta, err := res.ResolveAuthServerMetadata(ctx, as)
		return meta, res.Client, err
	}
	if !s.cfg.AllowLoopback {
		return nil, nil, fmt.Errorf("%w: PDS %s is on plain http at a loopback address (a server on one machine may accept it with --allow-insecure-pds)", ErrInsecurePDS, host)
	}
	hc := httpClient(false)
	var pr oauth.ProtectedResourceMetadata
	if err := getJSON(ctx, hc, strings.TrimRight(host, "/")+"/.well-known/oauth-protected-resource", &pr); err != nil {
		return nil, nil, err
	}
	if len(pr.AuthorizationServers) == 0 || !loopbackURL(pr.AuthorizationServers[0]) {
		return nil, nil, fmt.Errorf("loopback PDS %s: no loopback authorization server", host)
	}
	var meta oauth.AuthServerMetadata
	if err := getJSON(ctx, hc, strings.TrimRight(pr.AuthorizationServers[0], "/")+"/.well-known/oauth-authorization-server", &meta); err != nil {
		return nil, nil, err
	}
	return &meta, hc, nil
}

func getJSON(ctx context.Context, hc *http.Client, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: HTTP %d", u, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(out)
}

// startUpstream sends the pushed authorization request for the user's
// identity (the permission set, or the granular scopes when the server
// cannot resolve it) and returns the URL to send the browser to.
func (s *Server) startUpstream(ctx context.Context, p *pendingRequest, ident string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*upstreamTimeout)
	defer cancel()
	atid, err := syntax.ParseAtIdentifier(strings.TrimPrefix(ident, "@"))
	if err != nil {
		return "", fmt.Errorf("%q is not a handle or DID", ident)
	}
	id, err := s.cfg.Directory.Lookup(ctx, atid)
	if err != nil {
		return "", fmt.Errorf("resolving %s: %w", ident, err)
	}
	host := strings.TrimRight(id.PDSEndpoint(), "/")
	if host == "" {
		return "", fmt.Errorf("%s has no PDS", id.DID)
	}
	meta, hc, err := s.authServerOf(ctx, host)
	if err != nil {
		return "", fmt.Errorf("the authorization server of %s: %w", host, err)
	}
	confidential := s.confidential()
	var info *oauth.AuthRequestData
	var scopes []string
	for i, sc := range [][]string{{"atproto", "include:" + s.permissionSet()}, granularScopes()} {
		scopes = sc
		cfg, err2 := s.clientConfig(confidential, sc)
		if err2 != nil {
			return "", err2
		}
		app := &oauth.ClientApp{Client: hc, Dir: s.cfg.Directory, Config: cfg, Store: oauth.NewMemStore()}
		info, err = app.SendAuthRequest(ctx, meta, sc, id.DID.String())
		if err != nil && i == 0 && strings.Contains(err.Error(), "invalid_scope") {
			continue // the permission set did not resolve: the granular scopes
		}
		break
	}
	if err != nil {
		return "", fmt.Errorf("pushed authorization request: %w", s.explainRefusal(err))
	}
	did := id.DID
	info.AccountDID = &did
	raw, _ := json.Marshal(upstreamRequest{Info: *info, Confidential: confidential, Scopes: scopes})
	if _, err := s.db.Exec(ctx, "UPDATE auth_requests SET upstream_state = $2, upstream = $3 WHERE id = $1",
		p.id, info.State, s.sealer.Seal("upstream-request:"+info.State, raw)); err != nil {
		return "", err
	}
	cfg, _ := s.clientConfig(confidential, scopes)
	cid := cfg.ClientID
	return meta.AuthorizationEndpoint + "?" + url.Values{"client_id": {cid}, "request_uri": {info.RequestURI}}.Encode(), nil
}

// callbackStore hands indigo's ProcessCallback the one pending request and
// keeps the session it produces.
type callbackStore struct {
	info oauth.AuthRequestData
	sess *oauth.ClientSessionData
}

func (c *callbackStore) GetSession(context.Context, syntax.DID, string) (*oauth.ClientSessionData, error) {
	return nil, errors.New("not kept here")
}
func (c *callbackStore) SaveSession(_ context.Context, d oauth.ClientSessionData) error {
	c.sess = &d
	return nil
}
func (c *callbackStore) DeleteSession(context.Context, syntax.DID, string) error { return nil }
func (c *callbackStore) GetAuthRequestInfo(_ context.Context, state string) (*oauth.AuthRequestData, error) {
	if state != c.info.State {
		return nil, errors.New("unknown state")
	}
	cp := c.info
	return &cp, nil
}
func (c *callbackStore) SaveAuthRequestInfo(context.Context, oauth.AuthRequestData) error { return nil }
func (c *callbackStore) DeleteAuthRequestInfo(context.Context, string) error              { return nil }

// callback is where the user's PDS sends the browser back: the upstream
// session is stored (sealed), and the MCP client gets its code (or, for a
// browser's sign-in to /view, the browser its view cookie: viewSignedIn).
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	p, err := s.loadRequest(ctx, "upstream_state = $1", q.Get("state"), true)
	if err != nil {
		s.pageError(w, 400, err.Error())
		return
	}
	cookie := csrfCookie
	fail := func(code, desc string) { s.redirectError(w, r, p.redirect, p.state, code, desc) }
	if p.view {
		cookie = viewCSRFCookie
		fail = func(_, desc string) { s.viewSignInPage(w, http.StatusBadRequest, "", desc) }
	}
	if ck, err := r.Cookie(cookie); err != nil || subtle.ConstantTimeCompare(hashToken(ck.Value), p.csrfHash) != 1 {
		s.pageError(w, 403, "this sign-in was not started in this browser")
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookie, Value: "", Path: "/", MaxAge: -1})
	if e := q.Get("error"); e != "" {
		fail("access_denied", "the sign-in at the PDS did not complete: "+e)
		return
	}
	raw, err := s.sealer.Open("upstream-request:"+q.Get("state"), p.upstream)
	if err != nil {
		s.pageError(w, 500, err.Error())
		return
	}
	var up upstreamRequest
	if err := json.Unmarshal(raw, &up); err != nil {
		s.pageError(w, 500, err.Error())
		return
	}
	cfg, err := s.clientConfig(up.Confidential, up.Scopes)
	if err != nil {
		s.pageError(w, 500, err.Error())
		return
	}
	st := &callbackStore{info: up.Info}
	// the PDS's client: on loopback only when allowed, whichever client we
	// are there (a confidential client also signs in to a loopback PDS in
	// the tests)
	hc := httpClient(!(s.cfg.AllowLoopback && loopbackURL(up.Info.AuthServerURL)))
	app := &oauth.ClientApp{Client: hc, Dir: s.cfg.Directory, Config: cfg, Store: st, Resolver: &oauth.Resolver{Client: hc, UserAgent: userAgent}}
	cctx, cancel := context.WithTimeout(ctx, 2*upstreamTimeout)
	defer cancel()
	if _, err := app.ProcessCallback(cctx, q); err != nil || st.sess == nil {
		fail("access_denied", fmt.Sprintf("completing the sign-in at the PDS failed: %v", s.explainRefusal(err)))
		return
	}
	if err := s.storeSession(ctx, &sessionRow{ClientID: cfg.ClientID, Callback: cfg.CallbackURL, Confidential: up.Confidential, Data: *st.sess}); err != nil {
		fail("server_error", "storing the session failed")
		return
	}
	s.forget(st.sess.AccountDID.String())
	if p.view {
		s.viewSignedIn(w, r, st.sess.AccountDID.String(), p.scope)
		return
	}
	code := newToken("code-")
	if _, err := s.db.Exec(ctx, `INSERT INTO auth_codes (code_hash, client_id, redirect_uri, code_challenge, scope, resource, did, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now() + interval '60 seconds')`,
		hashToken(code), p.clientID, p.redirect, p.challenge, p.scope, p.resource, st.sess.AccountDID.String()); err != nil {
		s.redirectError(w, r, p.redirect, p.state, "server_error", "issuing the code failed")
		return
	}
	u, _ := url.Parse(p.redirect)
	rq := u.Query()
	rq.Set("code", code)
	if p.state != "" {
		rq.Set("state", p.state)
	}
	rq.Set("iss", s.public)
	u.RawQuery = rq.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// forget drops an identity opened on this instance (a new sign-in replaced
// its session; other instances pick the new one up on their next refresh).
func (s *Server) forget(did string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.users, did)
}

// ---- /token and /revoke ----

// authClient authenticates the client of a token or revocation request.
func (s *Server) authClient(ctx context.Context, r *http.Request) (*regClient, error) {
	id, secret, basic := r.BasicAuth()
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id == "" {
		return nil, oerr(401, "invalid_client", "client_id is required")
	}
	c, err := s.client(ctx, id)
	if err != nil {
		var oe *oauthError
		if errors.As(err, &oe) {
			return nil, oerr(401, "invalid_client", "%s", oe.Desc)
		}
		return nil, err
	}
	if c.secretHash != nil {
		if secret == "" || subtle.ConstantTimeCompare(hashToken(secret), c.secretHash) != 1 {
			return nil, oerr(401, "invalid_client", "wrong or missing client secret")
		}
	}
	return c, nil
}

type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

func (s *Server) issue(ctx context.Context, tx pgx.Tx, clientID, did, scope, resource, family string) (*tokenResponse, error) {
	access, refresh := newToken("bmat_"), newToken("bmrt_")
	for _, t := range []struct {
		tok, kind string
		ttl       time.Duration
	}{{access, "access", s.accessTTL()}, {refresh, "refresh", s.refreshTTL()}} {
		if _, err := tx.Exec(ctx, `INSERT INTO tokens (hash, kind, client_id, did, scope, resource, family, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, now() + $8::interval)`, hashToken(t.tok), t.kind, clientID, did, scope, resource, family,
			fmt.Sprintf("%d milliseconds", t.ttl.Milliseconds())); err != nil {
			return nil, err
		}
	}
	return &tokenResponse{AccessToken: access, TokenType: "Bearer", ExpiresIn: int(s.accessTTL().Seconds()), RefreshToken: refresh, Scope: scope}, nil
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	if r.Method == http.MethodOptions {
		w.Header().Set("Access-Control-Allow-Headers", "Content-Type, Authorization")
		w.WriteHeader(204)
		return
	}
	if r.Method != http.MethodPost {
		s.writeOAuthError(w, oerr(405, "invalid_request", "POST a form"))
		return
	}
	if err := r.ParseForm(); err != nil {
		s.writeOAuthError(w, bodyError(err, "bad form"))
		return
	}
	ctx := r.Context()
	c, err := s.authClient(ctx, r)
	if err != nil {
		s.writeOAuthError(w, err)
		return
	}
	if res := r.PostForm.Get("resource"); res != "" && strings.TrimRight(res, "/") != s.resource {
		s.writeOAuthError(w, oerr(400, "invalid_target", "this server issues tokens only for the resource %s", s.resource))
		return
	}
	var out *tokenResponse
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		out, err = s.codeGrant(ctx, c, r.PostForm)
	case "refresh_token":
		out, err = s.refreshGrant(ctx, c, r.PostForm)
	default:
		err = oerr(400, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
	}
	if err != nil {
		s.writeOAuthError(w, err)
		return
	}
	writeJSON(w, 200, out)
}

func pkceOK(verifier, challenge string) bool {
	if len(verifier) < 43 || len(verifier) > 128 {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(oauth.S256CodeChallenge(verifier)), []byte(challenge)) == 1
}

func (s *Server) codeGrant(ctx context.Context, c *regClient, f url.Values) (*tokenResponse, error) {
	var out *tokenResponse
	var replay bool
	codeHash := hashToken(f.Get("code"))
	family := fmt.Sprintf("%x", codeHash[:16])
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var clientID, redirect, challenge, scope, resource, did string
		var expired, used bool
		err := tx.QueryRow(ctx, `SELECT client_id, redirect_uri, code_challenge, scope, resource, did, expires_at < now(), used_at IS NOT NULL
			FROM auth_codes WHERE code_hash = $1 FOR UPDATE`, codeHash).Scan(&clientID, &redirect, &challenge, &scope, &resource, &did, &expired, &used)
		if errors.Is(err, pgx.ErrNoRows) {
			return oerr(400, "invalid_grant", "unknown authorization code")
		}
		if err != nil {
			return err
		}
		if used {
			replay = true
			return oerr(400, "invalid_grant", "the authorization code was already used (the tokens issued for it are revoked)")
		}
		if expired {
			return oerr(400, "invalid_grant", "the authorization code expired")
		}
		if clientID != c.meta.ClientID {
			return oerr(400, "invalid_grant", "the code was issued to another client")
		}
		if f.Get("redirect_uri") != redirect {
			return oerr(400, "invalid_grant", "redirect_uri does not match the authorization request's")
		}
		if !pkceOK(f.Get("code_verifier"), challenge) {
			return oerr(400, "invalid_grant", "PKCE verification failed (code_verifier does not match the S256 code_challenge)")
		}
		if _, err := tx.Exec(ctx, "UPDATE auth_codes SET used_at = now() WHERE code_hash = $1", codeHash); err != nil {
			return err
		}
		out, err = s.issue(ctx, tx, clientID, did, scope, resource, family)
		return err
	})
	if replay {
		s.db.Exec(ctx, "UPDATE tokens SET revoked_at = now() WHERE family = $1 AND revoked_at IS NULL", family)
	}
	return out, err
}

func (s *Server) refreshGrant(ctx context.Context, c *regClient, f url.Values) (*tokenResponse, error) {
	var out *tokenResponse
	var replayFamily string
	h := hashToken(f.Get("refresh_token"))
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var clientID, did, scope, resource, family string
		var expired, revoked bool
		var rotated *time.Time
		var now time.Time
		err := tx.QueryRow(ctx, `SELECT client_id, did, scope, resource, family, expires_at < now(), revoked_at IS NOT NULL, rotated_at, now()
			FROM tokens WHERE hash = $1 AND kind = 'refresh' FOR UPDATE`, h).Scan(&clientID, &did, &scope, &resource, &family, &expired, &revoked, &rotated, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return oerr(400, "invalid_grant", "unknown refresh token")
		}
		if err != nil {
			return err
		}
		if clientID != c.meta.ClientID {
			return oerr(400, "invalid_grant", "the refresh token was issued to another client")
		}
		if revoked || expired {
			return oerr(400, "invalid_grant", "the refresh token was revoked or expired: authorize again")
		}
		if rotated != nil && now.Sub(*rotated) > s.grace() {
			replayFamily = family
			return oerr(400, "invalid_grant", "the refresh token was already used: every token of this grant is revoked; authorize again")
		}
		if want := f.Get("scope"); want != "" {
			for _, sc := range strings.Fields(want) {
				if !slices.Contains(strings.Fields(scope), sc) {
					return oerr(400, "invalid_scope", "scope %q was not granted", sc)
				}
			}
			scope = strings.Join(strings.Fields(want), " ")
		}
		if rotated == nil {
			if _, err := tx.Exec(ctx, "UPDATE tokens SET rotated_at = now() WHERE hash = $1", h); err != nil {
				return err
			}
		}
		var ok bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM atproto_sessions WHERE did = $1)", did).Scan(&ok); err != nil {
			return err
		}
		if !ok {
			return oerr(400, "invalid_grant", "the Bulleted sign-in behind this grant has ended: authorize again")
		}
		out, err = s.issue(ctx, tx, clientID, did, scope, resource, family)
		return err
	})
	if replayFamily != "" {
		s.db.Exec(ctx, "UPDATE tokens SET revoked_at = now() WHERE family = $1 AND revoked_at IS NULL", replayFamily)
	}
	return out, err
}

// revoke is RFC 7009: a refresh token revokes its whole grant, an access
// token itself. Unknown tokens are not an error.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		s.writeOAuthError(w, oerr(405, "invalid_request", "POST a form"))
		return
	}
	if err := r.ParseForm(); err != nil {
		s.writeOAuthError(w, bodyError(err, "bad form"))
		return
	}
	ctx := r.Context()
	c, err := s.authClient(ctx, r)
	if err != nil {
		s.writeOAuthError(w, err)
		return
	}
	h := hashToken(r.PostForm.Get("token"))
	var kind, family, clientID string
	err = s.db.QueryRow(ctx, "SELECT kind, family, client_id FROM tokens WHERE hash = $1", h).Scan(&kind, &family, &clientID)
	if err == nil && clientID == c.meta.ClientID {
		if kind == "refresh" {
			_, err = s.db.Exec(ctx, "UPDATE tokens SET revoked_at = now() WHERE family = $1 AND revoked_at IS NULL", family)
		} else {
			_, err = s.db.Exec(ctx, "UPDATE tokens SET revoked_at = now() WHERE hash = $1 AND revoked_at IS NULL", h)
		}
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		s.writeOAuthError(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(200)
}

// ---- the protected resource ----

func bearerToken(h string) (string, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

func (s *Server) challenge(w http.ResponseWriter, status int, code, desc string) {
	v := fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="%s"`, s.public, strings.Join(allScopes, " "))
	if code != "" {
		v += fmt.Sprintf(`, error="%s", error_description="%s"`, code, strings.ReplaceAll(desc, `"`, "'"))
	}
	w.Header().Set("WWW-Authenticate", v)
	writeJSON(w, status, map[string]string{"error": orStr(code, "unauthorized"), "error_description": desc})
}

func orStr(a, b string) string {
	if a == "" {
		return b
	}
	return a
}

// bearer checks the access token of every /mcp request: it must be known,
// unexpired, unrevoked, issued for this resource, and its user's upstream
// session must exist; a tool that writes needs the write scope.
func (s *Server) bearer(next http.Handler) http.Handler {
	allowed := map[string]bool{s.origin: true}
	for _, o := range s.cfg.AllowOrigins {
		if n, err := server.NormalizeOrigin(o); err == nil {
			allowed[n] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" {
			if n, err := server.NormalizeOrigin(o); err != nil || !allowed[n] {
				http.Error(w, "forbidden Origin "+o, http.StatusForbidden)
				return
			}
		}
		tok, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			s.challenge(w, 401, "", "an access token is required: authorize with this server's authorization server")
			return
		}
		ctx := r.Context()
		var id principal
		var resource string
		var live, hasSession bool
		err := s.db.QueryRow(ctx, `SELECT did, client_id, scope, resource, revoked_at IS NULL AND expires_at > now(),
			EXISTS (SELECT 1 FROM atproto_sessions a WHERE a.did = t.did)
			FROM tokens t WHERE hash = $1 AND kind = 'access'`, hashToken(tok)).Scan(&id.DID, &id.ClientID, &id.Scope, &resource, &live, &hasSession)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			s.challenge(w, 401, "invalid_token", "unknown access token")
			return
		case err != nil:
			s.unavailable(w, "token check", err)
			return
		case !live:
			s.challenge(w, 401, "invalid_token", "the access token expired or was revoked")
			return
		case resource != s.resource:
			s.challenge(w, 401, "invalid_token", "the access token was issued for another resource")
			return
		case !hasSession:
			s.challenge(w, 401, "invalid_token", "the Bulleted sign-in behind this token has ended: authorize again")
			return
		}
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(r.Body) // bounded by guardBodies
			if err != nil {
				oe := bodyError(err, "request body")
				http.Error(w, oe.Desc, oe.status)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			if name, ok := toolCall(body); ok && !s.readOnly[name] && !slices.Contains(strings.Fields(id.Scope), ScopeWrite) {
				v := fmt.Sprintf(`Bearer error="insufficient_scope", scope="%s %s", resource_metadata="%s/.well-known/oauth-protected-resource/mcp", error_description="the tool %s writes and needs the scope %s"`,
					ScopeRead, ScopeWrite, s.public, name, ScopeWrite)
				w.Header().Set("WWW-Authenticate", v)
				writeJSON(w, 403, map[string]string{"error": "insufficient_scope", "error_description": "the tool " + name + " needs the scope " + ScopeWrite})
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, identityKey{}, id)))
	})
}

// toolCall returns the tool a JSON-RPC tools/call names.
func toolCall(body []byte) (string, bool) {
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "tools/call" {
		return "", false
	}
	return m.Params.Name, true
}

// unavailable answers 503 with Retry-After and a generic reason, and logs
// what failed for the operator (never sent to the client: it may name the
// database's user, host and port).
func (s *Server) unavailable(w http.ResponseWriter, what string, err error) {
	s.logf("%s: %v", what, err)
	s.metrics.unavailable.Inc()
	w.Header().Set("Retry-After", "5")
	http.Error(w, "the service is temporarily unavailable; retry in a few seconds", http.StatusServiceUnavailable)
}

// dbDown reports whether err is the database not answering (a connection
// that failed or was lost), rather than a query's own error.
func dbDown(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P") // connection exception, operator intervention (shutdown)
	}
	var ce *pgconn.ConnectError
	return errors.As(err, &ce) || pgconn.SafeToRetry(err) || errors.Is(err, context.DeadlineExceeded) || isNetErr(err)
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}
