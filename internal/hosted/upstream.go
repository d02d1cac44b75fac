package hosted

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bluesky-social/indigo/atproto/atcrypto"
	"github.com/bluesky-social/indigo/atproto/auth/oauth"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/jackc/pgx/v5"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
)

// PermissionSet is what the upstream sign-in asks for.
const PermissionSet = "app.bulleted.authFull"

// collections of PermissionSet, asked for one by one when the
// authorization server cannot resolve the set.
var collections = []string{
	"app.bulleted.node", "app.bulleted.note", "app.bulleted.mirror",
	"app.bulleted.comment", "app.bulleted.commentPolicy", "app.bulleted.outline",
}

func granularScopes() []string {
	s := []string{"atproto"}
	for _, c := range collections {
		s = append(s, "repo:"+c)
	}
	return s
}

const (
	upstreamTimeout   = 30 * time.Second // every upstream OAuth request
	upstreamBodyLimit = 1 << 20
	userAgent         = "bulleted-mcp-hosted"
)

// ErrSignInAgain means the user's upstream session is gone (expired, revoked,
// or ended by the PDS): the MCP client must authorize again.
var ErrSignInAgain = errors.New("the Bulleted sign-in of this account has expired or was revoked: reconnect the server in your MCP client (authorize again)")

// ErrInsecurePDS: a PDS on plain http (loopback) without
// Config.AllowLoopback (serve's --allow-insecure-pds).
var ErrInsecurePDS = errors.New("insecure PDS refused")

// httpClient bounds every upstream OAuth request (timeout, body size);
// publicOnly refuses private and loopback addresses (SSRF).
func httpClient(publicOnly bool) *http.Client {
	return pds.BoundedClient(publicOnly, upstreamTimeout, upstreamBodyLimit)
}

func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackURL reports whether raw is plain http on a loopback host.
func loopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "http" && isLoopbackHost(u.Hostname())
}

// clientKey is the upstream client's signing key (private_key_jwt),
// created once and kept sealed in server_keys, shared by all instances.
func (s *Server) loadClientKey(ctx context.Context) error {
	k, err := atcrypto.GeneratePrivateKeyP256()
	if err != nil {
		return err
	}
	if _, err := s.db.Exec(ctx, "INSERT INTO server_keys (name, sealed) VALUES ('upstream-client', $1) ON CONFLICT (name) DO NOTHING",
		s.sealer.Seal("server-key:upstream-client", []byte(k.Multibase()))); err != nil {
		return err
	}
	var sealed []byte
	if err := s.db.QueryRow(ctx, "SELECT sealed FROM server_keys WHERE name = 'upstream-client'").Scan(&sealed); err != nil {
		return err
	}
	mb, err := s.sealer.Open("server-key:upstream-client", sealed)
	if err != nil {
		return err
	}
	key, err := atcrypto.ParsePrivateMultibase(string(mb))
	if err != nil {
		return err
	}
	pub, err := key.PublicKey()
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(pub.Multibase()))
	s.clientKey, s.keyID = key, "k-"+hex.EncodeToString(sum[:6])
	return nil
}

// allScopes is every scope the upstream client may ask for (its metadata).
func (s *Server) allScopes() []string {
	return append([]string{"atproto", "include:" + s.permissionSet()}, granularScopes()[1:]...)
}

func (s *Server) permissionSet() string {
	if s.cfg.PermissionSet != "" {
		return s.cfg.PermissionSet
	}
	return PermissionSet
}

// confidential reports whether this server signs in upstream as a
// confidential client: whenever its public URL is https (the PDS fetches
// the client ID, our metadata document, and our JWKS from there). On a
// plain http loopback public URL (tests) no PDS could fetch them: a
// loopback public client instead.
func (s *Server) confidential() bool { return strings.HasPrefix(s.public, "https://") }

// clientConfig is the upstream client: confidential (client ID = our
// metadata document, private_key_jwt), or, for a public URL on plain http
// loopback (tests), a loopback public client whose redirect is our callback.
func (s *Server) clientConfig(confidential bool, scopes []string) (*oauth.ClientConfig, error) {
	callback := s.public + "/oauth/callback"
	if !confidential {
		cfg := oauth.NewLocalhostConfig(callback, scopes)
		cfg.UserAgent = userAgent
		return &cfg, nil
	}
	cfg := oauth.NewPublicConfig(s.public+"/oauth/client-metadata.json", callback, scopes)
	cfg.UserAgent = userAgent
	if err := cfg.SetClientSecret(s.clientKey, s.keyID); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// ClientMetadata is the upstream client's metadata document.
func (s *Server) ClientMetadata() oauth.ClientMetadata {
	cfg, _ := s.clientConfig(true, s.allScopes())
	m := cfg.ClientMetadata()
	m.JWKSURI = strPtr(s.public + "/oauth/jwks.json")
	m.ClientName = strPtr("Bulleted MCP")
	m.ClientURI = strPtr(s.public)
	return m
}

func strPtr(s string) *string { return &s }

// JWKS is the upstream client's public keys.
func (s *Server) JWKS() oauth.JWKS {
	cfg, _ := s.clientConfig(true, s.allScopes())
	return cfg.PublicJWKS()
}

// ---- sessions in Postgres ----

type sessionRow struct {
	ClientID     string
	Callback     string
	Confidential bool
	Data         oauth.ClientSessionData
}

func (s *Server) sealSession(d *oauth.ClientSessionData) ([]byte, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	return s.sealer.Seal("session:"+d.AccountDID.String(), raw), nil
}

func (s *Server) openSession(did string, sealed []byte) (*oauth.ClientSessionData, error) {
	raw, err := s.sealer.Open("session:"+did, sealed)
	if err != nil {
		return nil, err
	}
	var d oauth.ClientSessionData
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// storeSession writes a new upstream session (a sign-in), replacing the
// identity's previous one.
func (s *Server) storeSession(ctx context.Context, row *sessionRow) error {
	sealed, err := s.sealSession(&row.Data)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `INSERT INTO atproto_sessions (did, session_id, client_id, callback, confidential, sealed)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (did) DO UPDATE SET session_id = excluded.session_id, client_id = excluded.client_id, callback = excluded.callback,
			confidential = excluded.confidential, sealed = excluded.sealed, version = atproto_sessions.version + 1, updated_at = now()`,
		row.Data.AccountDID.String(), row.Data.SessionID, row.ClientID, row.Callback, row.Confidential, sealed)
	return err
}

func (s *Server) loadSession(ctx context.Context, q pgx.Row, did string) (*sessionRow, error) {
	var r sessionRow
	var sealed []byte
	if err := q.Scan(&r.ClientID, &r.Callback, &r.Confidential, &sealed); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, ErrSignInAgain
		}
		return nil, err
	}
	d, err := s.openSession(did, sealed)
	if err != nil {
		return nil, err
	}
	r.Data = *d
	return &r, nil
}

const sessionColumns = "client_id, callback, confidential, sealed"

// sessionAuth is the atclient.AuthMethod of one identity's upstream
// session on this instance: DPoP-signed requests, and refreshes
// coordinated through Postgres: under the session row's lock (SELECT … FOR
// UPDATE), after reading the stored tokens again; when another instance
// refreshed first, its tokens are taken instead (the reference PDS ends the
// whole session when a rotated refresh token comes back). The refresh
// request is the one network call made under a lock, bounded by
// upstreamTimeout.
type sessionAuth struct {
	s   *Server
	did string

	sess atomic.Pointer[oauth.ClientSession]
	mu   sync.Mutex // one refresh at a time in this instance

	pmu     sync.Mutex
	pending *oauth.ClientSessionData
}

func (a *sessionAuth) newSession(r *sessionRow) (*oauth.ClientSession, error) {
	key, err := atcrypto.ParsePrivateMultibase(r.Data.DPoPPrivateKeyMultibase)
	if err != nil {
		return nil, fmt.Errorf("the session's DPoP key: %w", err)
	}
	data := r.Data
	data.Scopes = slices.Clone(r.Data.Scopes)
	var cfg *oauth.ClientConfig
	if r.Confidential {
		cfg, err = a.s.clientConfig(true, data.Scopes)
		if err != nil {
			return nil, err
		}
		cfg.ClientID, cfg.CallbackURL = r.ClientID, r.Callback
	} else {
		cfg = &oauth.ClientConfig{ClientID: r.ClientID, CallbackURL: r.Callback, Scopes: data.Scopes, UserAgent: userAgent}
	}
	return &oauth.ClientSession{
		Client:                 httpClient(!a.s.cfg.AllowLoopback || !loopbackURL(data.HostURL)),
		Config:                 cfg,
		Data:                   &data,
		DPoPPrivateKey:         key,
		PersistSessionCallback: a.persist,
	}, nil
}

// persist keeps what indigo hands over after a refresh (saved by refresh,
// in its transaction); nonces are not persisted (a lost one costs a retry).
func (a *sessionAuth) persist(_ context.Context, d *oauth.ClientSessionData) {
	cp := *d
	cp.Scopes = slices.Clone(d.Scopes)
	a.pmu.Lock()
	a.pending = &cp
	a.pmu.Unlock()
}

// Refreshes counts upstream refresh requests sent (tests).
var Refreshes atomic.Int64

func (a *sessionAuth) refresh(ctx context.Context, used string, force bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	sess := a.sess.Load()
	if at, _ := sess.GetHostAccessData(); !force && at != used {
		return nil // refreshed meanwhile on this instance
	}
	return pgx.BeginFunc(ctx, a.s.db, func(tx pgx.Tx) error {
		row, err := a.s.loadSession(ctx, tx.QueryRow(ctx, "SELECT "+sessionColumns+" FROM atproto_sessions WHERE did = $1 FOR UPDATE", a.did), a.did)
		if err != nil {
			return err
		}
		if row.Data.SessionID != sess.Data.SessionID || row.Data.RefreshToken != sess.Data.RefreshToken {
			ns, err := a.newSession(row) // another instance refreshed (or the user signed in again)
			if err != nil {
				return err
			}
			a.sess.Store(ns)
			return nil
		}
		a.pmu.Lock()
		a.pending = nil
		a.pmu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, upstreamTimeout)
		defer cancel()
		Refreshes.Add(1)
		if _, err := sess.RefreshTokens(rctx); err != nil {
			if rejected(err) {
				// the PDS ended the session: forget it, so that the user's
				// MCP tokens stop working and the client authorizes again
				tx.Exec(ctx, "DELETE FROM atproto_sessions WHERE did = $1", a.did)
				tx.Commit(ctx)
				return fmt.Errorf("%w (%v)", ErrSignInAgain, err)
			}
			return fmt.Errorf("refreshing the Bulleted sign-in: %w", a.s.explainRefusal(err))
		}
		a.pmu.Lock()
		d := a.pending
		a.pmu.Unlock()
		if d == nil {
			return errors.New("refreshing the Bulleted sign-in: no session data after the refresh")
		}
		sealed, err := a.s.sealSession(d)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE atproto_sessions SET sealed = $2, version = version + 1, updated_at = now() WHERE did = $1", a.did, sealed)
		return err
	})
}

// rejected reports whether a refresh error means the PDS ended the
// session. Not when it refused this server as a client (clientRefused), nor
// its DPoP proof (a nonce that moved again, a clock off): the reference PDS
// checks both before it reads the refresh token, which stays good.
func rejected(err error) bool {
	s := err.Error()
	if clientRefused(err) || strings.Contains(s, "use_dpop_nonce") || strings.Contains(s, "invalid_dpop_proof") {
		return false
	}
	return strings.Contains(s, "invalid_grant") || strings.Contains(s, "(HTTP 400)") || strings.Contains(s, "(HTTP 401)")
}

// clientRefused reports whether the PDS refused this server's client
// authentication: invalid_client (the client assertion: its key, or a key
// ID not in our JWKS) or invalid_client_metadata (our metadata document or
// JWKS could not be fetched or did not validate).
func clientRefused(err error) bool {
	return err != nil && strings.Contains(err.Error(), "invalid_client")
}

// explainRefusal adds to an upstream OAuth error what a client refusal
// means (the PDS's description is not passed on by indigo).
func (s *Server) explainRefusal(err error) error {
	if !clientRefused(err) {
		return err
	}
	return fmt.Errorf("%w (the PDS refused this server as an OAuth client: it could not fetch or verify %s/oauth/client-metadata.json, its keys %s/oauth/jwks.json, or the signature made with them; a fault of this server, not of your account: retry later or tell its operator)", err, s.public, s.public)
}

// DoWithAuth implements atclient.AuthMethod (pds.DPoP, with the refresh
// coordinated in Postgres).
func (a *sessionAuth) DoWithAuth(c *http.Client, req *http.Request, _ syntax.NSID) (*http.Response, error) {
	return pds.DPoP{
		Session: a.sess.Load,
		Refresh: func(ctx context.Context, used string) error { return a.refresh(ctx, used, false) },
		Ended:   func(err error) bool { return errors.Is(err, ErrSignInAgain) },
		Scope: func(detail string) string {
			return fmt.Sprintf("the Bulleted sign-in does not permit this (%s); it covers the app.bulleted collections only", detail)
		},
		What: "upstream request",
	}.Do(c, req)
}
