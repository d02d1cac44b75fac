package hosted

import (
	"context"
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
// Sign-in: the user's MCP access token (issued by this server after the
// OAuth flow through their PDS) is exchanged for the page's cookie. POST
// /view/session with Authorization: Bearer ACCESS answers a link,
// PUBLIC/view?link=…, good for ViewLinkTTL; opened in a browser it sets
// the view cookie and sends the browser on to /view. The cookie is sealed
// with the instance's key (any instance opens it, none can be forged
// without the key), names the user's DID, the token's scope and its
// expiry (ViewCookieTTL, never past the token's own), and is HttpOnly,
// SameSite=Strict, path /view, Secure when the public URL is https. A
// request bearing the access token itself is served too. No cookie, an
// expired, forged or unsealable one, a user whose sign-in has ended, or a
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
)

// viewSeal is what a view link and a view cookie seal (for different
// purposes: one is never the other).
type viewSeal struct {
	DID   string `json:"did"`
	Scope string `json:"scope"`
	Exp   int64  `json:"exp"` // unix seconds
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
	if err := json.Unmarshal(plain, &v); err != nil || v.DID == "" {
		return v, fmt.Errorf("%w: malformed", errViewSeal)
	}
	if time.Now().Unix() >= v.Exp {
		return v, fmt.Errorf("%w: expired", errViewSeal)
	}
	return v, nil
}

// viewHandler serves /view, /view/events, /view/undo and /view/session.
func (s *Server) viewHandler() http.Handler {
	hosts := append([]string{s.public}, s.cfg.AllowOrigins...)
	v := server.ViewHandler(s.mcp, nil, server.ViewOptions{Addr: s.public, AllowOrigins: hosts, HostOnly: true, Origin: s.public,
		MaxStreams: viewStreams, Poll: viewPoll, Authenticate: s.viewAuth, EnvFor: s.viewEnv})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/view/session" {
			s.viewSession(w, r)
			return
		}
		v.ServeHTTP(w, r)
	})
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
	link := s.sealView(purposeViewLink, viewSeal{DID: id.DID, Scope: id.Scope, Exp: min(time.Now().Add(ViewLinkTTL).Unix(), exp.Unix())})
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
		http.Error(w, why+": get a link from POST /view/session with your access token (docs/hosted.md, \"Your outline in a browser\")", http.StatusUnauthorized)
		return nil, "", false
	}
	if link := r.URL.Query().Get("link"); link != "" && r.URL.Path == "/view" && r.Method == http.MethodGet {
		v, err := s.openView(purposeViewLink, link)
		if err != nil {
			return deny("this link is not valid (expired, already replaced, or not from this server)")
		}
		v.Exp = time.Now().Add(ViewCookieTTL).Unix()
		http.SetCookie(w, &http.Cookie{Name: ViewCookie, Value: s.sealView(purposeViewCookie, v), Path: "/view", MaxAge: int(ViewCookieTTL.Seconds()),
			HttpOnly: true, Secure: strings.HasPrefix(s.public, "https://"), SameSite: http.SameSiteStrictMode})
		// a page, not a redirect: a SameSite=Strict cookie is not sent on a
		// redirect a link from another site started; the refresh is this
		// site's own navigation (the page has no script)
		pageHeaders(w)
		viewSignedIn.Execute(w, v.DID)
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
	if c, err := r.Cookie(ViewCookie); err == nil {
		v, err := s.openView(purposeViewCookie, c.Value)
		if err != nil {
			return deny("your /view sign-in is not valid or has expired")
		}
		if hasTok && v.DID != id.DID {
			return deny("the access token and the /view cookie are different users'")
		}
		if !hasTok {
			// the sign-in behind the cookie must still be there
			var ok bool
			if err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM atproto_sessions WHERE did = $1)`, v.DID).Scan(&ok); err != nil {
				s.unavailable(w, "view sign-in", err)
				return nil, "", false
			}
			if !ok {
				return deny("the Bulleted sign-in behind this page has ended")
			}
			id = principal{DID: v.DID, ClientID: "view", Scope: v.Scope}
		}
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
