package view

import (
	"encoding/xml"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/markup"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
)

// Trees gives the tree of another identity's repository (a DID), for
// mirrors, comments and contributors; nil means offline.
type Trees func(did string) (*outline.Tree, error)

// MirrorRows bounds the rows one mirror renders of its original's subtree.
const MirrorRows = 100

// MirrorNesting bounds mirrors rendered inside mirrored subtrees.
const MirrorNesting = 3

// Enrich fills in what lives in other repositories: mirrored originals and
// their subtrees (read live, read-only, to the read's depth), and the
// comments that render under the owner's policy. other may be nil
// (offline): only this repository is read. It returns problems worth
// telling the reader.
func (v *View) Enrich(t *outline.Tree, other Trees) []string {
	var notes []string
	cache := map[string]*outline.Tree{t.DID.String(): t}
	get := func(did string) *outline.Tree {
		if ot, ok := cache[did]; ok {
			return ot
		}
		if other == nil {
			return nil
		}
		ot, err := other(did)
		if err != nil {
			notes = append(notes, "could not read "+did+": "+err.Error())
		}
		cache[did] = ot
		return ot
	}
	var mirror func(r *Row, chain []string, budget *int)
	mirror = func(r *Row, chain []string, budget *int) {
		u, err := syntax.ParseATURI(r.Mirror.Original)
		if err != nil {
			r.Mirror.Missing = true
			return
		}
		ot := get(u.Authority().String())
		if ot == nil {
			return
		}
		n := ot.Nodes.Get(u.RecordKey().String())
		if n == nil {
			r.Mirror.Missing = true
			return
		}
		r.Mirror.Text = n.Str("text")
		r.Mirror.ChildCount = n.Children.Len()
		for _, c := range chain {
			if c == r.Mirror.Original {
				r.Mirror.Cut = "cycle: this mirror shows a bullet it is itself inside"
				return
			}
		}
		if len(chain) > MirrorNesting {
			r.Mirror.Cut = "nesting: mirrors inside mirrors are not expanded further"
			return
		}
		chain = append(chain, r.Mirror.Original)
		var walk func(items outline.Kids, d int) []*Row
		walk = func(items outline.Kids, d int) []*Row {
			var out []*Row
			for it := range items.Items() {
				if *budget <= 0 {
					r.Mirror.Cut = fmt.Sprintf("size: at most %d mirrored rows are shown; read the original with repo=%s node=%s", MirrorRows, ot.DID, n.Key())
					return out
				}
				*budget--
				c := rowOf(ot, it, false)
				c.Depth, c.ReadOnly, c.Mirrored = d, true, r.RKey
				if ot != t {
					c.Author = ot.DID.String()
				}
				out = append(out, c)
				if c.Mirror != nil {
					mirror(c, chain, budget)
				}
				if it.Children.Len() > 0 && d < v.depth {
					c.Children = walk(it.Children, d+1)
				}
			}
			return out
		}
		if r.Depth < v.depth {
			r.Mirror.Rows = walk(n.Children, r.Depth+1)
		}
	}
	for _, r := range v.all() {
		if r.Mirror != nil {
			budget := MirrorRows
			mirror(r, nil, &budget)
		} else if r.DID == t.DID.String() {
			if it := t.Nodes.Get(r.RKey); it != nil {
				r.Comments = append(r.Comments, thread(t, it, r.URI, get)...)
			}
		}
	}
	return notes
}

// all is the root (if any), the page's rows in pre-order and the detached
// rows (if asked for).
func (v *View) all() []*Row {
	out := v.flat
	if v.Root != nil {
		out = append([]*Row{v.Root}, v.flat...)
	}
	if len(v.detachedFlat) > 0 {
		out = append(append([]*Row(nil), out...), v.detachedFlat...)
	}
	return out
}

// base is the indentation of depth-1 rows.
func (v *View) base() int {
	if v.Root != nil {
		return 1
	}
	return 0
}

// Continue says how to get the rest of a truncated view, "" if complete.
func (v *View) Continue(tool string) string {
	var parts []string
	if v.Cursor != "" {
		node := ""
		if v.node != "" {
			node = " node=" + v.node
		}
		parts = append(parts, fmt.Sprintf("cut by limit after %d row(s): call %s again with the same%s depth=%d and cursor=%q for the next page", v.Total, tool, node, v.depth, v.Cursor))
	}
	if v.Hidden > 0 {
		parts = append(parts, fmt.Sprintf("%d bullet(s) marked (+N) have children below depth %d: read one with node=<key>, or ask a larger depth", v.Hidden, v.depth))
	}
	return strings.Join(parts, "; ")
}

// Text renders a view compactly: one line per bullet, two spaces per level,
// a marker for the layout, the text, and the record key last. With notes,
// note text follows its bullet as indented "> " lines.
func (v *View) Text(notes bool) string {
	var b strings.Builder
	if v.first && v.Outline != nil && v.Outline.Title != "" {
		fmt.Fprintf(&b, "Outline: %s\n", v.Outline.Title)
	}
	if v.Root != nil && v.first {
		// the read's root: its children are the page
		line(&b, v.Root, 0, notes, true)
	}
	for _, r := range v.flat {
		line(&b, r, r.Depth-1+v.base(), notes, r.Depth < v.depth)
		if r.Mirror != nil {
			mirrorLines(&b, r.Mirror, r.Depth-1+v.base(), notes)
		}
	}
	if len(v.flat) == 0 && v.Root == nil {
		b.WriteString("(empty outline)\n")
	}
	if c := v.Continue("read_outline"); c != "" {
		b.WriteString("(" + c + ")\n")
	}
	return b.String()
}

func mirrorLines(b *strings.Builder, m *MirrorRef, d int, notes bool) {
	var walk func(rows []*Row, d int)
	walk = func(rows []*Row, d int) {
		for _, r := range rows {
			line(b, r, d, notes, len(r.Children) > 0)
			if r.Mirror != nil {
				mirrorLines(b, r.Mirror, d, notes)
			}
			walk(r.Children, d+1)
		}
	}
	walk(m.Rows, d+1)
	if m.Cut != "" {
		fmt.Fprintf(b, "%s  (mirror cut: %s)\n", strings.Repeat("  ", d), m.Cut)
	}
}

func marker(r *Row) string {
	switch {
	case r.Mirror != nil:
		return "↪ "
	case r.Layout == "todo" && r.CompletedAt != "":
		return "[x] "
	case r.Layout == "todo":
		return "[ ] "
	case r.Layout == "h1":
		return "# "
	case r.Layout == "h2":
		return "## "
	case r.Layout == "h3":
		return "### "
	case r.Layout == "codeBlock":
		return "``` "
	case r.Layout == "quoteBlock":
		return "> "
	}
	return ""
}

func line(b *strings.Builder, r *Row, d int, notes, expanded bool) {
	ind := strings.Repeat("  ", d)
	b.WriteString(ind)
	b.WriteString("- ")
	b.WriteString(marker(r))
	if r.Mirror != nil {
		switch {
		case r.Mirror.Text != "":
			fmt.Fprintf(b, "%q (mirror of %s, read-only)", r.Mirror.Text, r.Mirror.Original)
		case r.Mirror.Missing:
			b.WriteString("mirror of " + r.Mirror.Original + " (original missing)")
		default:
			b.WriteString("mirror of " + r.Mirror.Original)
		}
	} else {
		b.WriteString(strings.ReplaceAll(r.Text, "\n", " "))
	}
	if r.Author != "" {
		b.WriteString(" [by " + r.Author + ", read-only]")
	} else if r.Mirrored != "" {
		b.WriteString(" [mirrored, read-only]")
	}
	if r.Note != "" && !notes {
		b.WriteString(" [note]")
	}
	if r.Invalid != "" {
		b.WriteString(" [invalid record]")
	}
	if n := len(r.Comments); n > 0 {
		fmt.Fprintf(b, " [%d comment(s)]", n)
	}
	// children not on the page (below the read's depth): their count, at
	// every depth, so the reader knows where to read further
	switch {
	case r.Mirror == nil && r.ChildCount > 0 && !expanded:
		fmt.Fprintf(b, " (+%d)", r.ChildCount)
	case r.Mirror != nil && r.Mirror.ChildCount > 0 && len(r.Mirror.Rows) == 0 && r.Mirror.Cut == "":
		fmt.Fprintf(b, " (+%d)", r.Mirror.ChildCount)
	}
	b.WriteString(" ·" + r.RKey + "\n")
	if notes && r.Note != "" {
		for _, l := range strings.Split(r.Note, "\n") {
			b.WriteString(ind + "    > " + l + "\n")
		}
	}
	commentLines(b, r, ind)
}

// Markdown renders the view as a Markdown list that package markup imports
// back as it was (its documentation gives the format): "- [ ] "/"- [x] "
// todos, "- # " headings, fenced code and "> " quotes inside items, notes
// as continuation lines under their bullet, what has no prefix (display,
// other layouts, mirrors, contributors) in a {key=value} marker ending the
// item's first line, text that would read as something else escaped, the
// outline title as front matter, the rows a mirror shows marked read-only,
// and an HTML comment saying where and why the view (or a mirror) is cut.
func (v *View) Markdown() string {
	var b strings.Builder
	if v.first && v.Outline != nil && (v.Outline.Title != "" || v.Outline.Description != "") {
		b.WriteString("---\n")
		if v.Outline.Title != "" {
			fmt.Fprintf(&b, "title: %s\n", oneLine(v.Outline.Title))
		}
		if v.Outline.Description != "" {
			fmt.Fprintf(&b, "description: %s\n", oneLine(v.Outline.Description))
		}
		b.WriteString("---\n\n")
	}
	if v.Root != nil && v.first {
		mdRow(&b, v.Root, 0)
	}
	var mirrored func(rows []*Row, d int)
	mirrorRows := func(m *MirrorRef, d int) {
		mirrored(m.Rows, d)
		if m.Cut != "" {
			fmt.Fprintf(&b, "%s<!-- mirror cut: %s -->\n", strings.Repeat("  ", d), strings.ReplaceAll(oneLine(m.Cut), "--", "- -"))
		}
	}
	mirrored = func(rows []*Row, d int) {
		for _, r := range rows {
			mdRow(&b, r, d)
			if r.Mirror != nil {
				mirrorRows(r.Mirror, d+1)
			}
			mirrored(r.Children, d+1)
		}
	}
	for _, r := range v.flat {
		d := r.Depth - 1 + v.base()
		mdRow(&b, r, d)
		if r.Mirror != nil {
			mirrorRows(r.Mirror, d+1)
		}
	}
	if len(v.Detached) > 0 {
		// a marked section after the outline: the marker comment tells
		// import_outline (package markup) to skip it, and say so
		n, rows := v.DetachedCount()
		fmt.Fprintf(&b, "\n%s %d detached bullet(s), %d row(s) with their children: their parent does not resolve (list_detached; re-attach with move_node). Not part of the outline above; import_outline skips this section and says so. -->\n## Detached\n\n", markup.DetachedMarker, n, rows)
		for _, r := range v.detachedFlat {
			mdRow(&b, r, r.Depth-1)
			if r.Mirror != nil {
				mirrorRows(r.Mirror, r.Depth)
			}
		}
	}
	if c := v.Continue("read_outline with format=markdown"); c != "" {
		fmt.Fprintf(&b, "\n<!-- %s -->\n", strings.ReplaceAll(c, "--", "- -"))
	}
	return b.String()
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// mdRow writes one row: its first line (markup.Item), then the lines of a
// code block or quote, then its note (markup.NoteLine).
func mdRow(b *strings.Builder, r *Row, d int) {
	ind := strings.Repeat("  ", d)
	cont := ind + "  "
	// the rows a mirror shows and the detached are marked for readers;
	// the importer skips them (under a mirror line, or after the
	// Detached marker)
	var deco string
	switch {
	case r.Mirrored != "":
		deco = " _(mirrored, read-only)_"
	case r.Detached != "":
		deco = " _(detached: " + oneLine(r.Detached) + ")_"
	}
	var attrs []markup.Attr
	if r.Mirror != nil {
		t := r.Mirror.Text
		if t == "" {
			t = "(original not available)"
		}
		attrs = append(attrs, markup.Attr{Key: markup.KeyMirror, Value: r.Mirror.Original})
		fmt.Fprintf(b, "%s- %s\n", ind, markup.Item(markup.PrefixMirror, t, deco, attrs...))
		return
	}
	prefix := ""
	switch r.Layout {
	case "", "bullet":
		if r.CompletedAt != "" {
			attrs = append(attrs, markup.Attr{Key: markup.KeyLayout, Value: "bullet"})
		}
	case "todo":
		prefix = markup.PrefixTodo
		if r.CompletedAt != "" {
			prefix = markup.PrefixDone
		}
	case "h1", "h2", "h3":
		prefix = markup.Heading(r.Layout)
	case "codeBlock":
		prefix = markup.Fence(r.Text)
	case "quoteBlock":
		prefix = markup.PrefixQuote
	default: // the open set: stored as given
		attrs = append(attrs, markup.Attr{Key: markup.KeyLayout, Value: r.Layout})
	}
	if r.Display != "" && r.Display != "expanded" {
		attrs = append(attrs, markup.Attr{Key: markup.KeyDisplay, Value: r.Display})
	}
	if r.CompletedAt != "" && r.Layout != "todo" {
		attrs = append(attrs, markup.Attr{Key: markup.KeyCompleted, Value: "true"})
	}
	if r.Author != "" && r.Mirrored == "" {
		attrs = append(attrs, markup.Attr{Key: markup.KeyBy, Value: r.Author})
	}
	switch r.Layout {
	case "codeBlock":
		fmt.Fprintf(b, "%s- %s\n", ind, markup.Item(prefix, "", "", attrs...))
		for _, l := range strings.Split(r.Text, "\n") {
			if l == "" {
				b.WriteString("\n")
				continue
			}
			fmt.Fprintf(b, "%s%s\n", cont, l)
		}
		fmt.Fprintf(b, "%s%s%s\n", cont, prefix, deco)
	case "quoteBlock":
		ls := strings.Split(r.Text, "\n")
		fmt.Fprintf(b, "%s- %s\n", ind, markup.Item(prefix, ls[0], deco, attrs...))
		for _, l := range ls[1:] {
			if l == "" {
				fmt.Fprintf(b, "%s>\n", cont)
				continue
			}
			fmt.Fprintf(b, "%s> %s\n", cont, l)
		}
	default:
		fmt.Fprintf(b, "%s- %s\n", ind, markup.Item(prefix, r.Text, deco, attrs...))
	}
	if r.Note != "" {
		ls := strings.Split(r.Note, "\n")
		for i, l := range ls {
			if l = markup.NoteLine(l, i, len(ls), r.Layout == "quoteBlock"); l == "" {
				b.WriteString("\n")
				continue
			}
			fmt.Fprintf(b, "%s%s\n", cont, l)
		}
	}
	// the comment thread, where the policy lets it render: HTML comments,
	// which import_outline skips (and counts)
	for _, c := range r.Comments {
		fmt.Fprintf(b, "%s<!-- %s -->\n", cont, strings.ReplaceAll(c.Line(), "--", "- -"))
	}
}

// OPML renders the view as OPML 2.0: text, _note, _complete, and the
// layout (_layout), display (_display), mirrors (_mirror, _readOnly) and
// contributors (_author) as extra attributes; package markup reads it back
// as it was (the rows a mirror shows are skipped, and a cut mirror says so
// in a comment).
func (v *View) OPML() string {
	var b strings.Builder
	lossy := 0 // values holding characters XML cannot carry
	esc := func(s string) {
		if !xmlSafe(s) {
			lossy++
		}
		xml.EscapeText(&b, []byte(s))
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<opml version=\"2.0\"><head><title>")
	title := v.DID
	if v.Outline != nil && v.Outline.Title != "" {
		title = v.Outline.Title
	}
	esc(title)
	b.WriteString("</title></head><body>\n")
	attr := func(k, val string) {
		if val == "" {
			return
		}
		b.WriteString(" " + k + `="`)
		esc(val)
		b.WriteString(`"`)
	}
	var walk func(rows []*Row)
	walk = func(rows []*Row) {
		for _, r := range rows {
			b.WriteString(`<outline`)
			if r.Mirror != nil {
				t := r.Mirror.Text
				if t == "" {
					t = "(original not available)"
				}
				b.WriteString(` text="`)
				esc(t)
				b.WriteString(`"`)
				attr("_mirror", r.Mirror.Original)
			} else {
				b.WriteString(` text="`)
				esc(r.Text)
				b.WriteString(`"`)
			}
			attr("_note", r.Note)
			if r.CompletedAt != "" {
				b.WriteString(` _complete="true"`)
			}
			switch {
			case r.Layout != "" && r.Layout != "bullet":
				attr("_layout", r.Layout)
			case r.CompletedAt != "":
				attr("_layout", "bullet") // completed, but not a todo
			}
			if r.Display != "expanded" {
				attr("_display", r.Display)
			}
			if r.Mirrored == "" {
				// the rows a mirror shows are marked _readOnly, whoever wrote them
				attr("_author", r.Author)
			}
			attr("_detached", r.Detached)
			if r.ReadOnly {
				b.WriteString(` _readOnly="true"`)
			}
			b.WriteString(">")
			// the comment thread, where the policy lets it render: XML
			// comments, which the importer skips (and counts)
			for _, c := range r.Comments {
				b.WriteString("<!-- ")
				esc(strings.ReplaceAll(c.Line(), "--", "- -"))
				b.WriteString(" -->")
			}
			if r.Mirror != nil {
				walk(r.Mirror.Rows)
				if r.Mirror.Cut != "" {
					b.WriteString("<!-- mirror cut: ")
					xml.EscapeText(&b, []byte(strings.ReplaceAll(oneLine(r.Mirror.Cut), "--", "- -")))
					b.WriteString(" -->")
				}
			}
			walk(r.Children)
			b.WriteString("</outline>\n")
		}
	}
	if v.Root != nil && v.first {
		root := *v.Root
		root.Children = v.Nodes
		walk([]*Row{&root})
	} else {
		walk(v.Nodes)
	}
	if len(v.Detached) > 0 {
		// a marked outline after the outline: package markup skips it
		// (and says so); other readers see a "Detached" outline
		n, rows := v.DetachedCount()
		b.WriteString(`<outline text="Detached"`)
		attr("_detached", markup.DetachedSection)
		b.WriteString(">\n")
		// inside the section, which the importer skips (and says so)
		fmt.Fprintf(&b, "<!-- %d detached bullet(s), %d row(s) with their children: their parent does not resolve (list_detached; re-attach with move_node); not part of the outline above -->\n", n, rows)
		walk(v.Detached)
		b.WriteString("</outline>\n")
	}
	if lossy > 0 {
		fmt.Fprintf(&b, "<!-- %d value(s) hold characters XML cannot carry (control characters other than tab and line breaks, or invalid UTF-8), written as U+FFFD; format=json keeps them -->\n", lossy)
	}
	b.WriteString("</body></opml>\n")
	if c := v.Continue("read_outline with format=opml"); c != "" {
		fmt.Fprintf(&b, "<!-- %s -->\n", strings.ReplaceAll(c, "--", "- -"))
	}
	return b.String()
}

// xmlSafe says whether XML 1.0 carries every character of s.
func xmlSafe(s string) bool {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return false
			}
		case r == '\t' || r == '\n' || r == '\r':
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF:
			return false
		}
	}
	return true
}
