// Package markup parses Markdown and OPML into bullets to insert
// ([]intent.NewNode), each mapped to the input line it came from, and
// holds the line rules view.Markdown writes by, so that an export imports
// back as it was: export, import into a fresh repository and export again
// gives the same bytes.
//
// Markdown: nested lists ("-", "*", "+", "1."), "[ ]"/"[x]" todos,
// "#"/"##"/"###" headings to h1/h2/h3 (as list items, or as lines outside
// lists, where a heading holds what follows it until a heading of its level
// or above), fenced code to codeBlock (a fence of three or more backticks,
// closed by one at least as long), "> " to quoteBlock (its next lines
// "> "), and text indented under a bullet to its note (blank lines inside
// a note are kept). YAML front matter and HTML comments are skipped, and
// Doc.Notes says so; an export's Detached section (DetachedMarker) is
// skipped, and said.
//
// What a list item's first line has no prefix for is in a marker ending
// it, one space after the text: "{key=value key=value}", values
// percent-encoded where they hold whitespace, braces or "%":
//
//	lines of an export:
//	- Groceries {display=collapsed}
//	- Ship it {layout=kanban%20card}     (a layout of the open set, stored as given)
//	- # Launch {completed=true}          (completedAt on a bullet that is not a todo)
//	- ↪ Recipes {mirror=at://did:plc:x/app.bulleted.node/3k…}
//	- Their idea {by=did:plc:friend}     (a contributor's bullet, imported as your own copy, and said)
//
// The defaults (layout bullet, display expanded) are not written, so they
// read back as absent; a completion date reads back as the import's time.
//
// A mirror line becomes a mirror of that original (intent.NewNode.Mirror):
// of the same bullet when it is in the repository imported into, created
// as given when it is in another repository (and said), and a plain bullet
// with the line's text when it names a bullet of this repository that does
// not exist (said). Its text is the original's, shown; the rows nested
// under it are the original's subtree as the export showed it (marked
// "_(mirrored, read-only)_"), skipped and counted. A marker with a key or
// value not understood is kept as part of the text, and Doc.Notes says so.
//
// Escapes, only where the importer would read text otherwise: a text that
// starts like a todo, heading, quote or fence, with whitespace or with a
// backslash gets a backslash in front ("- \# not a heading"; after a
// prefix only whitespace and a backslash do: "- [ ] \ x"); a line break in
// a text is "<br>" (a literal "<br>" is "\<br>"); a text that ends like a
// marker, or in whitespace, gets an empty marker "{}" after it. A note
// line that would read as a list item, an HTML comment, a quote's next
// line, or a dropped blank line, or that starts with a backslash, gets a
// backslash in front. Everything else is written as it is: emphasis, "- "
// inside a text, links and tags stay readable.
//
// OPML: outline elements' text, _note and _complete, plus _layout,
// _display and _mirror as written by view.OPML (the rows under a _mirror
// element are skipped, and said; _author is said; other attributes are
// ignored, and said). Outline elements with _detached (an export's
// detached bullets) are skipped, and Doc.Notes says so.
package markup

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline/intent"
)

// ErrSyntax means the input could not be parsed.
var ErrSyntax = errors.New("cannot parse input")

// Doc is parsed input: the bullets, and for each the input line (1-based)
// by its position label as outline.Created.Input names it
// ("nodes[0].children[2]").
type Doc struct {
	Nodes []intent.NewNode
	Lines map[string]int
	// Notes say what of the input was not turned into bullets: the
	// Detached section of an export (skipped, with its count).
	Notes []string
	// SkippedDetached counts the detached bullets (and, in SkippedRows,
	// the rows with their children) of an export's Detached section.
	SkippedDetached, SkippedRows int
}

// DetachedMarker starts the Detached section that view.Markdown writes
// after the outline of an export: an HTML comment line beginning with it,
// then a "## Detached" heading and the detached bullets with their
// children. They are not part of the outline (their parent does not
// resolve), so Markdown skips everything from the marker on and says so in
// Doc.Notes, rather than import them as ordinary bullets.
const DetachedMarker = "<!-- bulleted:detached"

// DetachedSection is the _detached attribute of the outline element that
// holds the detached bullets in an OPML export (each of them carries its
// reason in its own _detached attribute). OPML skips every outline element
// with a _detached attribute, and says so in Doc.Notes.
const DetachedSection = "section"

func (d *Doc) skipped(format string) {
	d.Notes = append(d.Notes, fmt.Sprintf("skipped the export's Detached section (%s): %d detached bullet(s), %d row(s) with their children, whose parent did not resolve; they are not part of the outline, so nothing was created for them (insert them with insert_after if they are wanted)", format, d.SkippedDetached, d.SkippedRows))
}

func countRows(ns []intent.NewNode) int {
	n := len(ns)
	for _, c := range ns {
		n += countRows(c.Children)
	}
	return n
}

type mnode struct {
	n       intent.NewNode
	line    int
	indent  int // list indentation (-1: a heading section)
	level   int // heading level of a section
	kids    []*mnode
	content int  // column where the item's content starts
	noted   bool // a note line was read (it may be empty)
	blanks  int  // blank lines read since the last note line
}

// notices gathers what Markdown and OPML say about the input.
type notices struct {
	unknown     []string // lines whose marker is not understood
	unknownN    int
	comments    int // HTML comment lines skipped
	firstCmt    string
	mirrorRows  int // rows nested under mirrors, skipped
	mirrors     int // mirrors with rows under them
	mirrorNotes int // note lines under mirrors, dropped
	by          int // bullets of other identities, imported as copies
	byDID       string
	info        []string // fence info strings ignored
}

func (d *Doc) build(roots []*mnode, ns *notices) {
	d.Lines = map[string]int{}
	var conv func(ms []*mnode, label string) []intent.NewNode
	conv = func(ms []*mnode, label string) []intent.NewNode {
		var out []intent.NewNode
		for i, m := range ms {
			lab := fmt.Sprintf("%s[%d]", label, i)
			d.Lines[lab] = m.line
			n := m.n
			if n.Mirror != "" {
				// what an export shows under a mirror is its original's
				// subtree, read live: not records of its own
				if len(m.kids) > 0 {
					ns.mirrors++
					for _, k := range m.kids {
						ns.mirrorRows += countM(k)
					}
				}
				if n.Note != "" || m.noted {
					ns.mirrorNotes++
					n.Note = ""
				}
				out = append(out, n)
				continue
			}
			n.Children = conv(m.kids, lab+".children")
			out = append(out, n)
		}
		return out
	}
	d.Nodes = conv(roots, "nodes")
}

func countM(m *mnode) int {
	n := 1
	for _, k := range m.kids {
		n += countM(k)
	}
	return n
}

// say adds the notices to d.Notes.
func (d *Doc) say(ns *notices) {
	if ns.unknownN > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%d line(s) end in a {…} marker that is not understood, kept as part of the text: %s", ns.unknownN, strings.Join(ns.unknown, "; ")))
	}
	if ns.mirrorRows > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("skipped %d row(s) nested under %d mirror line(s): a mirror shows its original's subtree live (read-only), so they were not created", ns.mirrorRows, ns.mirrors))
	}
	if ns.mirrorNotes > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("dropped the note text under %d mirror line(s): a mirror has no note of its own", ns.mirrorNotes))
	}
	if ns.by > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("%d bullet(s) marked as another identity's (by=%s…, a contributor's in a shared outline) were created as your own copies", ns.by, ns.byDID))
	}
	if len(ns.info) > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("ignored the info string of %d code fence(s) (a codeBlock has no language): %s", len(ns.info), strings.Join(ns.info, "; ")))
	}
	if ns.comments > 0 {
		d.Notes = append(d.Notes, fmt.Sprintf("skipped %d HTML comment(s), not bullets (first: %s)", ns.comments, ns.firstCmt))
	}
}

func (ns *notices) marker(line int, s, why string) {
	ns.unknownN++
	if len(ns.unknown) < 5 {
		if r := []rune(s); len(r) > 60 {
			s = string(r[:60]) + "…"
		}
		ns.unknown = append(ns.unknown, fmt.Sprintf("line %d %s (%s)", line, s, why))
	}
}

func indentOf(s string) int {
	n := 0
	for _, c := range s {
		switch c {
		case ' ':
			n++
		case '\t':
			n += 4
		default:
			return n
		}
	}
	return n
}

// content sets the layout and text of a list item's first line (its
// marker already cut off): a leading backslash takes the rest as it is.
func content(n *intent.NewNode, s string) {
	if r, ok := strings.CutPrefix(s, `\`); ok {
		n.Text = unbreaks(r)
		return
	}
	rest := func(r string) string {
		r, _ = strings.CutPrefix(r, `\`)
		return unbreaks(r)
	}
	if m := reTodo.FindStringSubmatch(s); m != nil {
		n.Layout, n.Text, n.Completed = "todo", rest(m[2]), m[1] != " "
		return
	}
	if m := reHeading.FindStringSubmatch(s); m != nil {
		n.Layout, n.Text = fmt.Sprintf("h%d", len(m[1])), rest(m[2])
		return
	}
	if q, ok := strings.CutPrefix(s, ">"); ok {
		q = strings.TrimPrefix(q, " ")
		q, _ = strings.CutPrefix(q, `\`)
		n.Layout, n.Text = "quoteBlock", q
		return
	}
	n.Text = unbreaks(s)
}

// Markdown parses src.
func Markdown(src string) (*Doc, error) {
	if n := strings.Count(src, "\r\n"); n > 0 && n == strings.Count(src, "\n") {
		// CRLF line ends (only when every line has one: a carriage return
		// in a text or note, as an export writes it, is kept)
		src = strings.ReplaceAll(src, "\r\n", "\n")
	}
	lines := strings.Split(src, "\n")
	var roots []*mnode
	var stack []*mnode // open sections and list items, outermost first
	attach := func(m *mnode) {
		if len(stack) == 0 {
			roots = append(roots, m)
		} else {
			p := stack[len(stack)-1]
			p.kids = append(p.kids, m)
		}
		stack = append(stack, m)
	}
	popItems := func(indent int) {
		for len(stack) > 0 {
			top := stack[len(stack)-1]
			if top.indent >= 0 && top.indent >= indent {
				stack = stack[:len(stack)-1]
				continue
			}
			break
		}
	}
	ns := &notices{}
	d := &Doc{}
	i := 0
	if len(lines) > 0 && strings.TrimSpace(lines[0]) == "---" {
		var keys []string
		for i = 1; i < len(lines) && strings.TrimSpace(lines[i]) != "---"; i++ {
			if k, _, ok := strings.Cut(lines[i], ":"); ok && k != "" && !strings.HasPrefix(k, " ") {
				keys = append(keys, k)
			}
		}
		d.Notes = append(d.Notes, fmt.Sprintf("skipped the front matter (lines 1-%d; %s): an outline's title and description are not imported (set them with set_outline)", min(i+1, len(lines)), strings.Join(keys, ", ")))
		i++
	}
	var cur *mnode // the last list item (for continuation lines)
	var detached *Doc
	for ; i < len(lines); i++ {
		ln := lines[i]
		trim := strings.TrimSpace(ln)
		if trim == "" {
			if cur != nil && cur.noted {
				cur.blanks++
			}
			continue
		}
		if strings.HasPrefix(trim, DetachedMarker) {
			// an export's Detached section: counted, not imported
			rest := strings.Join(lines[i:], "\n")
			if end := strings.Index(rest, "-->"); end >= 0 {
				rest = rest[end+3:]
			} else {
				rest = ""
			}
			if detached, _ = Markdown(rest); detached == nil {
				detached = &Doc{}
			}
			break
		}
		if strings.HasPrefix(trim, "<!--") {
			if ns.comments == 0 {
				c := trim
				if r := []rune(c); len(r) > 80 {
					c = string(r[:80]) + "…"
				}
				ns.firstCmt = fmt.Sprintf("line %d %s", i+1, c)
			}
			ns.comments++
			for !strings.Contains(lines[i], "-->") && i+1 < len(lines) {
				i++
			}
			continue
		}
		ind := indentOf(ln)
		// a fence: a code block item; the closing fence is at least as
		// long as the opening one
		fence := func(m *mnode, col int, open string) {
			n := len(open) - len(strings.TrimLeft(open, "`"))
			if info := strings.TrimSpace(open[n:]); info != "" {
				ns.info = append(ns.info, fmt.Sprintf("line %d %q", i+1, info))
			}
			var code []string
			for i++; i < len(lines); i++ {
				l := lines[i]
				if strings.HasPrefix(strings.TrimSpace(l), open[:n]) {
					break
				}
				if indentOf(l) >= col {
					l = l[min(col, len(l)):]
				} else {
					l = strings.TrimLeft(l, " \t")
				}
				code = append(code, l)
			}
			m.n.Layout, m.n.Text = "codeBlock", strings.Join(code, "\n")
		}
		if m := reItem.FindStringSubmatch(ln); m != nil {
			popItems(ind)
			it := &mnode{line: i + 1, indent: ind, content: len(m[1]) + len(m[2]) + len(m[3])}
			attach(it)
			cur = it
			s, attrs, marked := cutMarker(m[4])
			if marked {
				if why := check(attrs); why != "" {
					ns.marker(i+1, strings.TrimSpace(m[4][len(s):]), why)
					s, attrs = m[4], nil
				}
			}
			if u := attrValue(attrs, KeyMirror); u != "" {
				it.n.Mirror = u
				it.n.Text = strings.TrimPrefix(strings.TrimPrefix(s, strings.TrimSpace(PrefixMirror)), " ")
				continue
			}
			if strings.HasPrefix(s, "```") {
				fence(it, it.content, s)
			} else {
				content(&it.n, s)
			}
			for _, a := range attrs {
				switch a.Key {
				case KeyLayout:
					it.n.Layout = a.Value
				case KeyDisplay:
					it.n.Display = a.Value
				case KeyCompleted:
					it.n.Completed = true
				case KeyBy:
					if ns.by == 0 {
						ns.byDID = a.Value
					}
					ns.by++
				}
			}
			continue
		}
		if cur != nil && ind > cur.indent {
			// continuation under the current item
			if cur.n.Layout == "quoteBlock" && strings.HasPrefix(trim, ">") && !cur.noted {
				q := strings.TrimPrefix(strings.TrimLeft(ln, " \t"), ">")
				cur.n.Text += "\n" + strings.TrimPrefix(q, " ")
				continue
			}
			l := ln[min(cur.content, ind):]
			l, _ = strings.CutPrefix(l, `\`)
			if cur.noted {
				cur.n.Note += strings.Repeat("\n", cur.blanks+1)
			}
			cur.blanks = 0
			cur.noted = true
			cur.n.Note += l
			continue
		}
		// outside lists
		popItems(0)
		cur = nil
		if m := reHeading.FindStringSubmatch(trim); m != nil && ind == 0 {
			level := len(m[1])
			for len(stack) > 0 && stack[len(stack)-1].level >= level {
				stack = stack[:len(stack)-1]
			}
			h := &mnode{line: i + 1, indent: -1, level: level}
			h.n.Layout, h.n.Text = fmt.Sprintf("h%d", level), m[2]
			attach(h)
			continue
		}
		p := &mnode{line: i + 1, indent: -1, level: 99}
		switch {
		case strings.HasPrefix(trim, "```"):
			fence(p, ind, trim)
		case strings.HasPrefix(trim, ">"):
			var q []string
			for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), ">"); i++ {
				q = append(q, strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(lines[i]), ">"), " "))
			}
			i--
			p.n.Layout, p.n.Text = "quoteBlock", strings.Join(q, "\n")
		default:
			p.n.Text = trim
		}
		attach(p)
		stack = stack[:len(stack)-1] // a paragraph holds nothing
	}
	d.build(roots, ns)
	if detached != nil {
		dn := detached.Nodes
		if len(dn) == 1 && dn[0].Layout == "h2" && dn[0].Text == "Detached" {
			dn = dn[0].Children
		}
		d.SkippedDetached, d.SkippedRows = len(dn), countRows(dn)
		d.skipped("markdown")
	}
	d.say(ns)
	if len(d.Nodes) == 0 {
		if d.SkippedDetached > 0 {
			return nil, fmt.Errorf("%w: no bullets found outside the export's Detached section (%d detached bullet(s), skipped)", ErrSyntax, d.SkippedDetached)
		}
		return nil, fmt.Errorf("%w: no bullets found", ErrSyntax)
	}
	return d, nil
}

func attrValue(attrs []Attr, key string) string {
	for _, a := range attrs {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// OPML parses src.
func OPML(src string) (*Doc, error) {
	dec := xml.NewDecoder(strings.NewReader(src))
	var roots []*mnode
	var stack []*mnode
	inBody := false
	d := &Doc{}
	ns := &notices{}
	ignored := map[string]int{} // attributes not read, by name
	skip := 0                   // depth inside an outline element with _detached (skipped)
	inSection, sawDetached := false, false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrSyntax, err)
		}
		switch el := tok.(type) {
		case xml.Comment:
			if inBody && skip == 0 {
				if ns.comments == 0 {
					line, _ := dec.InputPos()
					c := strings.TrimSpace(string(el))
					if r := []rune(c); len(r) > 80 {
						c = string(r[:80]) + "…"
					}
					ns.firstCmt = fmt.Sprintf("line %d <!-- %s -->", line, c)
				}
				ns.comments++
			}
		case xml.StartElement:
			if el.Name.Local == "body" {
				inBody = true
			}
			if el.Name.Local != "outline" || !inBody {
				continue
			}
			if skip > 0 {
				skip++
				d.SkippedRows++
				if skip == 2 && inSection {
					d.SkippedDetached++
				}
				continue
			}
			if v, ok := attrOf(el, "_detached"); ok {
				// an export's detached bullets: counted, not imported
				sawDetached = true
				skip, inSection = 1, v == DetachedSection
				if !inSection {
					d.SkippedDetached++
					d.SkippedRows++
				}
				continue
			}
			line, _ := dec.InputPos()
			m := &mnode{line: line}
			for _, a := range el.Attr {
				switch a.Name.Local {
				case "text":
					m.n.Text = a.Value
				case "_note":
					m.n.Note = a.Value
				case "_complete":
					m.n.Completed = a.Value == "true"
				case "_layout":
					m.n.Layout = a.Value
				case "_display":
					m.n.Display = a.Value
				case "_mirror":
					if why := check([]Attr{{KeyMirror, a.Value}}); why != "" {
						ns.marker(line, `_mirror="`+a.Value+`"`, why)
					} else {
						m.n.Mirror = a.Value
					}
				case "_author":
					if ns.by == 0 {
						ns.byDID = a.Value
					}
					ns.by++
				case "_readOnly":
				default:
					ignored[a.Name.Local]++
				}
			}
			if m.n.Mirror != "" {
				m.n.Layout, m.n.Display, m.n.Completed = "", "", false
			}
			if m.n.Completed && m.n.Layout == "" {
				m.n.Layout = "todo"
			}
			if len(stack) == 0 {
				roots = append(roots, m)
			} else {
				p := stack[len(stack)-1]
				p.kids = append(p.kids, m)
			}
			stack = append(stack, m)
		case xml.EndElement:
			if el.Name.Local == "outline" && inBody && skip > 0 {
				skip--
				continue
			}
			if el.Name.Local == "outline" && inBody && len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			if el.Name.Local == "body" {
				inBody = false
			}
		}
	}
	d.build(roots, ns)
	if sawDetached {
		d.skipped("opml")
	}
	d.say(ns)
	if len(ignored) > 0 {
		var names []string
		for k, n := range ignored {
			names = append(names, fmt.Sprintf("%s (%d)", k, n))
		}
		slices.Sort(names)
		d.Notes = append(d.Notes, "ignored outline attributes this importer does not read: "+strings.Join(names, ", "))
	}
	if len(d.Nodes) == 0 {
		if d.SkippedDetached > 0 {
			return nil, fmt.Errorf("%w: no <outline> elements in <body> outside the export's Detached section (%d detached bullet(s), skipped)", ErrSyntax, d.SkippedDetached)
		}
		return nil, fmt.Errorf("%w: no <outline> elements in <body>", ErrSyntax)
	}
	return d, nil
}

func attrOf(el xml.StartElement, name string) (string, bool) {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value, true
		}
	}
	return "", false
}
