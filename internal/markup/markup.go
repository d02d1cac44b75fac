// Package markup parses Markdown and OPML into bullets to insert
// ([]outline.NewNode), each mapped to the input line it came from.
//
// Markdown: nested lists ("-", "*", "+", "1."), "[ ]"/"[x]" todos,
// "#"/"##"/"###" headings to h1/h2/h3 (as list items, or as lines outside
// lists, where a heading holds what follows it until a heading of its level
// or above), fenced code to codeBlock, "> " to quoteBlock, and text
// indented under a bullet to its note. YAML front matter and HTML comment
// lines are skipped. This is the format view.Markdown writes. An export's
// Detached section (DetachedMarker) is skipped, and Doc.Notes says so.
//
// OPML: outline elements' text, _note and _complete, plus _layout and
// _display as written by view.OPML. Outline elements with _detached (an
// export's detached bullets) are skipped, and Doc.Notes says so.
package markup

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// ErrSyntax means the input could not be parsed.
var ErrSyntax = errors.New("cannot parse input")

// Doc is parsed input: the bullets, and for each the input line (1-based)
// by its position label as outline.Created.Input names it
// ("nodes[0].children[2]").
type Doc struct {
	Nodes []outline.NewNode
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

func countRows(ns []outline.NewNode) int {
	n := len(ns)
	for _, c := range ns {
		n += countRows(c.Children)
	}
	return n
}

type mnode struct {
	n       outline.NewNode
	line    int
	indent  int // list indentation (-1: a heading section)
	level   int // heading level of a section
	kids    []*mnode
	content int // column where the item's content starts
}

func (d *Doc) build(roots []*mnode) {
	d.Lines = map[string]int{}
	var conv func(ms []*mnode, label string) []outline.NewNode
	conv = func(ms []*mnode, label string) []outline.NewNode {
		var out []outline.NewNode
		for i, m := range ms {
			lab := fmt.Sprintf("%s[%d]", label, i)
			d.Lines[lab] = m.line
			n := m.n
			n.Children = conv(m.kids, lab+".children")
			out = append(out, n)
		}
		return out
	}
	d.Nodes = conv(roots, "nodes")
}

var (
	reItem    = regexp.MustCompile(`^(\s*)([-*+]|\d+[.)])(\s+|$)(.*)$`)
	reHeading = regexp.MustCompile(`^(#{1,3})\s+(.*)$`)
	reTodo    = regexp.MustCompile(`^\[([ xX])\]\s+(.*)$`)
)

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

// content sets the layout and text of a list item's first line.
func content(n *outline.NewNode, s string) {
	if m := reTodo.FindStringSubmatch(s); m != nil {
		n.Layout, n.Text, n.Completed = "todo", m[2], m[1] != " "
		return
	}
	if m := reHeading.FindStringSubmatch(s); m != nil {
		n.Layout, n.Text = fmt.Sprintf("h%d", len(m[1])), m[2]
		return
	}
	if q, ok := strings.CutPrefix(s, ">"); ok {
		n.Layout, n.Text = "quoteBlock", strings.TrimPrefix(q, " ")
		return
	}
	n.Text = s
}

// Markdown parses src.
func Markdown(src string) (*Doc, error) {
	lines := strings.Split(strings.ReplaceAll(src, "\r\n", "\n"), "\n")
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
	i := 0
	if len(lines) > 0 && strings.TrimSpace(lines[0]) == "---" {
		for i = 1; i < len(lines) && strings.TrimSpace(lines[i]) != "---"; i++ {
		}
		i++
	}
	var cur *mnode // the last list item (for continuation lines)
	var detached *Doc
	for ; i < len(lines); i++ {
		ln := lines[i]
		trim := strings.TrimSpace(ln)
		if trim == "" {
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
			for !strings.Contains(lines[i], "-->") && i+1 < len(lines) {
				i++
			}
			continue
		}
		ind := indentOf(ln)
		// a fence: a code block item
		fence := func(m *mnode, col int) {
			var code []string
			for i++; i < len(lines); i++ {
				l := lines[i]
				if strings.HasPrefix(strings.TrimSpace(l), "```") {
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
			if strings.HasPrefix(m[4], "```") {
				fence(it, it.content)
			} else {
				content(&it.n, m[4])
			}
			continue
		}
		if cur != nil && ind > cur.indent {
			// continuation under the current item
			if cur.n.Layout == "quoteBlock" && strings.HasPrefix(trim, ">") && cur.n.Note == "" {
				cur.n.Text += "\n" + strings.TrimPrefix(strings.TrimPrefix(trim, ">"), " ")
				continue
			}
			l := ln[min(cur.content, ind):]
			if cur.n.Note != "" {
				cur.n.Note += "\n"
			}
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
			fence(p, ind)
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
	d := &Doc{}
	d.build(roots)
	if detached != nil {
		ns := detached.Nodes
		if len(ns) == 1 && ns[0].Layout == "h2" && ns[0].Text == "Detached" {
			ns = ns[0].Children
		}
		d.SkippedDetached, d.SkippedRows = len(ns), countRows(ns)
		d.skipped("markdown")
	}
	if len(d.Nodes) == 0 {
		if len(d.Notes) > 0 {
			return nil, fmt.Errorf("%w: no bullets found outside the export's Detached section (%d detached bullet(s), skipped)", ErrSyntax, d.SkippedDetached)
		}
		return nil, fmt.Errorf("%w: no bullets found", ErrSyntax)
	}
	return d, nil
}

// OPML parses src.
func OPML(src string) (*Doc, error) {
	dec := xml.NewDecoder(strings.NewReader(src))
	var roots []*mnode
	var stack []*mnode
	inBody := false
	d := &Doc{}
	skip := 0 // depth inside an outline element with _detached (skipped)
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
				}
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
	d.build(roots)
	if sawDetached {
		d.skipped("opml")
	}
	if len(d.Nodes) == 0 {
		if len(d.Notes) > 0 {
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
