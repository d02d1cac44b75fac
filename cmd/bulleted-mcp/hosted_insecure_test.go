package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/bluesky-social/indigo/atproto/auth/oauth"

	"github.com/bulleted-mcp/bulleted-mcp/internal/hosted/pgtest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// TestHostedInsecurePDSRefusedWithPublicURL: --allow-insecure-pds with a
// public URL that is not loopback is refused at start, naming the flag.
func TestHostedInsecurePDSRefusedWithPublicURL(t *testing.T) {
	var stderr bytes.Buffer
	code := runServe([]string{"--database", "postgres://nowhere.invalid/x", "--http", "127.0.0.1:0", "--public-url", "https://mcp.example.com", "--allow-insecure-pds"},
		nil, &bytes.Buffer{}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--allow-insecure-pds") || !strings.Contains(stderr.String(), "not on a loopback host") {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	stderr.Reset()
	code = runServe([]string{"--database", "postgres://nowhere.invalid/x", "--http", "127.0.0.1:0", "--public-url", "https://mcp.example.com", "--oauth-client-unused", "0s"},
		nil, &bytes.Buffer{}, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "--oauth-client-unused must be positive") {
		t.Fatalf("--oauth-client-unused 0s: exit %d: %s", code, stderr.String())
	}
}

// TestHostedInsecurePDS: serve --database against the reference PDS on
// plain http loopback: without --allow-insecure-pds a user's sign-in is
// refused with a message naming the flag; with it, the pushed
// authorization request reaches the PDS and the browser is sent to the
// PDS's sign-in page.
func TestHostedInsecurePDS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and the reference PDS")
	}
	pg, err := pgtest.Start()
	if err != nil {
		t.Fatalf("the hosted mode's test needs PostgreSQL: %v", err)
	}
	t.Cleanup(pg.Stop)
	p := pdstest.Start(t, pdstest.Options{})
	a, err := p.CreateAccount(context.Background(), fmt.Sprintf("insec%d", time.Now().UnixNano()%1e6))
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	rand.Read(key)
	t.Setenv("BULLETED_MCP_SEAL_KEY", base64.StdEncoding.EncodeToString(key))
	dbURL := pg.NewDatabase(t)
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow=%v", allow), func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			public := "http://" + addr
			args := []string{"--database", dbURL, "--http", addr, "--public-url", public, "--plc", p.PLCURL, "--store", t.TempDir()}
			if allow {
				args = append(args, "--allow-insecure-pds", "--metrics-token", "m-token", "--max-per-address", "7")
			}
			ctx, cancel := context.WithCancel(context.Background())
			var stderr lockedBuffer
			done := make(chan int)
			serveContext = ctx
			defer func() { serveContext = context.Background() }()
			go func() { done <- runServe(args, nil, io.Discard, &stderr) }()
			defer func() {
				cancel()
				if code := <-done; code != 0 {
					t.Errorf("serve exited %d:\n%s", code, stderr.String())
				}
			}()
			hc := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			waitServing(t, hc, public, &stderr)
			status, body, loc := consent(t, hc, public, a.DID.String())
			// /metrics: served with --metrics-token to its bearer, said at start
			mreq, _ := http.NewRequest("GET", public+"/metrics", nil)
			mreq.Header.Set("Authorization", "Bearer m-token")
			mresp, err := hc.Do(mreq)
			if err != nil {
				t.Fatal(err)
			}
			mbody, _ := io.ReadAll(mresp.Body)
			mresp.Body.Close()
			if allow && (mresp.StatusCode != 200 || !strings.Contains(string(mbody), "bulleted_hosted_user_opens_total") || !strings.Contains(stderr.String(), "metrics on "+public+"/metrics")) {
				t.Errorf("with --metrics-token: /metrics %d %.200s\n%s", mresp.StatusCode, mbody, stderr.String())
			}
			if want := map[bool]string{true: "at most 7 requests under way at once", false: "at most 64 requests under way at once"}[allow]; !strings.Contains(stderr.String(), want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
			}
			if !allow && (mresp.StatusCode != 404 || !strings.Contains(stderr.String(), "metrics not served (no --metrics-token)")) {
				t.Errorf("without --metrics-token: /metrics %d\n%s", mresp.StatusCode, stderr.String())
			}
			if !allow {
				if status != 400 || !strings.Contains(body, "--allow-insecure-pds") {
					t.Fatalf("without the flag: %d %s", status, body)
				}
				return
			}
			if status != http.StatusSeeOther || !strings.HasPrefix(loc, p.URL) {
				t.Fatalf("with the flag: %d %s (Location %q; the PDS is %s)\n%s", status, body, loc, p.URL, stderr.String())
			}
			if !strings.Contains(stderr.String(), "--allow-insecure-pds: PDSes on plain http") {
				t.Errorf("stderr does not say the flag is in force:\n%s", stderr.String())
			}
		})
	}
}

// waitServing waits until the instance answers its metadata.
func waitServing(t *testing.T, hc *http.Client, public string, stderr *lockedBuffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get(public + "/.well-known/oauth-authorization-server")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the instance does not answer: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// consent registers a client, opens the consent page and allows it for
// ident: the instance's answer (a redirect to the PDS, or a page).
func consent(t *testing.T, hc *http.Client, public, ident string) (int, string, string) {
	t.Helper()
	reg, _ := json.Marshal(map[string]any{"client_name": "insecure-pds test", "redirect_uris": []string{"http://127.0.0.1:9/cb"}, "token_endpoint_auth_method": "none"})
	resp, err := hc.Post(public+"/register", "application/json", bytes.NewReader(reg))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		ClientID string `json:"client_id"`
	}
	json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if c.ClientID == "" {
		t.Fatalf("register: %d", resp.StatusCode)
	}
	q := url.Values{"client_id": {c.ClientID}, "redirect_uri": {"http://127.0.0.1:9/cb"}, "response_type": {"code"}, "state": {"s"},
		"code_challenge": {oauth.S256CodeChallenge("a-verifier-long-enough-to-be-a-pkce-verifier-0123456789")}, "code_challenge_method": {"S256"}}
	resp, err = hc.Get(public + "/authorize?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("consent page: %d %s", resp.StatusCode, page)
	}
	form := url.Values{"request": {hiddenField(string(page), "request")}, "csrf": {hiddenField(string(page), "csrf")}, "action": {"allow"}, "identifier": {ident}}
	req, _ := http.NewRequest("POST", public+"/authorize", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, ck := range resp.Cookies() {
		req.AddCookie(ck)
	}
	resp, err = hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(body), resp.Header.Get("Location")
}

func hiddenField(page, name string) string {
	i := strings.Index(page, `name="`+name+`" value="`)
	if i < 0 {
		return ""
	}
	rest := page[i+len(`name="`+name+`" value="`):]
	return rest[:strings.IndexByte(rest, '"')]
}
