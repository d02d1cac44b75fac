package view

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// ErrCursor means a cursor is malformed or belongs to another read (another
// node); start again without one.
var ErrCursor = errors.New("invalid cursor")

// Row is one bullet, with the field names of the app view's
// app.bulleted.getOutline#node rows (nested with children unless flat).
type Row struct {
	URI         string       `json:"uri"`
	CID         string       `json:"cid"`
	RKey        string       `json:"rkey"`
	DID         string       `json:"did"`
	Parent      string       `json:"parent,omitempty"`
	SortKey     string       `json:"sortKey"`
	Text        string       `json:"text"`
	Facets      any          `json:"facets,omitempty"`
	Layout      string       `json:"layout,omitempty"`
	Display     string       `json:"display,omitempty"`
	CreatedAt   string       `json:"createdAt,omitempty"`
	CompletedAt string       `json:"completedAt,omitempty"`
	Note        string       `json:"note,omitempty"`
	ChildCount  int          `json:"childCount"`
	Depth       int          `json:"depth"` // levels below the read's root (its children are 1)
	Mirror      *MirrorRef   `json:"mirror,omitempty"`
	ReadOnly    bool         `json:"readOnly,omitempty"`
	Author      string       `json:"author,omitempty"`   // a contributor's DID: rendered in place, read-only
	Mirrored    string       `json:"mirrored,omitempty"` // the mirror record key this row is rendered under
	Detached    string       `json:"detached,omitempty"`
	Invalid     string       `json:"invalid,omitempty"` // validation problem of a kept, invalid record
	Comments    []CommentRow `json:"comments,omitempty"`
	Children    []*Row       `json:"children,omitempty"`
	// Extra holds the record's other fields (for the fidelity export).
	Extra map[string]any `json:"extra,omitempty"`
}

// MirrorRef marks a mirror row.
type MirrorRef struct {
	Original   string `json:"original"`
	Text       string `json:"text,omitempty"`       // the original's text, read live
	ChildCount int    `json:"childCount,omitempty"` // the original's children
	Missing    bool   `json:"missing,omitempty"`    // the original does not exist (any more)
	Rows       []*Row `json:"rows,omitempty"`       // the original's subtree, read-only
	Cut        string `json:"cut,omitempty"`        // why the subtree is not complete
}

// View is a rendered page of the outline.
type View struct {
	DID       string      `json:"did"`
	Handle    string      `json:"handle,omitempty"`
	Outline   *OutlineRef `json:"outline,omitempty"`
	Root      *Row        `json:"root,omitempty"`
	Nodes     []*Row      `json:"nodes"`
	Truncated bool        `json:"truncated"`
	Stop      string      `json:"stop"`
	Total     int         `json:"total"`
	Cursor    string      `json:"cursor,omitempty"`
	// Hidden counts rows shown with children below the depth bound.
	Hidden int `json:"hiddenBelowDepth,omitempty"`
	// Detached are the bullets whose parent does not resolve (the ones
	// list_detached shows), with their subtrees, when Options.Detached
	// asks for them (the whole-outline export): not part of the outline,
	// so not in Nodes. Each detached bullet's row says why in its detached
	// field; rows below it are its children.
	Detached []*Row `json:"detached,omitempty"`

	flat         []*Row
	detachedFlat []*Row
	depth        int
	node         string
	first        bool // the first page (no cursor given)
}

// Options of a read.
type Options struct {
	Depth  int    // levels below the root (default 3)
	Limit  int    // rows in the page (default DefaultLimit; ≤ 0: no limit)
	Cursor string // continue after this cursor
	// Contributions are contributors' bullets rendered in place (Gather).
	Contributions Contributions
	// Fields puts every record field in Row.Extra (the fidelity export).
	Fields bool
	// Detached puts the detached bullets and their subtrees, whole, in
	// View.Detached (a read of the whole outline, root nil, only).
	Detached bool
	// Span, when Span[1] > 0, renders only the root's children of index
	// Span[0] up to (not including) Span[1], with what is under them: a
	// window around what a dry run touches in a long list (no cursor).
	Span [2]int
}

// DefaultLimit of rows in one page, so a huge outline does not flood the
// context.
const DefaultLimit = 500

// step is one element of a cursor path.
type step struct {
	S string `json:"s"`           // sortKey
	K string `json:"k"`           // record key
	M bool   `json:"m,omitempty"` // a mirror
	D string `json:"d,omitempty"` // the repository, when not the owner's
}

type cursor struct {
	N string `json:"n"`           // the read's root record key ("" = whole outline)
	P []step `json:"p"`           // the last row's path
	R string `json:"r,omitempty"` // the revision of the tree the page was read from
	C string `json:"c,omitempty"` // the contributors' repositories rendered in place (ContributionsPrint)
}

// cmpStep orders rows shown under one parent by the engine's rule for it.
func cmpStep(a, b step) int {
	return order.CompareShown(a.S, a.K, a.M, a.D, b.S, b.K, b.M, b.D)
}

// entry is an item with the tree it lives in.
type entry struct {
	it *outline.Item
	t  *outline.Tree
}

func (e entry) step(owner *outline.Tree) step {
	s := step{S: e.it.SortKey(), K: e.it.Key(), M: e.it.Mirror}
	if e.t != owner {
		s.D = e.t.DID.String()
	}
	return s
}

type walker struct {
	t      *outline.Tree
	o      Options
	v      *View
	stack  []step
	last   []step
	rows   map[*outline.Item]*Row
	count  int
	full   bool
	limit  int
	hidden int
}

func (w *walker) children(e entry) []entry {
	var out []entry
	var kids outline.Kids
	if e.it == nil {
		kids = w.t.Roots
	} else {
		kids = e.it.Children
	}
	for k := range kids.Items() {
		out = append(out, entry{k, e.t})
	}
	if e.it != nil && e.t == w.t && w.o.Contributions != nil {
		if extra := w.o.Contributions[e.it.Key()]; len(extra) > 0 {
			for _, c := range extra {
				out = append(out, entry{c.Item, c.Tree})
			}
			slices.SortStableFunc(out, func(a, b entry) int { return cmpStep(a.step(w.t), b.step(w.t)) })
		}
	}
	return out
}

func (w *walker) emit(e entry, d int, par *outline.Item) bool {
	if w.limit > 0 && w.count >= w.limit {
		w.full = true
		return false
	}
	w.count++
	r := rowOf(e.t, e.it, w.o.Fields)
	r.Depth = d
	if e.t != w.t {
		r.Author, r.ReadOnly = e.t.DID.String(), true
		contributionRow(r, e.it)
	}
	kids := w.children(e)
	r.ChildCount = len(kids)
	w.v.flat = append(w.v.flat, r)
	if pr := w.rows[par]; pr != nil && par != nil {
		pr.Children = append(pr.Children, r)
	} else {
		w.v.Nodes = append(w.v.Nodes, r)
	}
	w.rows[e.it] = r
	w.stack = append(w.stack, e.step(w.t))
	defer func() { w.stack = w.stack[:len(w.stack)-1] }()
	w.last = append(w.last[:0], w.stack...)
	if len(kids) > 0 {
		if d >= w.o.Depth {
			w.hidden++
			return true
		}
		return w.all(kids, d+1, e.it)
	}
	return true
}

func (w *walker) all(es []entry, d int, par *outline.Item) bool {
	for _, e := range es {
		if !w.emit(e, d, par) {
			return false
		}
	}
	return true
}

// resume emits what follows path in pre-order among es (at depth d).
func (w *walker) resume(es []entry, d int, path []step, par *outline.Item) bool {
	if len(path) == 0 {
		return w.all(es, d, par)
	}
	p := path[0]
	i, found := slices.BinarySearchFunc(es, p, func(e entry, p step) int { return cmpStep(e.step(w.t), p) })
	if found {
		e := es[i]
		kids := w.children(e)
		w.stack = append(w.stack, p)
		ok := true
		switch {
		case len(path) > 1 && d < w.o.Depth:
			ok = w.resume(kids, d+1, path[1:], e.it)
		case len(path) == 1 && len(kids) > 0:
			if d >= w.o.Depth {
				// the row itself was emitted on the previous page and
				// counted there
			} else {
				ok = w.all(kids, d+1, e.it)
			}
		}
		w.stack = w.stack[:len(w.stack)-1]
		if !ok {
			return false
		}
		i++
	}
	return w.all(es[i:], d, par)
}

// Read renders a page of the subtree under root (nil: the whole forest).
func Read(t *outline.Tree, root *outline.Item, o Options) (*View, error) {
	if o.Depth < 1 {
		o.Depth = 3
	}
	if o.Limit == 0 {
		o.Limit = DefaultLimit
	}
	v := &View{DID: t.DID.String(), Stop: "complete", Nodes: []*Row{}, depth: o.Depth, first: o.Cursor == ""}
	var path []step
	if root != nil {
		v.node = root.Key()
	}
	if o.Cursor != "" {
		c, err := decodeCursor(o.Cursor)
		if err != nil {
			return nil, err
		}
		if c.N != v.node {
			return nil, fmt.Errorf("%w: it continues a read of node %q, not %q", ErrCursor, c.N, v.node)
		}
		path = c.P
	}
	v.Outline = OutlineAt(t, root)
	w := &walker{t: t, o: o, v: v, rows: map[*outline.Item]*Row{}, limit: o.Limit}
	top := entry{root, t}
	if root != nil {
		v.Root = rowOf(t, root, o.Fields)
		v.Root.ChildCount = len(w.children(top))
		w.rows[root] = nil
	}
	if es := w.children(top); o.Span[1] > 0 && o.Cursor == "" {
		lo, hi := min(max(o.Span[0], 0), len(es)), min(o.Span[1], len(es))
		w.all(es[lo:max(lo, hi)], 1, root)
	} else {
		w.resume(es, 1, path, root)
	}
	if o.Detached && root == nil {
		v.detachedRows(t, o.Fields)
	}
	v.Total = w.count
	v.Hidden = w.hidden
	if w.hidden > 0 {
		v.Truncated, v.Stop = true, "depth"
	}
	if w.full {
		v.Truncated, v.Stop = true, "limit"
		v.Cursor = encodeCursor(cursor{N: v.node, P: w.last, R: t.Rev, C: ContributionsPrint(o.Contributions)})
	}
	return v, nil
}

func encodeCursor(c cursor) string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (cursor, error) {
	var c cursor
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return c, fmt.Errorf("%w: not a cursor from this server", ErrCursor)
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.P) == 0 {
		return c, fmt.Errorf("%w: not a cursor from this server", ErrCursor)
	}
	return c, nil
}

// Flat returns the page's rows in pre-order without nesting, as in
// app.bulleted.getOutline.
func (v *View) Flat() []*Row {
	out := make([]*Row, len(v.flat))
	for i, r := range v.flat {
		c := *r
		c.Children = nil
		out[i] = &c
	}
	return out
}

// FlatView is the view with flat rows (the detached ones too).
func (v *View) FlatView() *View {
	c := *v
	c.Nodes = v.Flat()
	if len(v.Detached) > 0 {
		c.Detached = make([]*Row, len(v.detachedFlat))
		for i, r := range v.detachedFlat {
			d := *r
			d.Children = nil
			c.Detached[i] = &d
		}
	}
	return &c
}

// detachedRows renders t's detached bullets with their whole subtrees
// into v.Detached (nested) and v.detachedFlat (pre-order). A detached
// bullet is at depth 1. Its reason is the row's detached field; one whose
// parent is in another repository may be a contribution to a shared
// outline there, which this read cannot tell, and the reason says so.
func (v *View) detachedRows(t *outline.Tree, fields bool) {
	var walk func(items outline.Kids, d int) []*Row
	walk = func(items outline.Kids, d int) []*Row {
		var out []*Row
		for it := range items.Items() {
			r := rowOf(t, it, fields)
			r.Depth = d
			if d == 1 && strings.HasPrefix(r.Detached, "parent is in another repository") {
				r.Detached += " (if that outline lists this identity as a contributor it is shared, not detached; not checked here)"
			}
			v.detachedFlat = append(v.detachedFlat, r)
			out = append(out, r)
			r.Children = walk(it.Children, d+1)
		}
		return out
	}
	v.Detached = walk(t.Detached, 1)
}

// DetachedCount is the number of detached bullets in the view and of rows
// with their subtrees.
func (v *View) DetachedCount() (bullets, rows int) {
	return len(v.Detached), len(v.detachedFlat)
}

// contributionRow corrects the row of a contributor's bullet rendered in
// place: in the contributor's own tree it is detached, because its parent
// is in another repository, and the record check flags that parent
// (validate's same-repository rule); in the owner's outline that parent is
// where it hangs, as the contributors field of app.bulleted.outline
// intends. So the row is not detached, and the record is checked without
// the same-repository rule (any other problem still shows).
func contributionRow(r *Row, it *outline.Item) {
	r.Detached = ""
	if r.Invalid != "" {
		r.Invalid = ""
		if err := validate.Default().Data(it.Rec.Value.Map(), it.Rec.Collection, nil); err != nil {
			r.Invalid = err.Error()
		}
	}
}

// RowOf renders one item of t (a node or mirror) as a row.
func RowOf(t *outline.Tree, it *outline.Item) *Row { return rowOf(t, it, false) }

func rowOf(t *outline.Tree, it *outline.Item, fields bool) *Row {
	coll := lexicon.Node
	if it.Mirror {
		coll = lexicon.Mirror
	}
	r := &Row{URI: "at://" + t.DID.String() + "/" + coll + "/" + it.Key(), CID: it.Rec.CID, RKey: it.Key(), DID: t.DID.String(), Parent: it.Str("parent"),
		SortKey: it.SortKey(), Text: it.Str("text"), Facets: it.Rec.Value.Get("facets"), Layout: it.Str("layout"), Display: it.Str("display"),
		CreatedAt: it.Str("createdAt"), CompletedAt: it.Str("completedAt"), ChildCount: it.Children.Len(), Detached: it.Detached,
		Invalid: t.Invalid(it)}
	if it.Note != nil {
		r.Note, _ = it.Note.Value.Text("text")
	}
	if it.Mirror {
		r.Mirror = &MirrorRef{Original: it.Str("original")}
		r.ReadOnly = true
	}
	if fields {
		known := map[string]bool{"$type": true, "parent": true, "sortKey": true, "text": true, "facets": true, "layout": true, "display": true, "createdAt": true, "completedAt": true, "original": true}
		for k, val := range it.Rec.Value.Map() {
			if !known[k] {
				if r.Extra == nil {
					r.Extra = map[string]any{}
				}
				r.Extra[k] = val
			}
		}
	}
	return r
}

// Brief is a row in the compact form read_outline returns by default: what
// an agent cannot derive and nothing else. The record's URI is the page's
// uriPrefix + rkey (a contributor's bullet: at://AUTHOR/app.bulleted.node/
// + rkey; a mirror: collection app.bulleted.mirror); other record fields
// (cid, sortKey, facets, dates, display) are in the full form (Row).
type Brief struct {
	RKey string `json:"rkey"`
	Text string `json:"text"`
	// Layout is the record's layout when not a plain bullet.
	Layout string `json:"layout,omitempty"`
	// State is "open" or "done" for a todo (done: completedAt is set).
	State string `json:"state,omitempty"`
	// ChildCount is the bullet's children (absent: none).
	ChildCount int  `json:"childCount,omitempty"`
	Depth      int  `json:"depth"`
	HasNote    bool `json:"hasNote,omitempty"`
	// Note is the note's text, with notes=true.
	Note     string       `json:"note,omitempty"`
	Mirror   *BriefMirror `json:"mirror,omitempty"`
	Author   string       `json:"author,omitempty"`
	ReadOnly bool         `json:"readOnly,omitempty"`
	Detached string       `json:"detached,omitempty"`
	Invalid  string       `json:"invalid,omitempty"`
	Comments []CommentRow `json:"comments,omitempty"`
	Children []*Brief     `json:"children,omitempty"`
}

// BriefMirror is MirrorRef with compact rows.
type BriefMirror struct {
	Original   string   `json:"original"`
	Text       string   `json:"text,omitempty"`
	ChildCount int      `json:"childCount,omitempty"`
	Missing    bool     `json:"missing,omitempty"`
	Rows       []*Brief `json:"rows,omitempty"`
	Cut        string   `json:"cut,omitempty"`
}

// Page is a View in the compact form: the repository DID and the URI
// prefix of its bullets once, then Brief rows.
type Page struct {
	DID       string      `json:"did"`
	Handle    string      `json:"handle,omitempty"`
	URIPrefix string      `json:"uriPrefix"`
	Outline   *OutlineRef `json:"outline,omitempty"`
	Root      *Brief      `json:"root,omitempty"`
	Nodes     []*Brief    `json:"nodes"`
	Truncated bool        `json:"truncated"`
	Stop      string      `json:"stop"`
	Total     int         `json:"total"`
	Cursor    string      `json:"cursor,omitempty"`
	Hidden    int         `json:"hiddenBelowDepth,omitempty"`
}

// Compact is the view in the compact form: nested rows, or flat ones in
// pre-order (flat); with notes, each row carries its note's text.
func (v *View) Compact(flat, notes bool) *Page {
	p := &Page{DID: v.DID, Handle: v.Handle, URIPrefix: "at://" + v.DID + "/" + lexicon.Node + "/", Outline: v.Outline,
		Nodes: []*Brief{}, Truncated: v.Truncated, Stop: v.Stop, Total: v.Total, Cursor: v.Cursor, Hidden: v.Hidden}
	if v.Root != nil {
		p.Root = briefOf(v.Root, notes, false)
	}
	if flat {
		for _, r := range v.flat {
			p.Nodes = append(p.Nodes, briefOf(r, notes, false))
		}
	} else {
		for _, r := range v.Nodes {
			p.Nodes = append(p.Nodes, briefOf(r, notes, true))
		}
	}
	return p
}

func briefOf(r *Row, notes, nested bool) *Brief {
	b := &Brief{RKey: r.RKey, Text: r.Text, Layout: r.Layout, ChildCount: r.ChildCount, Depth: r.Depth, HasNote: r.Note != "",
		Author: r.Author, ReadOnly: r.ReadOnly && r.Mirror == nil, Detached: r.Detached, Invalid: r.Invalid, Comments: r.Comments}
	if b.Layout == "bullet" {
		b.Layout = ""
	}
	switch {
	case r.CompletedAt != "":
		b.State = "done"
	case r.Layout == "todo":
		b.State = "open"
	}
	if notes {
		b.Note = r.Note
	}
	if m := r.Mirror; m != nil {
		b.Mirror = &BriefMirror{Original: m.Original, Text: m.Text, ChildCount: m.ChildCount, Missing: m.Missing, Cut: m.Cut}
		for _, c := range m.Rows {
			b.Mirror.Rows = append(b.Mirror.Rows, briefOf(c, notes, true))
		}
	}
	if nested {
		for _, c := range r.Children {
			b.Children = append(b.Children, briefOf(c, notes, true))
		}
	}
	return b
}
