package install

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/bulleted-mcp/bulleted-mcp/internal/atomicfile"
)

// Client is an MCP client whose configuration file this package edits.
type Client struct {
	// Name is the word the CLI takes: claude-desktop, claude-code, vscode,
	// cursor.
	Name  string
	Title string
	// Key is the top-level object of the file that holds the servers:
	// mcpServers, or servers for VS Code.
	Key string
	// Typed: the client's entries carry "type": "stdio".
	Typed bool
	// OwnCommand: the client has a command of its own that adds a server
	// (ClaudeCodeCommand); its files are edited only when named (--config).
	OwnCommand bool
	// path is the file's default location from the home and the user
	// configuration directory (os.UserConfigDir: ~/Library/Application
	// Support on macOS, %AppData% on Windows, $XDG_CONFIG_HOME or
	// ~/.config elsewhere); "" for none.
	path func(home, config string) string
}

// Clients are the clients install knows, in the order usage lists them.
var Clients = []Client{
	{Name: "claude-desktop", Title: "Claude Desktop", Key: "mcpServers",
		path: func(_, config string) string { return filepath.Join(config, "Claude", "claude_desktop_config.json") }},
	{Name: "claude-code", Title: "Claude Code", Key: "mcpServers", Typed: true, OwnCommand: true,
		path: func(string, string) string { return "" }},
	{Name: "vscode", Title: "VS Code", Key: "servers", Typed: true,
		path: func(_, config string) string { return filepath.Join(config, "Code", "User", "mcp.json") }},
	{Name: "cursor", Title: "Cursor", Key: "mcpServers",
		path: func(home, _ string) string { return filepath.Join(home, ".cursor", "mcp.json") }},
}

// ErrUnknownClient is Lookup's error for a name it does not know.
var ErrUnknownClient = errors.New("unknown client")

// Lookup finds a client by its Name.
func Lookup(name string) (Client, error) {
	for _, c := range Clients {
		if c.Name == name {
			return c, nil
		}
	}
	names := make([]string, len(Clients))
	for i, c := range Clients {
		names[i] = c.Name
	}
	return Client{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownClient, name, strings.Join(names, ", "))
}

// ErrNoDefaultPath: the client's file is not edited unless named (Claude
// Code: its own command adds the server).
var ErrNoDefaultPath = errors.New("no configuration file of its own to edit")

// PathFor is the client's configuration file under home and config (the
// user configuration directory, os.UserConfigDir's answer).
func (c Client) PathFor(home, config string) (string, error) {
	p := c.path(home, config)
	if p == "" {
		return "", fmt.Errorf("%s: %w", c.Title, ErrNoDefaultPath)
	}
	return p, nil
}

// DefaultPath is the client's configuration file for this user.
func (c Client) DefaultPath() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("the home directory: %w", err)
	}
	config, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("the user configuration directory: %w", err)
	}
	return c.PathFor(home, config)
}

// Server is the entry written: Name the key under the client's servers,
// Command and Args what the client runs.
type Server struct {
	Name    string
	Command string
	Args    []string
}

// ErrTransientBinary: the command is a binary that will not be there
// tomorrow (go run builds into a temporary directory).
var ErrTransientBinary = errors.New("is a temporary build (go run): install a binary first (go install, or a release archive), or name the command with --command")

// CheckCommand refuses a command the client could not run later.
func CheckCommand(command string) error {
	if !filepath.IsAbs(command) && !strings.ContainsRune(command, filepath.Separator) {
		return nil // found on the client's PATH
	}
	if strings.Contains(filepath.ToSlash(command), "/go-build") {
		return fmt.Errorf("%s %w", command, ErrTransientBinary)
	}
	return nil
}

// ParseError is a configuration file this package cannot read as JSON of
// the client's shape; nothing was written.
type ParseError struct {
	Path string
	Err  error
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("%s: cannot parse: %v (nothing written; fix the file or add the server by hand)", e.Path, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// FileError is a file this package could not read or write (Op: read,
// back up, write); nothing was written, no backup left.
type FileError struct {
	Op   string
	Path string
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("%s %s: %v (nothing written)", e.Op, e.Path, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// ErrReadOnly: the file or its directory has no write permission for its
// owner. Refused even where the process could write it anyway (root): a
// read-only configuration is someone's decision.
var ErrReadOnly = errors.New("read-only")

// Plan is the change to one configuration file, computed and not yet made.
type Plan struct {
	Client Client
	Server Server
	// Path is the file written: the path given, its symlinks resolved (a
	// dotfile manager's link stays a link).
	Path   string
	Exists bool
	// Before is the file as read (nil when missing), After as it would be.
	Before, After []byte
	// Changed: After differs in meaning; a run that would change nothing
	// writes nothing.
	Changed bool
	// Replaced is the entry's earlier command line when an entry by that
	// name ran something else (its other keys, env among them, are kept).
	Replaced []string
	mode     fs.FileMode
}

// Prepare reads the client's file at path and computes the change that
// adds s. Nothing is written.
func Prepare(c Client, path string, s Server) (*Plan, error) {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		path = r
	}
	p := &Plan{Client: c, Server: s, Path: path, mode: 0o600}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, &FileError{Op: "read", Path: path, Err: err}
	default:
		p.Exists, p.Before = true, data
		if fi, err := os.Stat(path); err == nil {
			p.mode = fi.Mode().Perm()
		}
	}
	root, err := parseObject(data)
	if err != nil {
		return nil, &ParseError{Path: path, Err: err}
	}
	servers := object{}
	if raw, ok := root.get(c.Key); ok {
		if servers, err = parseObject(raw); err != nil || bytes.TrimSpace(raw)[0] != '{' {
			if err == nil {
				err = errors.New("not an object")
			}
			return nil, &ParseError{Path: path, Err: fmt.Errorf("%q: %w", c.Key, err)}
		}
	}
	entry := object{}
	if raw, ok := servers.get(s.Name); ok {
		if entry, err = parseObject(raw); err != nil || bytes.TrimSpace(raw)[0] != '{' {
			if err == nil {
				err = errors.New("not an object")
			}
			return nil, &ParseError{Path: path, Err: fmt.Errorf("%q.%q: %w", c.Key, s.Name, err)}
		}
		var old struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		}
		if json.Unmarshal(raw, &old) == nil && (old.Command != "" || len(old.Args) > 0) &&
			(old.Command != s.Command || !equalStrings(old.Args, s.Args)) {
			p.Replaced = append([]string{old.Command}, old.Args...)
		}
	}
	changed := false
	if c.Typed {
		changed = entry.set("type", mustJSON("stdio")) || changed
	}
	changed = entry.set("command", mustJSON(s.Command)) || changed
	changed = entry.set("args", mustJSON(s.Args)) || changed
	p.Changed = changed // a missing file's empty entry always changes
	if !p.Changed {
		p.After = p.Before
		return p, nil
	}
	indent := detectIndent(data)
	servers.set(s.Name, entry.encode(indent))
	root.set(c.Key, servers.encode(indent))
	p.After = append(root.encode(indent), '\n')
	return p, nil
}

// Write makes the change: a backup of the file as it was (PATH.bak-
// TIMESTAMP, now's UTC time; never one overwritten), then the file replaced
// whole (atomicfile). An unchanged plan writes nothing and returns "".
func (p *Plan) Write(now time.Time) (backup string, err error) {
	if !p.Changed {
		return "", nil
	}
	if err := writable(p.Path, p.Exists); err != nil {
		return "", &FileError{Op: "write", Path: p.Path, Err: err}
	}
	if p.Exists {
		if backup, err = writeBackup(p.Path, p.Before, p.mode, now); err != nil {
			return "", &FileError{Op: "back up", Path: p.Path, Err: err}
		}
	}
	if err := atomicfile.Write(p.Path, p.After, p.mode); err != nil {
		if backup != "" {
			os.Remove(backup)
		}
		return "", &FileError{Op: "write", Path: p.Path, Err: err}
	}
	return backup, nil
}

// writable refuses a file (or, for a new file, the nearest directory that
// exists on its way) that its owner may not write, or that this process
// cannot open for writing.
func writable(path string, exists bool) error {
	if exists {
		fi, err := os.Stat(path)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o200 == 0 {
			return fmt.Errorf("the file is %w (mode %04o)", ErrReadOnly, fi.Mode().Perm())
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		f.Close()
	}
	dir := filepath.Dir(path)
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory", dir)
			}
			if fi.Mode().Perm()&0o200 == 0 {
				return fmt.Errorf("the directory %s is %w (mode %04o)", dir, ErrReadOnly, fi.Mode().Perm())
			}
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		up := filepath.Dir(dir)
		if up == dir {
			return err
		}
		dir = up
	}
}

func writeBackup(path string, data []byte, mode fs.FileMode, now time.Time) (string, error) {
	base := path + ".bak-" + now.UTC().Format("20060102T150405Z")
	name := base
	for i := 2; ; i++ {
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			name = fmt.Sprintf("%s-%d", base, i)
			continue
		}
		if err != nil {
			return "", err
		}
		_, err = f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(name)
			return "", err
		}
		return name, nil
	}
}

// ClaudeCodeCommand is the command that adds s to Claude Code for this
// user (every project; without --scope user, claude mcp add adds it to the
// current project only), quoted for a POSIX shell.
func ClaudeCodeCommand(s Server) string {
	words := []string{"claude", "mcp", "add", "--scope", "user", shellQuote(s.Name), "--", shellQuote(s.Command)}
	for _, a := range s.Args {
		words = append(words, shellQuote(a))
	}
	return strings.Join(words, " ")
}

// VSCodeAddCommand is VS Code's own command that adds s to the user's
// mcp.json (for a file install cannot rewrite: one with comments), quoted
// for a POSIX shell.
func VSCodeAddCommand(s Server) string {
	cfg := struct {
		Name    string   `json:"name"`
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
	}{s.Name, "stdio", s.Command, s.Args}
	return "code --add-mcp " + shellQuote(string(mustJSON(cfg)))
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustJSON(v any) json.RawMessage {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // a path's & or < stays as written
	if err := enc.Encode(v); err != nil {
		panic(err) // strings and string slices always encode
	}
	return bytes.TrimSpace(b.Bytes())
}

// member and object keep a JSON object's members in their order, each
// value as written (its numbers, its escapes): a file rewritten keeps what
// it said.
type member struct {
	key   string
	value json.RawMessage
}

type object []member

// parseObject reads one JSON object (whitespace alone: an empty one). A
// duplicate key is refused: which of the two a client reads is its own
// business, and a merge would silently pick one.
func parseObject(data []byte) (object, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return object{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonErr(data, dec, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object (starts with %v)", tok)
	}
	o := object{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonErr(data, dec, err)
		}
		key, _ := tok.(string)
		if seen[key] {
			return nil, fmt.Errorf("the key %q appears twice", key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, jsonErr(data, dec, err)
		}
		o = append(o, member{key, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, jsonErr(data, dec, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more after the object (offset %d)", dec.InputOffset())
	}
	return o, nil
}

// jsonErr says where, by line, and names a comment or a trailing comma
// (JSONC, which VS Code's files may hold), which this package does not
// rewrite.
func jsonErr(data []byte, dec *json.Decoder, err error) error {
	off := dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	line := 1 + bytes.Count(data[:min(int(off), len(data))], []byte("\n"))
	switch msg := err.Error(); {
	case strings.Contains(msg, "invalid character '/'"):
		return fmt.Errorf("line %d: %w (a comment: JSON with comments is not rewritten, lest its comments be lost)", line, err)
	case strings.Contains(msg, "invalid character '}' looking for beginning of object key"),
		strings.Contains(msg, "invalid character ']' looking for beginning of value"):
		return fmt.Errorf("line %d: %w (a trailing comma?)", line, err)
	}
	return fmt.Errorf("line %d: %w", line, err)
}

func (o object) get(key string) (json.RawMessage, bool) {
	for _, m := range o {
		if m.key == key {
			return m.value, true
		}
	}
	return nil, false
}

// set puts value at key (in place, or last) and says whether that changed
// the object's meaning.
func (o *object) set(key string, value json.RawMessage) bool {
	for i, m := range *o {
		if m.key == key {
			if sameJSON(m.value, value) {
				return false
			}
			(*o)[i].value = value
			return true
		}
	}
	*o = append(*o, member{key, value})
	return true
}

func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// encode writes o indented by indent per level, its values re-indented to
// match (their content as written).
func (o object) encode(indent string) json.RawMessage {
	if len(o) == 0 {
		return json.RawMessage("{}")
	}
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, m := range o {
		b.WriteString(indent)
		b.Write(mustJSON(m.key))
		b.WriteString(": ")
		var v bytes.Buffer
		if err := json.Indent(&v, m.value, indent, indent); err != nil {
			b.Write(m.value) // parsed before: cannot happen
		} else {
			b.Write(v.Bytes())
		}
		if i < len(o)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}")
	return b.Bytes()
}

// detectIndent is the file's first indentation (a tab, or so many
// spaces); two spaces for a new file.
func detectIndent(data []byte) string {
	for _, line := range bytes.Split(data, []byte("\n"))[1:] {
		trimmed := bytes.TrimLeft(line, " \t")
		if n := len(line) - len(trimmed); n > 0 && len(trimmed) > 0 {
			if line[0] == '\t' {
				return "\t"
			}
			return strings.Repeat(" ", min(n, 8))
		}
	}
	return "  "
}
