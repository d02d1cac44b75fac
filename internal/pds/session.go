package pds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atclient"
	"github.com/bluesky-social/indigo/atproto/identity"
	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// PasswordEnv is the environment variable that holds the app password. It is
// never a flag, never printed and never logged.
const PasswordEnv = "BULLETED_APP_PASSWORD"

// ErrNoPassword means there is no usable saved session and no password.
var ErrNoPassword = errors.New("no saved session and " + PasswordEnv + " is not set")

// Login says how to reach and authenticate to the user's PDS.
type Login struct {
	PDS        string // PDS URL; empty: resolved from the identifier
	Identifier string // handle or DID
	Password   string // app password (from PasswordEnv)
	Dir        string // data directory: session.json (mode 0600) is kept here
	Directory  identity.Directory
	HTTP       *http.Client // optional: default DefaultHTTPClient
}

type savedSession struct {
	Identifier string                       `json:"identifier"`
	Session    atclient.PasswordSessionData `json:"session"`
}

// SessionFile is the path of the saved session in dir.
func SessionFile(dir string) string { return filepath.Join(dir, "session.json") }

// sessionMu serialises session file writes (refresh callbacks may come from
// several clients).
var sessionMu sync.Mutex

func saveSession(path string, s savedSession) error {
	sessionMu.Lock()
	defer sessionMu.Unlock()
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, raw, 0o600)
}

// Open returns an authenticated client: the saved session if it still
// works for this PDS and identifier, else a new login with the app
// password. Refreshed tokens are written back to the session file.
func (l Login) Open(ctx context.Context) (*atclient.APIClient, syntax.DID, error) {
	host := strings.TrimRight(l.PDS, "/")
	if host == "" {
		if l.Directory == nil {
			return nil, "", errors.New("no PDS URL and no identity directory to find it")
		}
		atid, err := syntax.ParseAtIdentifier(l.Identifier)
		if err != nil {
			return nil, "", fmt.Errorf("identifier %q: %w", l.Identifier, err)
		}
		ident, err := l.Directory.Lookup(ctx, atid)
		if err != nil {
			return nil, "", fmt.Errorf("resolving %s: %w", l.Identifier, err)
		}
		host = ident.PDSEndpoint()
		if host == "" {
			return nil, "", fmt.Errorf("%s has no PDS in its DID document", l.Identifier)
		}
	}
	path := SessionFile(l.Dir)
	save := func(_ context.Context, d atclient.PasswordSessionData) {
		// a failed save only costs a new login after a restart
		_ = saveSession(path, savedSession{Identifier: l.Identifier, Session: d})
	}
	if raw, err := os.ReadFile(path); err == nil {
		var s savedSession
		if json.Unmarshal(raw, &s) == nil && s.Identifier == l.Identifier && s.Session.Host == host {
			c := l.client(host)
			c.Auth = &atclient.PasswordAuth{Session: s.Session, RefreshCallback: save}
			c.AccountDID = &s.Session.AccountDID
			if err := call(ctx, c, http.MethodGet, "com.atproto.server.getSession", nil, nil, nil, nil); err == nil {
				return c, s.Session.AccountDID, nil
			}
		}
	}
	if l.Password == "" {
		return nil, "", ErrNoPassword
	}
	// atclient's LoginWithPasswordHost would use http.DefaultClient, which
	// has no timeout
	c := l.client(host)
	var out struct {
		AccessJwt  string `json:"accessJwt"`
		RefreshJwt string `json:"refreshJwt"`
		DID        string `json:"did"`
	}
	in := map[string]string{"identifier": l.Identifier, "password": l.Password}
	if err := call(ctx, c, http.MethodPost, "com.atproto.server.createSession", nil, in, &out, nil); err != nil {
		return nil, "", fmt.Errorf("login as %s on %s: %w", l.Identifier, host, err)
	}
	did, err := syntax.ParseDID(out.DID)
	if err != nil {
		return nil, "", fmt.Errorf("login as %s on %s: %w", l.Identifier, host, err)
	}
	session := atclient.PasswordSessionData{AccessToken: out.AccessJwt, RefreshToken: out.RefreshJwt, AccountDID: did, Host: host}
	c.Auth = &atclient.PasswordAuth{Session: session, RefreshCallback: save}
	c.AccountDID = &did
	if err := saveSession(path, savedSession{Identifier: l.Identifier, Session: session}); err != nil {
		return nil, "", fmt.Errorf("saving the session: %w", err)
	}
	return c, did, nil
}

// client is an XRPC client of host through l.HTTP (default
// DefaultHTTPClient).
func (l Login) client(host string) *atclient.APIClient { return NewAPIClient(host, l.HTTP) }

// Resolver finds identities: handles through the user's own PDS
// (com.atproto.identity.resolveHandle, which also knows the handles it hosts)
// and then the identity directory; DIDs to PDS endpoints through the
// directory (its PLC URL is configurable for a private PLC).
type Resolver struct {
	Client    *atclient.APIClient // the user's PDS (may be nil)
	Directory identity.Directory
}

// ResolveHandle implements outline.Resolver.
func (r *Resolver) ResolveHandle(ctx context.Context, handle string) (syntax.DID, error) {
	h, err := syntax.ParseHandle(strings.TrimPrefix(handle, "@"))
	if err != nil {
		return "", err
	}
	if r.Client != nil {
		var out struct {
			DID string `json:"did"`
		}
		if err := call(ctx, r.Client, http.MethodGet, "com.atproto.identity.resolveHandle", map[string][]string{"handle": {h.String()}}, nil, &out, nil); err == nil {
			return syntax.ParseDID(out.DID)
		}
	}
	if r.Directory == nil {
		return "", fmt.Errorf("cannot resolve %s offline", h)
	}
	ident, err := r.Directory.LookupHandle(ctx, h)
	if err != nil {
		return "", err
	}
	return ident.DID, nil
}

// Endpoint returns the PDS URL of did.
func (r *Resolver) Endpoint(ctx context.Context, did syntax.DID) (string, error) {
	if r.Directory == nil {
		return "", fmt.Errorf("cannot find the PDS of %s offline", did)
	}
	ident, err := r.Directory.LookupDID(ctx, did)
	if err != nil {
		return "", err
	}
	if ep := ident.PDSEndpoint(); ep != "" {
		return ep, nil
	}
	return "", fmt.Errorf("%s has no PDS in its DID document", did)
}

// Directory returns an identity directory using plcURL ("" = the public
// PLC directory), through NewHTTPClient (every lookup bounded by
// CallTimeout and MaxJSON) and cached (IdentityCacheSize identities for
// IdentityTTL, failures for IdentityErrTTL).
func Directory(plcURL string) identity.Directory {
	return DirectoryWith(plcURL, nil)
}

// DirectoryWith is Directory with another HTTP client (nil:
// DefaultHTTPClient).
func DirectoryWith(plcURL string, hc *http.Client) identity.Directory {
	if hc == nil {
		hc = defaultClient
	}
	d := &identity.BaseDirectory{PLCURL: plcURL, UserAgent: "bulleted-mcp", HTTPClient: *hc}
	if plcURL == "" {
		d.PLCURL = identity.DefaultPLCURL
	}
	return identity.NewCacheDirectory(d, IdentityCacheSize, IdentityTTL, IdentityErrTTL, IdentityErrTTL)
}
