package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
)

// login and logout from the command line against the reference PDS, the
// browser played by pdstest.
func TestLoginLogout(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the reference PDS")
	}
	sets, err := pdstest.PermissionSets()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(pdstest.LexiconAuthorityEnv, sets)
	srv := pdstest.Start(t, pdstest.Options{})
	ctx := context.Background()
	a, err := srv.CreateAccount(ctx, "cli")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()

	errR, errW := io.Pipe()
	var out strings.Builder
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"login", "--store", dir, "--identifier", a.Handle, "--pds", srv.URL, "--plc", srv.PLCURL, "--no-browser", "--timeout", "1m"}, nil, &out, errW)
		errW.Close()
	}()
	var printed []string
	authorized := make(chan error, 1)
	sc := bufio.NewScanner(errR)
	for sc.Scan() {
		line := sc.Text()
		printed = append(printed, line)
		if u, ok := strings.CutPrefix(line, "  "); ok && strings.Contains(u, "/oauth/authorize?") {
			go func() { authorized <- srv.Authorize(ctx, u, a) }()
		}
	}
	if c := <-code; c != 0 {
		t.Fatalf("login exit %d: %s", c, strings.Join(printed, "\n"))
	}
	select {
	case err := <-authorized:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the authorization address was never printed")
	}
	for _, want := range []string{"Signed in as " + a.DID.String(), "Granted the permission set app.bulleted.authFull"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("login said %q, lacking %q", out.String(), want)
		}
	}
	if !strings.Contains(strings.Join(printed, "\n"), "Waiting for the sign-in to come back to http://127.0.0.1:") {
		t.Fatalf("stderr: %s", strings.Join(printed, "\n"))
	}
	if _, err := os.Stat(pds.OAuthFile(dir)); err != nil {
		t.Fatal(err)
	}

	// `call` (as `serve`) uses the OAuth session with no flags at all: the
	// write lands in the account's repository on the PDS
	var co, ce strings.Builder
	if c := run([]string{"call", "--store", dir, "--plc", srv.PLCURL, "insert_after", `{"text":"written through OAuth"}`}, nil, &co, &ce); c != 0 {
		t.Fatalf("call through the OAuth session: exit %d: %s %s", c, co.String(), ce.String())
	}
	resp, err := http.Get(srv.URL + "/xrpc/com.atproto.repo.listRecords?repo=" + a.DID.String() + "&collection=app.bulleted.node")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "written through OAuth") {
		t.Fatalf("the PDS does not hold the bullet: %s", body)
	}

	var lo, le strings.Builder
	if c := run([]string{"logout", "--store", dir}, nil, &lo, &le); c != 0 || !strings.Contains(lo.String(), "revoked and deleted") {
		t.Fatalf("logout exit %d: %s %s", c, lo.String(), le.String())
	}
	if _, err := os.Stat(pds.OAuthFile(dir)); !os.IsNotExist(err) {
		t.Fatalf("session file after logout: %v", err)
	}
	if c := run([]string{"logout", "--store", dir}, nil, &lo, &le); c != 1 {
		t.Fatalf("second logout exit %d", c)
	}
}
