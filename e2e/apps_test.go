package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/pds/pdstest"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// browserSetup makes sure /usr/bin/chromium is there (e2e/browser.sh
// installs the Debian package when missing) and returns the e2e directory
// and the Node binary. It fails, never skips, when it cannot.
func browserSetup(t *testing.T) (dir, node string) {
	t.Helper()
	dir, node, err := pdstest.Setup()
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", filepath.Join(dir, "browser.sh")).CombinedOutput(); err != nil {
		t.Fatalf("e2e/browser.sh: %v\n%s", err, out)
	}
	return dir, node
}

// outDir is where a browser test leaves its screenshots for a person to
// look at: $BULLETED_E2E_OUT/NAME, or a new directory under the system's
// temporary directory (kept after the test), named in the log.
func outDir(t *testing.T, name string) string {
	t.Helper()
	base := os.Getenv("BULLETED_E2E_OUT")
	var dir string
	var err error
	if base != "" {
		dir = filepath.Join(base, name)
		err = os.MkdirAll(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp("", "bulleted-e2e-"+name+"-")
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots and results: %s", dir)
	return dir
}

// TestAppsViewsInBrowser: headless Chromium loads the outline and diff
// views in a host page built on the official AppBridge, with data from a
// real server on the embedded store (e2e/apps.mjs), to a client that
// declared the MCP Apps extension, each view the one its tool links
// (_meta.ui.resourceUri, as a host reads it): the bullets shown are
// the outline read back (order, todo state), clicking one asks for a
// follow-up, Apply on a dry run's view lands exactly the dry run's records
// (read back here from the store), a stale view's Apply is refused with
// conflict and writes nothing, the views declare their CSP, and no request
// leaves loopback. Screenshots of both views at two widths (light and
// dark) are written to the directory the log names.
func TestAppsViewsInBrowser(t *testing.T) {
	dir, node := browserSetup(t)
	bin := build(t)
	st := t.TempDir()
	out := outDir(t, "apps")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--conditions=browser", filepath.Join(dir, "apps.mjs"), bin, st, out)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "OK ") {
		t.Fatalf("apps.mjs: %v\n%s", err, b)
	}
	t.Logf("%s", strings.TrimSpace(string(b)))

	var res struct {
		Writes []store.Write `json:"writes"`
		Stale  struct {
			RKey, Want, Refused string
		} `json:"stale"`
		Shots []string `json:"shots"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "result.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatal(err)
	}
	// the repository read back: exactly the dry run's records, and the
	// stale plan's edit nowhere
	l, err := store.OpenLocal(st)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	snap, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	recs := map[string]map[string]any{}
	for _, r := range snap.Records {
		recs[r.Collection+"/"+r.RKey] = r.Value.Map()
	}
	norm := func(v any) any {
		b, _ := json.Marshal(v)
		var x any
		json.Unmarshal(b, &x)
		return x
	}
	if len(res.Writes) != 5 { // move, edit, complete, delete, insert
		t.Fatalf("the dry run had %d writes, want 5", len(res.Writes))
	}
	for _, w := range res.Writes {
		got, ok := recs[w.Collection+"/"+w.RKey]
		switch {
		case w.Op == store.Delete && ok:
			t.Errorf("%s/%s: the dry run deletes it; the repository holds %v", w.Collection, w.RKey, got)
		case w.Op != store.Delete && !reflect.DeepEqual(norm(got), norm(w.Value)):
			t.Errorf("%s/%s: the repository holds %v, the dry run showed %v", w.Collection, w.RKey, got, w.Value)
		}
	}
	if v := recs["app.bulleted.node/"+res.Stale.RKey]; v["text"] != res.Stale.Want {
		t.Errorf("after the refused stale Apply the bullet reads %q, want %q", v["text"], res.Stale.Want)
	}
	for k, v := range recs {
		if v["text"] == res.Stale.Refused {
			t.Errorf("the stale plan's text landed in %s", k)
		}
	}
	for _, s := range res.Shots {
		if fi, err := os.Stat(s); err != nil || fi.Size() < 1000 {
			t.Errorf("screenshot %s: %v", s, err)
		}
	}
}

// TestSDKAppsNegotiation: MCP Apps capability negotiation through the
// official TypeScript SDK client (e2e/negotiate.mjs): the server declares
// io.modelcontextprotocol/ui with text/html;profile=mcp-app; a client that
// declared it too gets _meta.ui.resourceUri on the tools with a view, one
// that did not gets no _meta; never the deprecated flat key; every tool
// has its title. Over stdio, and over HTTP with both clients on one server.
func TestSDKAppsNegotiation(t *testing.T) {
	bin := build(t)
	runScript(t, "negotiate.mjs", nil, bin, t.TempDir())
}

// TestViewPageInBrowser: /view in headless Chromium (e2e/view.mjs) on
// `serve --http` with a token: refused without it; /view?token= once sets
// an HttpOnly, SameSite=Strict cookie and leaves the address; the page
// (its CSP header present) shows the outline read back, follows an agent's
// write through /mcp live, and undoes it with its Undo button (read back
// here from the store: gone, the rest kept); nothing leaves loopback.
func TestViewPageInBrowser(t *testing.T) {
	dir, node := browserSetup(t)
	bin := build(t)
	st := t.TempDir()
	out := outDir(t, "view")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "view.mjs"), bin, st, out)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(b), "OK ") {
		t.Fatalf("view.mjs: %v\n%s", err, b)
	}
	t.Logf("%s", strings.TrimSpace(string(b[strings.LastIndex(string(b), "OK "):])))
	var res struct {
		Undone string   `json:"undone"`
		Kept   []string `json:"kept"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "view-result.json"))
	if err != nil {
		t.Fatal(err)
	}
	json.Unmarshal(raw, &res)
	l, err := store.OpenLocal(st)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	snap, err := l.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, r := range snap.Records {
		if r.Collection == "app.bulleted.node" {
			have[r.RKey] = true
		}
	}
	if have[res.Undone] || len(res.Kept) != 7 {
		t.Fatalf("undone %s still there (%v), kept %v", res.Undone, have[res.Undone], res.Kept)
	}
	for _, k := range res.Kept {
		if !have[k] {
			t.Fatalf("%s is gone after undoing another operation", k)
		}
	}
	if len(have) != len(res.Kept) {
		t.Fatalf("the repository holds %d bullets, want %d", len(have), len(res.Kept))
	}
}
