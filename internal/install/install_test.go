package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	srv = Server{Name: "bulleted", Command: "/opt/bulleted mcp/bulleted-mcp", Args: []string{"serve", "--read-only"}}
	now = time.Date(2026, 12, 6, 1, 2, 3, 0, time.UTC)
)

// editable are the clients whose file install edits (Claude Code's with
// --config: a project's .mcp.json).
func editable(t *testing.T) []Client {
	t.Helper()
	var cs []Client
	for _, name := range []string{"claude-desktop", "claude-code", "vscode", "cursor"} {
		c, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

// install is Prepare and Write, as the command runs them.
func install(t *testing.T, c Client, path string) (*Plan, string, error) {
	t.Helper()
	p, err := Prepare(c, path, srv)
	if err != nil {
		return nil, "", err
	}
	b, err := p.Write(now)
	return p, b, err
}

// readBack parses the file and returns its top level, the client's servers
// and this server's entry.
func readBack(t *testing.T, c Client, path string) (top, servers map[string]json.RawMessage, entry map[string]any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatalf("%s does not parse: %v\n%s", path, err, data)
	}
	if err := json.Unmarshal(top[c.Key], &servers); err != nil {
		t.Fatalf("%s: %s: %v\n%s", path, c.Key, err, data)
	}
	if err := json.Unmarshal(servers[srv.Name], &entry); err != nil {
		t.Fatalf("%s: no entry %s: %v\n%s", path, srv.Name, err, data)
	}
	return top, servers, entry
}

func checkEntry(t *testing.T, c Client, entry map[string]any) {
	t.Helper()
	if entry["command"] != srv.Command {
		t.Errorf("%s: command %v, want %q", c.Name, entry["command"], srv.Command)
	}
	args, _ := entry["args"].([]any)
	var got []string
	for _, a := range args {
		s, _ := a.(string)
		got = append(got, s)
	}
	if !slices.Equal(got, srv.Args) {
		t.Errorf("%s: args %q, want %q", c.Name, got, srv.Args)
	}
	if typ, ok := entry["type"]; c.Typed && typ != "stdio" || !c.Typed && ok {
		t.Errorf("%s: type %v (typed client: %v)", c.Name, typ, c.Typed)
	}
}

func backups(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + ".bak-*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestInstallPaths(t *testing.T) {
	t.Parallel()
	home, config := filepath.FromSlash("/home/ann"), filepath.FromSlash("/home/ann/.config")
	want := map[string]string{
		"claude-desktop": filepath.FromSlash("/home/ann/.config/Claude/claude_desktop_config.json"),
		"vscode":         filepath.FromSlash("/home/ann/.config/Code/User/mcp.json"),
		"cursor":         filepath.FromSlash("/home/ann/.cursor/mcp.json"),
	}
	for _, c := range editable(t) {
		got, err := c.PathFor(home, config)
		if c.OwnCommand {
			if !errors.Is(err, ErrNoDefaultPath) {
				t.Errorf("%s: %q %v, want ErrNoDefaultPath", c.Name, got, err)
			}
			continue
		}
		if err != nil || got != want[c.Name] {
			t.Errorf("%s: %q %v, want %q", c.Name, got, err, want[c.Name])
		}
	}
	if _, err := Lookup("emacs"); !errors.Is(err, ErrUnknownClient) {
		t.Errorf("Lookup(emacs): %v", err)
	}
}

// TestInstallMissingFile: the file and its directory are created, with
// the entry alone; there is nothing to back up.
func TestInstallMissingFile(t *testing.T) {
	t.Parallel()
	for _, c := range editable(t) {
		path := filepath.Join(t.TempDir(), "new", "dir", "config.json")
		p, backup, err := install(t, c, path)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !p.Changed || p.Exists || backup != "" || len(backups(t, path)) != 0 {
			t.Errorf("%s: changed %v, existed %v, backup %q %q", c.Name, p.Changed, p.Exists, backup, backups(t, path))
		}
		top, servers, entry := readBack(t, c, path)
		if len(top) != 1 || len(servers) != 1 {
			t.Errorf("%s: more than the entry: %v", c.Name, top)
		}
		checkEntry(t, c, entry)
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: a new file of mode %v, want 0600", c.Name, fi.Mode().Perm())
		}
	}
}

// TestInstallEmptyFile: an empty (or blank) file is an empty
// configuration; it is backed up as it was.
func TestInstallEmptyFile(t *testing.T) {
	t.Parallel()
	for _, c := range editable(t) {
		path := filepath.Join(t.TempDir(), "config.json")
		if err := os.WriteFile(path, []byte("\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, backup, err := install(t, c, path)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		_, _, entry := readBack(t, c, path)
		checkEntry(t, c, entry)
		if b, err := os.ReadFile(backup); err != nil || string(b) != "\n" {
			t.Errorf("%s: backup %q: %q %v", c.Name, backup, b, err)
		}
		if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: the file's mode became %v", c.Name, fi.Mode().Perm())
		}
	}
}

// TestInstallKeepsOthers: the other servers and keys keep their meaning
// (numbers and escapes as written) and their order; the backup is the
// file as it was, byte for byte; the file's indentation (tabs) is kept.
func TestInstallKeepsOthers(t *testing.T) {
	t.Parallel()
	for _, c := range editable(t) {
		path := filepath.Join(t.TempDir(), "config.json")
		orig := strings.ReplaceAll(`{
	"zeta": {"nested": [1.50, 1e3, "\u00e9\/"], "empty": {}},
	"KEY": {
		"notes": {"command": "notes-mcp", "args": ["--x"], "env": {"TOKEN": "t"}},
		"other": {"url": "https://example.com/mcp"}
	},
	"alpha": true
}
`, "KEY", c.Key)
		if err := os.WriteFile(path, []byte(orig), 0o600); err != nil {
			t.Fatal(err)
		}
		_, backup, err := install(t, c, path)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if b, _ := os.ReadFile(backup); string(b) != orig {
			t.Errorf("%s: backup %q is not the original:\n%s", c.Name, backup, b)
		}
		top, servers, entry := readBack(t, c, path)
		checkEntry(t, c, entry)
		var was map[string]json.RawMessage
		json.Unmarshal([]byte(orig), &was)
		var wasServers map[string]json.RawMessage
		json.Unmarshal(was[c.Key], &wasServers)
		for k, v := range was {
			if k != c.Key && compact(v) != compact(top[k]) {
				t.Errorf("%s: %s was %s, is %s", c.Name, k, compact(v), compact(top[k]))
			}
		}
		for k, v := range wasServers {
			if compact(v) != compact(servers[k]) {
				t.Errorf("%s: server %s was %s, is %s", c.Name, k, compact(v), compact(servers[k]))
			}
		}
		if len(top) != len(was) || len(servers) != len(wasServers)+1 {
			t.Errorf("%s: %d keys and %d servers, want %d and %d", c.Name, len(top), len(servers), len(was), len(wasServers)+1)
		}
		data, _ := os.ReadFile(path)
		s := string(data)
		if !(strings.Index(s, `"zeta"`) < strings.Index(s, `"`+c.Key+`"`) && strings.Index(s, `"`+c.Key+`"`) < strings.Index(s, `"alpha"`) &&
			strings.Index(s, `"notes"`) < strings.Index(s, `"other"`) && strings.Index(s, `"other"`) < strings.Index(s, `"bulleted"`)) {
			t.Errorf("%s: the keys' order changed:\n%s", c.Name, s)
		}
		if !strings.Contains(s, "\n\t\"alpha\": true") || !strings.Contains(s, `1.50`) {
			t.Errorf("%s: indentation or a number's form was not kept:\n%s", c.Name, s)
		}
	}
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "invalid: " + string(raw)
	}
	return b.String()
}

// TestInstallIdempotent: a second run changes nothing, writes nothing and
// leaves no second backup; an entry that ran another command is updated,
// its env kept.
func TestInstallIdempotent(t *testing.T) {
	t.Parallel()
	for _, c := range editable(t) {
		path := filepath.Join(t.TempDir(), "config.json")
		os.WriteFile(path, []byte(`{"`+c.Key+`": {"bulleted": {"command": "/old/bulleted-mcp", "args": ["serve"], "env": {"BULLETED_PDS": "https://pds.example"}}}}`), 0o600)
		p, _, err := install(t, c, path)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if !slices.Equal(p.Replaced, []string{"/old/bulleted-mcp", "serve"}) {
			t.Errorf("%s: Replaced %q", c.Name, p.Replaced)
		}
		_, _, entry := readBack(t, c, path)
		checkEntry(t, c, entry)
		if env, _ := entry["env"].(map[string]any); env["BULLETED_PDS"] != "https://pds.example" {
			t.Errorf("%s: the entry's env was lost: %v", c.Name, entry)
		}
		first, _ := os.ReadFile(path)
		fi1, _ := os.Stat(path)
		nb := len(backups(t, path))
		p, backup, err := install(t, c, path)
		if err != nil {
			t.Fatalf("%s: second run: %v", c.Name, err)
		}
		second, _ := os.ReadFile(path)
		fi2, _ := os.Stat(path)
		if p.Changed || backup != "" || !bytes.Equal(first, second) || !os.SameFile(fi1, fi2) || len(backups(t, path)) != nb {
			t.Errorf("%s: second run changed %v, backup %q, file rewritten %v, backups %d → %d", c.Name, p.Changed, backup, !os.SameFile(fi1, fi2), nb, len(backups(t, path)))
		}
	}
}

// TestInstallMalformed: a file that is not JSON (or not of the client's
// shape, or JSON with comments) is a *ParseError; nothing is written and
// no backup made.
func TestInstallMalformed(t *testing.T) {
	t.Parallel()
	for _, c := range editable(t) {
		for _, bad := range []string{
			`{"` + c.Key + `": {`,
			`[1, 2]`,
			`{"` + c.Key + `": []}`,
			`{"` + c.Key + `": {"bulleted": "x"}}`,
			`{"a": 1, "a": 2}`,
			"{\n  // mine\n  \"" + c.Key + "\": {}\n}",
			`{"a": 1} {}`,
			`{"url": "https://example.com", "` + c.Key + `": {},}`,
		} {
			path := filepath.Join(t.TempDir(), "config.json")
			os.WriteFile(path, []byte(bad), 0o600)
			_, _, err := install(t, c, path)
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Path != path {
				t.Errorf("%s: %q: %v, want a *ParseError", c.Name, bad, err)
			}
			if got, _ := os.ReadFile(path); string(got) != bad || len(backups(t, path)) != 0 {
				t.Errorf("%s: %q: the file became %q, backups %q", c.Name, bad, got, backups(t, path))
			}
			if strings.Contains(bad, "// mine") && (err == nil || !strings.Contains(err.Error(), "a comment")) {
				t.Errorf("%s: the error does not name the comment: %v", c.Name, err)
			}
			if strings.HasSuffix(bad, ",}") && (err == nil || !strings.Contains(err.Error(), "trailing comma")) {
				t.Errorf("%s: the error does not name the trailing comma: %v", c.Name, err)
			}
		}
	}
}

// TestInstallReadOnly: a read-only file, or a file in a read-only
// directory, is a *FileError (ErrReadOnly); nothing is written and no
// backup left. The process may be root: read-only is judged by the mode.
func TestInstallReadOnly(t *testing.T) {
	t.Parallel()
	for _, c := range editable(t) {
		orig := `{"` + c.Key + `": {"notes": {"command": "notes"}}}`
		// a read-only file in a writable directory (rename alone would
		// replace it)
		dir := t.TempDir()
		path := filepath.Join(dir, "config.json")
		os.WriteFile(path, []byte(orig), 0o444)
		_, _, err := install(t, c, path)
		var fe *FileError
		if !errors.As(err, &fe) || !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s: read-only file: %v, want a *FileError for ErrReadOnly", c.Name, err)
		}
		if got, _ := os.ReadFile(path); string(got) != orig || len(backups(t, path)) != 0 {
			t.Errorf("%s: read-only file became %q, backups %q", c.Name, got, backups(t, path))
		}
		// a writable file in a read-only directory; and a new file under it
		dir = t.TempDir()
		path = filepath.Join(dir, "config.json")
		os.WriteFile(path, []byte(orig), 0o644)
		os.Chmod(dir, 0o555)
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
		for _, p := range []string{path, filepath.Join(dir, "sub", "new.json")} {
			_, _, err = install(t, c, p)
			if !errors.As(err, &fe) || !errors.Is(err, ErrReadOnly) {
				t.Errorf("%s: %s in a read-only directory: %v, want a *FileError for ErrReadOnly", c.Name, p, err)
			}
		}
		entries, _ := os.ReadDir(dir)
		if got, _ := os.ReadFile(path); string(got) != orig || len(entries) != 1 {
			t.Errorf("%s: read-only directory: the file became %q, the directory holds %d entries", c.Name, got, len(entries))
		}
	}
}

// TestInstallDryRun: Prepare writes nothing; its diff shows the entry
// added, the rest as context.
func TestInstallDryRun(t *testing.T) {
	t.Parallel()
	c, _ := Lookup("cursor")
	path := filepath.Join(t.TempDir(), "mcp.json")
	orig := "{\n  \"mcpServers\": {\n    \"notes\": {\n      \"command\": \"notes\"\n    }\n  }\n}\n"
	os.WriteFile(path, []byte(orig), 0o600)
	p, err := Prepare(c, path, srv)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != orig || len(backups(t, path)) != 0 {
		t.Fatalf("Prepare wrote: %q", got)
	}
	want := `--- PATH
+++ PATH
@@ -2,6 +2,13 @@
   "mcpServers": {
     "notes": {
       "command": "notes"
+    },
+    "bulleted": {
+      "command": "/opt/bulleted mcp/bulleted-mcp",
+      "args": [
+        "serve",
+        "--read-only"
+      ]
     }
   }
 }
`
	if got := strings.ReplaceAll(p.Diff(), path, "PATH"); got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	// a missing file: a diff from /dev/null, and still nothing written
	missing := filepath.Join(t.TempDir(), "none", "mcp.json")
	p, err = Prepare(c, missing, srv)
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Diff(); !strings.HasPrefix(d, "--- /dev/null\n") || !strings.Contains(d, "+    \"bulleted\": {") {
		t.Errorf("diff of a new file:\n%s", d)
	}
	if _, err := os.Stat(filepath.Dir(missing)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Prepare made the directory: %v", err)
	}
}

// TestInstallSymlink: a linked configuration (a dotfile manager's) stays a
// link; its target is what changes.
func TestInstallSymlink(t *testing.T) {
	t.Parallel()
	c, _ := Lookup("claude-desktop")
	dir := t.TempDir()
	target, link := filepath.Join(dir, "dotfiles.json"), filepath.Join(dir, "config.json")
	os.WriteFile(target, []byte(`{}`), 0o600)
	if err := os.Symlink(target, link); err != nil {
		t.Skip(err)
	}
	if _, _, err := install(t, c, link); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", fi.Mode(), err)
	}
	_, _, entry := readBack(t, c, target)
	checkEntry(t, c, entry)
}

func TestInstallClaudeCodeCommand(t *testing.T) {
	t.Parallel()
	got := ClaudeCodeCommand(Server{Name: "bulleted", Command: "/Users/ann/My Tools/bulleted-mcp", Args: []string{"serve", "--pds", "https://pds.example", "--identifier", "ann's"}})
	want := `claude mcp add --scope user bulleted -- '/Users/ann/My Tools/bulleted-mcp' serve --pds https://pds.example --identifier 'ann'\''s'`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got = VSCodeAddCommand(Server{Name: "bulleted", Command: "/usr/local/bin/bulleted-mcp", Args: []string{"serve"}})
	want = `code --add-mcp '{"name":"bulleted","type":"stdio","command":"/usr/local/bin/bulleted-mcp","args":["serve"]}'`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if err := CheckCommand("/tmp/go-build123/b001/exe/bulleted-mcp"); !errors.Is(err, ErrTransientBinary) {
		t.Errorf("a go run binary: %v", err)
	}
	if err := CheckCommand("/usr/local/bin/bulleted-mcp"); err != nil {
		t.Error(err)
	}
}
