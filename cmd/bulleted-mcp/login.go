package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds"
)

// quietOAuthLogs keeps indigo's routine OAuth warnings (a DPoP nonce
// renewal is logged as a failed request) off the terminal.
func quietOAuthLogs(stderr io.Writer) {
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError})))
}

// openBrowser starts the desktop's browser on u.
func openBrowser(u string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", u)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
	default:
		cmd = exec.Command("xdg-open", u)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	go cmd.Wait()
	return nil
}

func runLogin(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, dir, rf := newFlagsRemote("login", "Usage: bulleted-mcp login --identifier HANDLE_OR_DID [--pds URL] [--no-browser] [--store DIR]\n\nSigns in to your PDS with AT Protocol OAuth: opens the authorization page in\nyour browser (or prints its address with --no-browser), waits for it to send\nthe browser back to this machine (127.0.0.1), and keeps the session in the\ndata directory. The app asks for the permission set app.bulleted.authFull\n(your outlines, bullets and notes, nothing else); servers that cannot\nresolve it are asked for the same six collections one by one. serve and\ncall then use this session instead of an app password.", stderr)
	noBrowser := fs.Bool("no-browser", false, "print the authorization address instead of opening a browser")
	wait := fs.Duration("timeout", 5*time.Minute, "how long to wait for the sign-in in the browser")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *rf.identifier == "" {
		fmt.Fprintln(stderr, "bulleted-mcp login: --identifier (your handle or DID) is required")
		return 2
	}
	quietOAuthLogs(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	l := pds.OAuthLogin{
		Identifier: *rf.identifier, PDS: *rf.pds, Dir: *dir, Directory: pds.Directory(*rf.plc), Wait: *wait,
		Listening: func(cb string) { fmt.Fprintf(stderr, "Waiting for the sign-in to come back to %s ...\n", cb) },
		Browse: func(_ context.Context, u string) error {
			if !*noBrowser {
				if err := openBrowser(u); err == nil {
					fmt.Fprintf(stderr, "Opened your browser. If it did not open, visit:\n\n  %s\n\n", u)
					return nil
				}
			}
			fmt.Fprintf(stderr, "Open this address in a browser on this machine to sign in:\n\n  %s\n\n", u)
			return nil
		},
	}
	g, err := l.Login(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "bulleted-mcp login: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Signed in as %s on %s.\n", g.DID, g.Host)
	if g.PermissionSet {
		fmt.Fprintf(stdout, "Granted the permission set %s: %s\n", pds.PermissionSet, strings.Join(g.Scopes, " "))
	} else {
		fmt.Fprintf(stdout, "Note: %s.\nAsked for the same collections one by one instead; granted: %s\n", g.Fallback, strings.Join(g.Scopes, " "))
	}
	fmt.Fprintf(stdout, "The session is kept in %s; 'bulleted-mcp logout' ends it.\n", pds.OAuthFile(*dir))
	return 0
}

func runLogout(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs, dir := newFlags("logout", "Usage: bulleted-mcp logout [--store DIR]\n\nRevokes the OAuth session kept in the data directory and deletes it.", stderr)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	quietOAuthLogs(stderr)
	did, err := pds.LogoutOAuth(context.Background(), *dir)
	switch {
	case errors.Is(err, pds.ErrNoOAuthSession):
		fmt.Fprintf(stderr, "bulleted-mcp logout: %v\n", err)
		return 1
	case errors.Is(err, pds.ErrRevoke):
		fmt.Fprintf(stderr, "bulleted-mcp logout: deleted the session of %s, but %v\n", did, err)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "bulleted-mcp logout: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "Signed out %s: the session was revoked and deleted.\n", did)
	return 0
}
