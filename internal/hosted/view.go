package hosted

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/bulleted-mcp/bulleted-mcp/server"
	"github.com/bulleted-mcp/bulleted-mcp/tools"
)

// /view for hosted users: the outline page of single-user serve (server's
// ViewHandler: the page, its event stream, Undo), for the signed-in user
// only, on their own engine.
//
// Sign-in, two ways, each ending in the page's cookie:
//   - in the browser: GET /view without a valid cookie answers (401) a
//     sign-in page, a plain form (no script) asking for a handle or DID;
//     POST /view/signin starts this server's own OAuth sign-in of that
//     person at their PDS (the flow MCP clients' users go through:
//     startUpstream, callback), bound to the browser by a CSRF token (a
//     cookie and the form's field, its hash kept with the request, checked
//     again at the callback) and to the request by the upstream state. The
//     callback stores the upstream session and sets the view cookie, scope
//     read and write (the person themselves), good for ViewCookieTTL.
//   - with the user's MCP access token: POST /view/session with
//     Authorization: Bearer ACCESS answers a link, PUBLIC/view?link=…, good
//     for ViewLinkTTL; opened in a browser it sets the view cookie, the
//     token's scope, never past the token's own expiry.
//
// Either way the cookie names a row of view_sessions, checked on every
// request (one indexed query): it stops working at once when the row
// expires, when the user's upstream sign-in ends, or when the access token
// it was exchanged from is revoked (alone, or with its grant). The cookie
// is sealed with the instance's key (any instance opens it, none can be
// forged without the key), names the user's DID and the row, and is
// HttpOnly, SameSite=Strict, path /view, Secure when the public URL is
// https. After either sign-in the browser is sent on to /view by a page of
// this site (a meta refresh, no script), not by a redirect: a
// SameSite=Strict cookie is not sent on a redirect another site started.
// A request bearing the access token itself is served too. No cookie, an
// expired, forged or unsealable one, a sign-in that has ended, or a
// cookie and a token of different users: 401. A change (POST /view/undo)
// needs the write scope besides the single-user rules (same Origin, JSON);
// the Host must be the public URL's (or an allowed origin's).

// ViewCookie is the hosted view's cookie; ViewCookieTTL and ViewLinkTTL
// bound it and the link that sets it.
const (
	ViewCookie    = "bmcp_view"
	ViewCookieTTL = time.Hour
	ViewLinkTTL   = time.Minute
	// viewStreams bounds one user's live pages on an instance; viewPoll is
	// how often a live page's repository is asked for its head (a request
	// to the user's PDS each time: slower than single-user serve's second)
	viewStreams = 4
	viewPoll    = 5 * time.Second
	// viewCSRFCookie binds a browser's sign-in to /view to the browser
	// (SameSite=Lax: it comes back with the PDS's redirect to the
	// callback); not the consent page's cookie, so that the two sign-ins
	// may run in one browser at once
	viewCSRFCookie = "bmcp_view_csrf"
)

// viewSeal is what a view link and a view cookie seal (for different
// purposes: one is never the other).
type viewSeal struct {
	DID   string `json:"did"`
	Scope string `json:"scope"`
	Exp   int64  `json:"exp"` // unix seconds
	// SID is the view_sessions row of the sign-in
	SID string `json:"sid,omitempty"`
}

const (
	purposeViewCookie = "view-cookie"
	purposeViewLink   = "view-link"
)

func (s *Server) sealView(purpose string, v viewSeal) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(s.sealer.Seal(purpose, b))
}

// errViewSeal is a link or cookie that does not open or has expired.
var errViewSeal = errors.New("not a valid sign-in for /view")

func (s *Server) openView(purpose, raw string) (viewSeal, error) {
	var v viewSeal
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err != nil {
		return v, fmt.Errorf("%w: %v", errViewSeal, err)
	}
	plain, err := s.sealer.Open(purpose, b)
	if err != nil {
		return v, fmt.Errorf("%w: %v", errViewSeal, err)
	}
	if err := json.Unmarshal(plain, &v); err != nil || v.DID == "" || v.SID == "" {
		return v, fmt.Errorf("%w: malformed", errViewSeal)
	}
	if time.Now().Unix() >= v.Exp {
		return v, fmt.Errorf("%w: expired", errViewSeal)
	}
	return v, nil
}

// viewHandler serves /view, /view/events, /view/undo, /view/session and
// /view/signin.
func (s *Server) viewHandler() http.Handler {
	hosts := append([]string{s.public}, s.cfg.AllowOrigins...)
	v := server.ViewHandler(s.mcp, nil, server.ViewOptions{Addr: s.public, AllowOrigins: hosts, HostOnly: true, Origin: s.public,
		MaxStreams: viewStreams, Poll: viewPoll, Authenticate: s.viewAuth, EnvFor: s.viewEnv})
	signIn := s.limited(s.limits.authorize, true, s.viewSignIn)
	// an access token exchanged for a sign-in link (a row each): as
	// /token, per client address
	session := s.limited(s.limits.token, false, s.viewSession)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/view/session":
			session(w, r)
		case "/view/signin":
			signIn(w, r)
		default:
			v.ServeHTTP(w, r)
		}
	})
}

// newViewSession records a sign-in to /view (the row its cookie names).
func (s *Server) newViewSession(ctx context.Context, did, scope string, tokenHash []byte, exp time.Time) (string, error) {
	id := newToken("vs-")
	_, err := s.db.Exec(ctx, "INSERT INTO view_sessions (id, did, scope, token_hash, expires_at) VALUES ($1, $2, $3, $4, $5)", id, did, scope, tokenHash, exp)
	return id, err
}

// setViewCookie signs the browser in to /view (the sign-in v) and answers
// the page that sends it on to /view.
func (s *Server) setViewCookie(w http.ResponseWriter, v viewSeal) {
	v.Exp = time.Now().Add(ViewCookieTTL).Unix()
	http.SetCookie(w, &http.Cookie{Name: ViewCookie, Value: s.sealView(purposeViewCookie, v), Path: "/view", MaxAge: int(ViewCookieTTL.Seconds()),
		HttpOnly: true, Secure: strings.HasPrefix(s.public, "https://"), SameSite: http.SameSiteStrictMode})
	pageHeaders(w)
	viewSignedIn.Execute(w, v.DID)
}

// accessToken checks an access token as /mcp does and returns its user.
func (s *Server) accessToken(ctx context.Context, tok string) (principal, time.Time, string, error) {
	var id principal
	var resource string
	var exp time.Time
	var live, hasSession bool
	err := s.db.QueryRow(ctx, `SELECT did, client_id, scope, resource, expires_at, revoked_at IS NULL AND expires_at > now(),
		EXISTS (SELECT 1 FROM atproto_sessions a WHERE a.did = t.did)
		FROM tokens t WHERE hash = $1 AND kind = 'access'`, hashToken(tok)).Scan(&id.DID, &id.ClientID, &id.Scope, &resource, &exp, &live, &hasSession)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return id, exp, "unknown access token", nil
	case err != nil:
		return id, exp, "", err
	case !live:
		return id, exp, "the access token expired or was revoked", nil
	case resource != s.resource:
		return id, exp, "the access token was issued for another resource", nil
	case !hasSession:
		return id, exp, "the Bulleted sign-in behind this token has ended: authorize again", nil
	}
	return id, exp, "", nil
}

// viewSession exchanges an access token for a link that signs a browser
// in to /view.
func (s *Server) viewSession(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodPost {
		http.Error(w, "use POST with Authorization: Bearer ACCESS_TOKEN", http.StatusMethodNotAllowed)
		return
	}
	if o := r.Header.Get("Origin"); o != "" {
		if n, err := server.NormalizeOrigin(o); err != nil || n != s.origin {
			http.Error(w, "forbidden Origin "+o, http.StatusForbidden)
			return
		}
	}
	tok, ok := bearerToken(r.Header.Get("Authorization"))
	if !ok {
		s.challenge(w, 401, "", "an access token is required: the one your MCP client holds for this server")
		return
	}
	id, exp, bad, err := s.accessToken(r.Context(), tok)
	if err != nil {
		s.unavailable(w, "view sign-in", err)
		return
	}
	if bad != "" {
		s.challenge(w, 401, "invalid_token", bad)
		return
	}
	// the sign-in lasts as long as a cookie set from the link at its last
	// moment, never past the token
	sid, err := s.newViewSession(r.Context(), id.DID, id.Scope, hashToken(tok), minTime(time.Now().Add(ViewLinkTTL+ViewCookieTTL), exp))
	if err != nil {
		s.unavailable(w, "view sign-in", err)
		return
	}
	link := s.sealView(purposeViewLink, viewSeal{DID: id.DID, Scope: id.Scope, SID: sid, Exp: min(time.Now().Add(ViewLinkTTL).Unix(), exp.Unix())})
	writeJSON(w, 200, map[string]any{"url": s.public + "/view?link=" + link, "expires_in": int(ViewLinkTTL.Seconds()), "did": id.DID})
}

var viewSignedIn = template.Must(template.New("v").Parse(`<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="0;url=/view"><title>Bulleted: signed in</title></head>
<body><p>Signed in as <code>{{.}}</code>. <a href="/view">Open your outline</a>.</p></body></html>`))

// viewAuth is the hosted view's sign-in (server.ViewOptions.Authenticate).
func (s *Server) viewAuth(w http.ResponseWriter, r *http.Request) (context.Context, string, bool) {
	ctx := r.Context()
	deny := func(why string) (context.Context, string, bool) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="bulleted-mcp /view"`)
		http.Error(w, why+": sign in at /view, or get a link from POST /view/session with your access token (docs/hosted.md, \"Your outline in a browser\")", http.StatusUnauthorized)
		return nil, "", false
	}
	if link := r.URL.Query().Get("link"); link != "" && r.URL.Path == "/view" && r.Method == http.MethodGet {
		v, err := s.openView(purposeViewLink, link)
		if err != nil {
			return deny("this link is not valid (expired, already replaced, or not from this server)")
		}
		// a page, not a redirect: a SameSite=Strict cookie is not sent on a
		// redirect a link from another site started; the refresh is this
		// site's own navigation (the page has no script)
		s.setViewCookie(w, v)
		return nil, "", false
	}
	var id principal
	tok, hasTok := bearerToken(r.Header.Get("Authorization"))
	if hasTok {
		got, _, bad, err := s.accessToken(ctx, tok)
		if err != nil {
			s.unavailable(w, "view sign-in", err)
			return nil, "", false
		}
		if bad != "" {
			return deny(bad)
		}
		id = got
	}
	// the page itself, without a token: the sign-in page when not signed in
	signInPage := !hasTok && r.URL.Path == "/view" && (r.Method == http.MethodGet || r.Method == http.MethodHead)
	if c, err := r.Cookie(ViewCookie); err == nil {
		v, err := s.openView(purposeViewCookie, c.Value)
		if err != nil {
			if signInPage {
				s.viewSignInPage(w, http.StatusUnauthorized, "", "Your sign-in has expired: sign in again.")
				return nil, "", false
			}
			return deny("your /view sign-in is not valid or has expired")
		}
		if hasTok && v.DID != id.DID {
			return deny("the access token and the /view cookie are different users'")
		}
		if !hasTok {
			// the sign-in behind the cookie must still be there: its row
			// unexpired, the user's upstream session, and the access token
			// it came from (if any) not revoked
			var scope string
			err := s.db.QueryRow(ctx, `SELECT v.scope FROM view_sessions v WHERE v.id = $1 AND v.did = $2 AND v.expires_at > now()
				AND EXISTS (SELECT 1 FROM atproto_sessions a WHERE a.did = v.did)
				AND (v.token_hash IS NULL OR EXISTS (SELECT 1 FROM tokens t WHERE t.hash = v.token_hash AND t.revoked_at IS NULL))`, v.SID, v.DID).Scan(&scope)
			switch {
			case errors.Is(err, pgx.ErrNoRows) && signInPage:
				s.viewSignInPage(w, http.StatusUnauthorized, "", "Your sign-in has ended (expired, revoked, or signed out): sign in again.")
				return nil, "", false
			case errors.Is(err, pgx.ErrNoRows):
				return deny("the sign-in behind this page has ended (expired, revoked, or signed out)")
			case err != nil:
				s.unavailable(w, "view sign-in", err)
				return nil, "", false
			}
			id = principal{DID: v.DID, ClientID: "view", Scope: scope}
		}
	} else if signInPage {
		s.viewSignInPage(w, http.StatusUnauthorized, "", "")
		return nil, "", false
	} else if !hasTok {
		return deny("not signed in")
	}
	if r.URL.Path == "/view/undo" && !slices.Contains(strings.Fields(id.Scope), ScopeWrite) {
		http.Error(w, "forbidden: undo writes, and this sign-in has only the scope "+id.Scope, http.StatusForbidden)
		return nil, "", false
	}
	return context.WithValue(ctx, identityKey{}, id), id.DID, true
}

// viewEnv is the environment whose tree a live page watches: the request's
// user, held while it is read (not counted as a tool call). What failed is
// logged for the operator; the page is told only what it may know.
func (s *Server) viewEnv(ctx context.Context) (*tools.Env, func(), error) {
	id, ok := identityFrom(ctx)
	if !ok {
		return nil, nil, errors.New("no signed-in user for this page")
	}
	u, err := s.acquire(ctx, id.DID)
	if err != nil {
		if errors.Is(err, ErrSignInAgain) {
			return nil, nil, err
		}
		s.logf("view: opening %s: %v", id.DID, err)
		return nil, nil, errors.New("opening your repository failed; the page tries again")
	}
	return u.env, func() { s.release(u) }, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

var viewSignInForm = template.Must(template.New("s").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Bulleted: sign in to see your outline</title>
<style>body{font:16px system-ui,sans-serif;max-width:34em;margin:3em auto;padding:0 1em}</style></head>
<body><h1>Sign in to see your outline</h1>
{{if .Error}}<p role="alert"><strong>{{.Error}}</strong></p>{{end}}
<form method="post" action="/view/signin"><input type="hidden" name="csrf" value="{{.CSRF}}">
<p><label>Your handle or DID: <input name="identifier" required autocomplete="username" placeholder="you.bsky.social" value="{{.Identifier}}"></label></p>
<p>You will sign in at your own server (PDS), which asks you to grant Bulleted access.</p>
<button type="submit">Sign in</button>
</form></body></html>`))

// viewSignInPage answers the sign-in page (status: 401 for a page asked
// for without a sign-in), with a new CSRF token in its form and its cookie.
func (s *Server) viewSignInPage(w http.ResponseWriter, status int, ident, msg string) {
	csrf := newToken("")
	http.SetCookie(w, &http.Cookie{Name: viewCSRFCookie, Value: csrf, Path: "/", HttpOnly: true, Secure: strings.HasPrefix(s.public, "https:"),
		SameSite: http.SameSiteLaxMode, MaxAge: int(requestTTL.Seconds())})
	pageHeaders(w)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="bulleted-mcp /view"`)
	}
	w.WriteHeader(status)
	viewSignInForm.Execute(w, map[string]string{"CSRF": csrf, "Identifier": ident, "Error": msg})
}

// viewSignIn is the sign-in form's POST: it records the request (its CSRF
// token's hash) and sends the browser to the person's PDS.
func (s *Server) viewSignIn(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Redirect(w, r, "/view", http.StatusSeeOther)
		return
	}
	if !s.sameOriginForm(w, r) {
		return
	}
	ident := strings.TrimSpace(r.PostForm.Get("identifier"))
	csrf := r.PostForm.Get("csrf")
	if ck, err := r.Cookie(viewCSRFCookie); err != nil || csrf == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(csrf)) != 1 {
		s.viewSignInPage(w, http.StatusForbidden, ident, "This form has expired or was not sent from this browser's sign-in page: try again.")
		return
	}
	ctx := r.Context()
	p := &pendingRequest{id: newToken("ar-"), redirect: "/view", scope: ScopeRead + " " + ScopeWrite, resource: s.resource, view: true}
	if _, err := s.db.Exec(ctx, `INSERT INTO auth_requests (id, client_id, redirect_uri, code_challenge, scope, resource, csrf_hash, expires_at, view)
		VALUES ($1, NULL, $2, '', $3, $4, $5, now() + interval '10 minutes', true)`, p.id, p.redirect, p.scope, p.resource, hashToken(csrf)); err != nil {
		s.unavailable(w, "view sign-in", err)
		return
	}
	authURL, err := s.startUpstream(ctx, p, ident)
	if err != nil {
		s.db.Exec(ctx, "DELETE FROM auth_requests WHERE id = $1", p.id)
		s.viewSignInPage(w, http.StatusBadRequest, ident, "Signing in at your PDS failed: "+err.Error())
		return
	}
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// viewSignedIn ends a browser's sign-in to /view at the callback: the
// view cookie, and the page that sends the browser on to /view.
func (s *Server) viewSignedIn(w http.ResponseWriter, r *http.Request, did, scope string) {
	exp := time.Now().Add(ViewCookieTTL)
	sid, err := s.newViewSession(r.Context(), did, scope, nil, exp)
	if err != nil {
		s.unavailable(w, "view sign-in", err)
		return
	}
	s.setViewCookie(w, viewSeal{DID: did, Scope: scope, SID: sid})
}
