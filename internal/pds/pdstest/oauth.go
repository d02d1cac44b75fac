package pdstest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"
)

// LexiconAuthorityEnv names a directory of lexicon JSON files for
// e2e/pds.mjs: an account lexicons.test publishes them and is made the
// PDS's lexicon authority, so that OAuth include: scopes resolve offline.
// StartServer passes the test process's environment on, so setting it
// before the server starts (in an init function or TestMain) is enough.
const LexiconAuthorityEnv = "LEXICON_AUTHORITY_DIR"

// PermissionSets is the directory holding the app's two permission-set
// lexicons (app.bulleted.authFull, app.bulleted.appAccess), for
// LexiconAuthorityEnv.
func PermissionSets() (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "internal", "pds", "pdstest", "permissionsets"), nil
}

// apiPrefix is where the reference authorization page's JSON API lives.
const apiPrefix = "/@atproto/oauth-provider/~api"

// browser plays the user's browser on the reference PDS's authorization
// page (oauth-provider 0.22): it keeps the page's cookies itself, because
// the provider marks them secure and Go's cookie jar will not send secure
// cookies over http.
type browser struct {
	hc      *http.Client
	cookies map[string]string
	issuer  string // scheme://host of the authorization page
	page    string // the authorization page URL (the API's Referer)
}

func (b *browser) keep(resp *http.Response) {
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 || c.Value == "" {
			delete(b.cookies, c.Name)
			continue
		}
		b.cookies[c.Name] = c.Value
	}
}

func (b *browser) cookieHeader() string {
	var parts []string
	for k, v := range b.cookies {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, "; ")
}

// navigate GETs u as a top-level navigation from site ("cross-site" when
// arriving from the app, "same-origin" within the page).
func (b *browser) navigate(ctx context.Context, u, site string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Sec-Fetch-Mode", "navigate")
	req.Header.Set("Sec-Fetch-Dest", "document")
	req.Header.Set("Sec-Fetch-Site", site)
	req.Header.Set("Accept", "text/html")
	if site == "same-origin" {
		req.Header.Set("Referer", b.page)
	}
	if len(b.cookies) > 0 {
		req.Header.Set("Cookie", b.cookieHeader())
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	b.keep(resp)
	return resp, body, err
}

// api POSTs in to the page's JSON API as the page's own script would.
func (b *browser) api(ctx context.Context, endpoint string, in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.issuer+apiPrefix+endpoint, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Sec-Fetch-Mode", "same-origin")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("Sec-Fetch-Dest", "empty")
	req.Header.Set("Origin", b.issuer)
	req.Header.Set("Referer", b.page)
	req.Header.Set("x-csrf-token", b.cookies["csrf-token"])
	req.Header.Set("Cookie", b.cookieHeader())
	resp, err := b.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	b.keep(resp)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", endpoint, resp.StatusCode, body)
	}
	return json.Unmarshal(body, out)
}

// Authorize does in a test what the user does in the browser: it opens the
// authorization page authURL, signs in as a with its account password,
// consents, and follows the redirect to the client's redirect_uri (the
// loopback callback), returning once the callback answered.
func (s *Server) Authorize(ctx context.Context, authURL string, a *Account) error {
	loc, err := ConsentAt(ctx, authURL, a)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc, nil)
	if err != nil {
		return err
	}
	cb, err := noRedirect.Do(req)
	if err != nil {
		return fmt.Errorf("callback %s: %w", loc, err)
	}
	defer cb.Body.Close()
	cbBody, _ := io.ReadAll(io.LimitReader(cb.Body, 1<<16))
	if cb.StatusCode != http.StatusOK {
		return fmt.Errorf("callback %s: HTTP %d: %s", loc, cb.StatusCode, cbBody)
	}
	return nil
}

// noRedirect is the browser's client: it stops at each redirect.
var noRedirect = &http.Client{
	Timeout:       30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// ConsentAt does at the reference PDS's authorization page authURL what
// the user does in the browser: signs in as a with its account password
// and consents. It returns where the PDS then sends the browser (the
// client's redirect_uri with the code), without going there.
func ConsentAt(ctx context.Context, authURL string, a *Account) (string, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", err
	}
	b := &browser{hc: noRedirect, cookies: map[string]string{}, issuer: u.Scheme + "://" + u.Host, page: authURL}
	resp, body, err := b.navigate(ctx, authURL, "cross-site")
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("authorization page: HTTP %d: %.500s", resp.StatusCode, body)
	}
	if b.cookies["csrf-token"] == "" {
		return "", fmt.Errorf("authorization page set no csrf-token cookie (cookies: %v)", resp.Header.Values("Set-Cookie"))
	}
	var signIn struct {
		Account struct {
			DID string `json:"did"`
		} `json:"account"`
	}
	if err := b.api(ctx, "/sign-in", map[string]any{
		"locale": "en", "username": a.Handle, "password": a.Password, "remember": true}, &signIn); err != nil {
		return "", err
	}
	if signIn.Account.DID != a.DID.String() {
		return "", fmt.Errorf("signed in as %q, want %s", signIn.Account.DID, a.DID)
	}
	var consent struct {
		URL string `json:"url"`
	}
	if err := b.api(ctx, "/consent", map[string]any{"did": a.DID.String()}, &consent); err != nil {
		return "", err
	}
	if consent.URL == "" {
		return "", fmt.Errorf("consent returned no redirect URL")
	}
	// the page navigates to the redirect endpoint, which sends the browser
	// on to the client
	resp, body, err = b.navigate(ctx, consent.URL, "same-origin")
	if err != nil {
		return "", err
	}
	loc := resp.Header.Get("Location")
	if resp.StatusCode < 300 || resp.StatusCode > 399 || loc == "" {
		return "", fmt.Errorf("redirect endpoint: HTTP %d without a Location: %.500s", resp.StatusCode, body)
	}
	return loc, nil
}
