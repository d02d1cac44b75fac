package outline

import (
	"encoding/xml"
	"fmt"
	"strings"
)

// Row is one bullet in the JSON view, with the field names of the app view's
// app.bulleted.getOutline#node rows, nested with children.
type Row struct {
	URI         string         `json:"uri"`
	CID         string         `json:"cid"`
	RKey        string         `json:"rkey"`
	DID         string         `json:"did"`
	Parent      string         `json:"parent,omitempty"`
	SortKey     string         `json:"sortKey"`
	Text        string         `json:"text"`
	Facets      any            `json:"facets,omitempty"`
	Layout      string         `json:"layout,omitempty"`
	Display     string         `json:"display,omitempty"`
	CreatedAt   string         `json:"createdAt,omitempty"`
	CompletedAt string         `json:"completedAt,omitempty"`
	Note        string         `json:"note,omitempty"`
	ChildCount  int            `json:"childCount"`
	Mirror      *MirrorRef     `json:"mirror,omitempty"`
	ReadOnly    bool           `json:"readOnly,omitempty"`
	Detached    string         `json:"detached,omitempty"`
	Invalid     string         `json:"invalid,omitempty"` // validation problem of a kept, invalid record
	Comments    []CommentRow   `json:"comments,omitempty"`
	Children    []*Row         `json:"children,omitempty"`
	Extra       map[string]any `json:"-"`
}

// MirrorRef marks a mirror row.
type MirrorRef struct {
	Original   string `json:"original"`
	Text       string `json:"text,omitempty"`       // the original's text, read live
	ChildCount int    `json:"childCount,omitempty"` // the original's children
	Missing    bool   `json:"missing,omitempty"`    // the original does not exist (any more)
}

// View is a rendered part of the outline.
type View struct {
	DID       string `json:"did"`
	Root      *Row   `json:"root,omitempty"`
	Nodes     []*Row `json:"nodes"`
	Truncated bool   `json:"truncated"`
	Stop      string `json:"stop"`
	Total     int    `json:"total"`
}

// Limit on rows in one view, so a huge outline does not flood the context.
const ViewLimit = 500

// Read renders the subtree under root (nil: the whole forest) to depth.
func (t *Tree) Read(root *Item, depth int) *View {
	if depth < 1 {
		depth = 1
	}
	v := &View{DID: t.DID.String(), Stop: "complete"}
	count := 0
	var walk func(items []*Item, d int) []*Row
	walk = func(items []*Item, d int) []*Row {
		var out []*Row
		for _, it := range items {
			if count >= ViewLimit {
				v.Truncated, v.Stop = true, "limit"
				return out
			}
			count++
			r := t.row(it)
			if len(it.Children) > 0 {
				if d >= depth {
					v.Truncated = true
					if v.Stop == "complete" {
						v.Stop = "depth"
					}
				} else {
					r.Children = walk(it.Children, d+1)
				}
			}
			out = append(out, r)
		}
		return out
	}
	if root != nil {
		v.Root = t.row(root)
		v.Nodes = walk(root.Children, 1)
	} else {
		v.Nodes = walk(t.Roots, 1)
	}
	v.Total = count
	return v
}

func (t *Tree) row(it *Item) *Row {
	coll := "app.bulleted.node"
	if it.Mirror {
		coll = "app.bulleted.mirror"
	}
	r := &Row{URI: t.uri(coll, it.Key()), CID: it.Rec.CID, RKey: it.Key(), DID: t.DID.String(), Parent: it.Str("parent"),
		SortKey: it.SortKey(), Text: it.Str("text"), Facets: it.Rec.Value["facets"], Layout: it.Str("layout"), Display: it.Str("display"),
		CreatedAt: it.Str("createdAt"), CompletedAt: it.Str("completedAt"), ChildCount: len(it.Children), Detached: it.Detached,
		Invalid: it.Invalid()}
	if it.Note != nil {
		r.Note, _ = it.Note.Value["text"].(string)
	}
	if it.Mirror {
		r.Mirror = &MirrorRef{Original: it.Str("original")}
		r.ReadOnly = true
	}
	return r
}

// Text renders a view compactly: one line per bullet, two spaces per level,
// a marker for the layout, the text, and the record key last.
func (v *View) Text() string {
	var b strings.Builder
	if v.Root != nil {
		line(&b, v.Root, 0)
	}
	base := 0
	if v.Root != nil {
		base = 1
	}
	var walk func(rows []*Row, d int)
	walk = func(rows []*Row, d int) {
		for _, r := range rows {
			line(&b, r, d)
			walk(r.Children, d+1)
		}
	}
	walk(v.Nodes, base)
	if len(v.Nodes) == 0 && v.Root == nil {
		b.WriteString("(empty outline)\n")
	}
	if v.Truncated {
		fmt.Fprintf(&b, "(cut by %s: ask with node=<key> or a larger depth)\n", v.Stop)
	}
	return b.String()
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
	}
	return ""
}

func line(b *strings.Builder, r *Row, d int) {
	b.WriteString(strings.Repeat("  ", d))
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
	if r.Note != "" {
		b.WriteString(" [note]")
	}
	if r.Invalid != "" {
		b.WriteString(" [invalid record]")
	}
	if n := len(r.Comments); n > 0 {
		fmt.Fprintf(b, " [%d comment(s)]", n)
	}
	if r.ChildCount > 0 && len(r.Children) == 0 && d > 0 {
		fmt.Fprintf(b, " (+%d)", r.ChildCount)
	}
	b.WriteString(" ·" + r.RKey + "\n")
}

// Markdown renders the view as a Markdown list, notes as indented quotes.
func (v *View) Markdown() string {
	var b strings.Builder
	var walk func(rows []*Row, d int)
	walk = func(rows []*Row, d int) {
		for _, r := range rows {
			ind := strings.Repeat("  ", d)
			txt := r.Text
			if r.Mirror != nil {
				txt = "_mirror of " + r.Mirror.Original + "_"
			}
			switch {
			case r.Layout == "todo" && r.CompletedAt != "":
				txt = "[x] " + txt
			case r.Layout == "todo":
				txt = "[ ] " + txt
			}
			fmt.Fprintf(&b, "%s- %s\n", ind, txt)
			if r.Note != "" {
				for _, l := range strings.Split(r.Note, "\n") {
					fmt.Fprintf(&b, "%s  > %s\n", ind, l)
				}
			}
			walk(r.Children, d+1)
		}
	}
	if v.Root != nil {
		fmt.Fprintf(&b, "# %s\n\n", v.Root.Text)
	}
	walk(v.Nodes, 0)
	return b.String()
}

// OPML renders the view as OPML 2.0.
func (v *View) OPML() string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<opml version=\"2.0\"><head><title>")
	xml.EscapeText(&b, []byte(v.DID))
	b.WriteString("</title></head><body>\n")
	var walk func(rows []*Row)
	walk = func(rows []*Row) {
		for _, r := range rows {
			b.WriteString(`<outline text="`)
			xml.EscapeText(&b, []byte(r.Text))
			b.WriteString(`"`)
			if r.Note != "" {
				b.WriteString(` _note="`)
				xml.EscapeText(&b, []byte(r.Note))
				b.WriteString(`"`)
			}
			if r.Layout == "todo" && r.CompletedAt != "" {
				b.WriteString(` _complete="true"`)
			}
			b.WriteString(">")
			walk(r.Children)
			b.WriteString("</outline>\n")
		}
	}
	walk(v.Nodes)
	b.WriteString("</body></opml>\n")
	return b.String()
}
