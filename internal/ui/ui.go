package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"regexp"
	"strings"
)

//go:embed src
var src embed.FS

// MIMEType is the MCP Apps HTML profile.
const MIMEType = "text/html;profile=mcp-app"

// MaxBytes bounds each view.
const MaxBytes = 60_000

// View is one embedded page.
type View struct {
	Name        string // outline, diff
	URI         string // ui://bulleted/NAME.html
	Title       string
	Description string
	HTML        string
	// ScriptHash and StyleHash are the CSP source expressions
	// ('sha256-…') of the page's one inline script and one inline style.
	ScriptHash, StyleHash string
}

// Views, by name.
var (
	Outline = build("outline", "Bulleted outline",
		"The outline or subtree a read_outline or search result describes: collapsible, todos and headings as Bulleted shows them, notes, mirrors and contributions marked. Clicking a bullet asks the host to send a follow-up message; the view never writes.")
	Diff = build("diff", "Bulleted changes",
		"A write tool's result: a dry run's added, moved, changed and deleted bullets with counts and cost, and Apply (the same tool with plan=ID through the host: exactly what is shown, or refused with conflict); an applied operation's Undo.")
)

// All lists the views.
func All() []*View { return []*View{Outline, Diff} }

// ByURI returns the view of a ui:// URI.
func ByURI(uri string) *View {
	for _, v := range All() {
		if v.URI == uri {
			return v
		}
	}
	return nil
}

func read(name string) string {
	b, err := src.ReadFile("src/" + name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var blank = regexp.MustCompile(`\n\s+`)

func build(name, title, desc string) *View {
	css := blank.ReplaceAllString(read("common.css"), "\n")
	page := read(name + ".html")
	page = strings.Replace(page, "/*CSS*/", css, 1)
	page = strings.Replace(page, "/*JS*/", read("common.js"), 1)
	v := &View{Name: name, URI: "ui://bulleted/" + name + ".html", Title: title, Description: desc, HTML: page}
	v.ScriptHash = hashOf(page, "<script>", "</script>")
	v.StyleHash = hashOf(page, "<style>", "</style>")
	return v
}

func hashOf(page, open, close string) string {
	i := strings.Index(page, open)
	j := strings.Index(page, close)
	if i < 0 || j < i {
		panic("ui: a view without " + open)
	}
	sum := sha256.Sum256([]byte(page[i+len(open) : j]))
	return "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
}

// Meta is the resource's _meta: the MCP Apps ui metadata, a CSP that
// allows no origin at all (no connections, no resources, no frames) and a
// border.
func Meta() map[string]any {
	return map[string]any{"ui": map[string]any{
		"csp":           map[string]any{"connectDomains": []string{}, "resourceDomains": []string{}, "frameDomains": []string{}, "baseUriDomains": []string{}},
		"prefersBorder": true,
	}}
}

// CSP is the Content-Security-Policy /view serves the page with: its own
// script and style by hash, connections to its own origin only (the live
// events and Undo), nothing else.
func (v *View) CSP() string {
	return "default-src 'none'; script-src " + v.ScriptHash + "; style-src " + v.StyleHash + "; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}
