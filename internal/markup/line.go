package markup

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// The line format view.Markdown writes and Markdown reads back; see the
// package documentation. Everything here is the one place both sides take
// their rules from, so an export always reads back as it was.

// Attr is one key=value of a line marker.
type Attr struct{ Key, Value string }

// Marker keys Markdown understands.
const (
	KeyLayout    = "layout"    // a layout without a prefix of its own (the open set), or "bullet" on a completed bullet
	KeyDisplay   = "display"   // any display but the default (expanded)
	KeyCompleted = "completed" // "true": completedAt on a bullet that is not a todo
	KeyMirror    = "mirror"    // the at:// URI of a mirror's original
	KeyBy        = "by"        // a contributor's DID: another identity's bullet shown in a shared outline
)

var (
	reItem    = regexp.MustCompile(`^(\s*)([-*+]|\d+[.)])(\s+|$)(.*)$`)
	reHeading = regexp.MustCompile(`^(#{1,3})(?:\s+(.*))?$`)
	reTodo    = regexp.MustCompile(`^\[([ xX])\](?:\s+(.*))?$`)
	reKey     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)
)

// Marker renders attrs as a line marker ("{key=value …}"), "" for none.
// Values are percent-encoded where they hold whitespace, braces or "%", so
// a marker never holds " {" and the last " {" of a line is where its marker
// starts.
func Marker(attrs ...Attr) string {
	if len(attrs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, a := range attrs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a.Key + "=")
		for j := 0; j < len(a.Value); j++ {
			c := a.Value[j]
			if c <= ' ' || c == '{' || c == '}' || c == '%' || c == 0x7f {
				fmt.Fprintf(&b, "%%%02X", c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('}')
	return b.String()
}

// cutMarker splits a trailing marker off s: the text before it, and its
// attributes (empty for "{}"); ok is false when s does not end in one
// (then text is s). The marker starts at the last " {" (its space is
// taken with it), or at the start of s.
func cutMarker(s string) (text string, attrs []Attr, ok bool) {
	if !strings.HasSuffix(s, "}") {
		return s, nil, false
	}
	start, cut := 0, 0
	if i := strings.LastIndex(s, " {"); i >= 0 {
		start, cut = i+1, i
	} else if !strings.HasPrefix(s, "{") {
		return s, nil, false
	}
	inner := s[start+1 : len(s)-1]
	if inner == "" {
		return s[:cut], nil, true
	}
	for _, item := range strings.Split(inner, " ") {
		k, v, found := strings.Cut(item, "=")
		if !found || !reKey.MatchString(k) || strings.ContainsAny(v, "{}\t") {
			return s, nil, false
		}
		dv, err := url.PathUnescape(v)
		if err != nil {
			return s, nil, false
		}
		attrs = append(attrs, Attr{k, dv})
	}
	return s[:cut], attrs, true
}

// check says what of attrs Markdown does not understand ("" if all).
func check(attrs []Attr) string {
	var bad []string
	seen := map[string]bool{}
	mirror := false
	for _, a := range attrs {
		if seen[a.Key] {
			bad = append(bad, a.Key+" given twice")
			continue
		}
		seen[a.Key] = true
		switch a.Key {
		case KeyLayout, KeyDisplay:
			if a.Value == "" {
				bad = append(bad, "empty "+a.Key)
			}
		case KeyCompleted:
			if a.Value != "true" {
				bad = append(bad, "completed="+a.Value+" (only true)")
			}
		case KeyMirror:
			mirror = true
			u, err := syntax.ParseATURI(a.Value)
			if err != nil || u.Collection().String() != lexicon.Node || u.RecordKey() == "" {
				bad = append(bad, "mirror is not an at://DID/app.bulleted.node/RKEY")
			}
		case KeyBy:
			if _, err := syntax.ParseDID(a.Value); err != nil {
				bad = append(bad, "by is not a DID")
			}
		default:
			bad = append(bad, "unknown key "+a.Key)
		}
	}
	if mirror && (seen[KeyLayout] || seen[KeyDisplay] || seen[KeyCompleted]) {
		bad = append(bad, "a mirror has no layout, display or completion")
	}
	return strings.Join(bad, ", ")
}

func spaceByte(c byte) bool {
	return c == ' ' || c == '\t' || c == '\f' || c == '\r' || c == '\v' || c == '\n'
}

// leadSpecial says whether plain text (no prefix) at the start of an item
// would be read as something else: a todo, heading, quote or fence, an
// escape, or lost leading whitespace.
func leadSpecial(s string) bool {
	if s == "" {
		return false
	}
	switch s[0] {
	case '\\', '>':
		return true
	case '`':
		return strings.HasPrefix(s, "```")
	case '[':
		return reTodo.MatchString(s)
	case '#':
		return reHeading.MatchString(s)
	}
	return spaceByte(s[0])
}

// breaks writes a line break in text as "<br>"; a literal "<br>" gets a
// backslash (and backslashes right before either are doubled).
func breaks(s string) string {
	if !strings.Contains(s, "\n") && !strings.Contains(s, "<br>") {
		return s
	}
	var b strings.Builder
	run := 0 // backslashes just written
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\n':
			b.WriteString(strings.Repeat(`\`, run) + "<br>")
			run = 0
		case strings.HasPrefix(s[i:], "<br>"):
			b.WriteString(strings.Repeat(`\`, run+1) + "<br>")
			run = 0
			i += 3
		case s[i] == '\\':
			b.WriteByte('\\')
			run++
		default:
			b.WriteByte(s[i])
			run = 0
		}
	}
	return b.String()
}

// unbreaks reverses breaks: "<br>" after an even run of backslashes is a
// line break, after an odd run a literal "<br>"; the run is halved.
func unbreaks(s string) string {
	if !strings.Contains(s, "<br>") {
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "<br>")
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := i
		for j > 0 && s[j-1] == '\\' {
			j--
		}
		run := i - j
		b.WriteString(s[:j] + strings.Repeat(`\`, run/2))
		if run%2 == 1 {
			b.WriteString("<br>")
		} else {
			b.WriteByte('\n')
		}
		s = s[i+4:]
	}
}

// Prefixes of the layouts Markdown reads from an item's first line.
const (
	PrefixTodo   = "[ ] "
	PrefixDone   = "[x] "
	PrefixQuote  = "> "
	PrefixMirror = "↪ "
)

// Heading is the prefix of layout h1, h2 or h3 ("" for others).
func Heading(layout string) string {
	switch layout {
	case "h1":
		return "# "
	case "h2":
		return "## "
	case "h3":
		return "### "
	}
	return ""
}

// Item is what follows "- " on a bullet's first line, such that Markdown
// reads back prefix's layout, text and attrs: prefix is "" (a plain bullet
// or a layout named in attrs), PrefixTodo, PrefixDone, a Heading,
// PrefixQuote (text is then the quote's first line), PrefixMirror (the
// text is only shown) or a Fence (text is then ""). Line breaks in text are
// written "<br>"; text that would read as something else starts with a
// backslash; text that ends like a marker, or in whitespace, gets an empty
// marker "{}" after it when no marker follows.
func Item(prefix, text string, decoration string, attrs ...Attr) string {
	e := text
	switch {
	case prefix == "":
		e = breaks(text)
		if leadSpecial(e) {
			e = `\` + e
		}
	case prefix == PrefixQuote:
		if strings.HasPrefix(e, `\`) {
			e = `\` + e
		}
	case prefix == PrefixMirror:
		e = strings.ReplaceAll(text, "\n", " ")
	case strings.HasPrefix(prefix, "`"):
		e = ""
	default: // todo, heading
		e = breaks(text)
		if e != "" && (e[0] == '\\' || spaceByte(e[0])) {
			e = `\` + e
		}
	}
	body := prefix + e
	if e == "" {
		body = strings.TrimRight(prefix, " ")
	}
	body += decoration
	m := Marker(attrs...)
	if m == "" {
		_, _, marked := cutMarker(body)
		if !marked && (body == "" || !spaceByte(body[len(body)-1])) {
			return body
		}
		m = "{}"
	}
	if body == "" {
		return m
	}
	return body + " " + m
}

// NoteLine is line i of a note of n lines as written under its bullet
// (after the indentation), such that Markdown reads it back: a line that
// would read as a list item, an HTML comment, a quote's next line (under a
// quote, the first), a blank line that would be dropped (whitespace only,
// or the first or last), or that starts with a backslash gets a backslash
// in front.
func NoteLine(l string, i, n int, quote bool) string {
	trim := strings.TrimLeftFunc(l, unicode.IsSpace) // as the importer trims
	switch {
	case l == "" && i > 0 && i < n-1:
		return ""
	case strings.TrimSpace(l) == "", strings.HasPrefix(l, `\`), reItem.MatchString(l), strings.HasPrefix(trim, "<!--"),
		quote && i == 0 && strings.HasPrefix(trim, ">"):
		return `\` + l
	}
	return l
}

// Fence is the fence of a code block holding code: three backticks, or
// more than any line of code starts with.
func Fence(code string) string {
	n := 3
	for _, l := range strings.Split(code, "\n") {
		l = strings.TrimLeftFunc(l, unicode.IsSpace) // as the importer trims
		k := len(l) - len(strings.TrimLeft(l, "`"))
		n = max(n, k+1)
	}
	return strings.Repeat("`", n)
}
