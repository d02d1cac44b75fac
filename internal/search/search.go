// Package search finds bullets of an outline by text, tags, mentions,
// layout, todo state and dates. An Index holds what each node contributes
// to a query (lower-cased text and note, tags, mentioned DIDs, dates),
// keyed by record key and record CID; Update brings it to a new tree by
// re-deriving only the entries whose node or note CID changed, so the index
// follows commits incrementally and is never rebuilt per query. The index
// keeps the tree in pre-order, cut in blocks of about a thousand rows, each
// with one buffer of its lower-cased texts and notes (its corpus): an update
// changes the rows of what changed in place and lays out again only their
// blocks, so it costs what changed, not the outline. A substring query scans
// the corpora with bytes.Index, in chunks on every core.
package search

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// Sentinel errors.
var (
	// ErrCursor: the cursor is malformed or belongs to another query.
	ErrCursor = errors.New("invalid cursor")
	// ErrQuery: a filter cannot be used (bad regex, bad date, bad state).
	ErrQuery = errors.New("invalid query")
)

// entry is what a search needs of one bullet besides its text: 41 bytes
// in a 48-byte allocation (it was 176 with its times as time.Time, its
// facets inline, its layout's name and its lower-cased text and note;
// then 64 with its note's CID; one per bullet). The lower-cased text and
// note are in the corpus of the entry's block only, made from the record
// when the block is laid out.
type entry struct {
	cid       string
	facets    *facets // nil without tags, mentions, a note or an unknown layout (most bullets)
	created   stamp
	completed stamp
	layout    uint8 // an index in layouts, or otherLayout (the name is in facets)
}

// facets are a bullet's tags (lower case) and mentioned DIDs, its note's
// CID, and its layout when it is not one of layouts.
type facets struct {
	tags, mentions []string
	layout         string
	noteCID        string
}

// noteCID is the CID of e's note ("": none).
func (e *entry) noteCID() string {
	if e.facets == nil {
		return ""
	}
	return e.facets.noteCID
}

// layouts are the layouts an entry names by index: none, then the
// lexicon's known values (an open set: any other is kept in facets).
var layouts = append([]string{""}, lexicon.Layouts...)

// otherLayout marks an entry whose layout is not one of layouts.
const otherLayout = 255

// layoutName is e's layout ("" when the record has none).
func (e *entry) layoutName() string {
	if e.layout == otherLayout {
		return e.facets.layout
	}
	return layouts[e.layout]
}

// setLayout records l as e's layout.
func (e *entry) setLayout(l string) {
	if i := slices.Index(layouts, l); i >= 0 && i < otherLayout {
		e.layout = uint8(i)
		return
	}
	if e.facets == nil {
		e.facets = &facets{}
	}
	e.layout, e.facets.layout = otherLayout, l
}

func (e *entry) tags() []string {
	if e.facets == nil {
		return nil
	}
	return e.facets.tags
}

func (e *entry) mentions() []string {
	if e.facets == nil {
		return nil
	}
	return e.facets.mentions
}

// stamp is a time in Unix nanoseconds (noStamp: none), 8 bytes where a
// time.Time takes 24. A time beyond what int64 nanoseconds hold (before
// 1678 or after 2262) is kept at the nearest bound, which keeps its order
// against every bound a query can give within those years.
type stamp int64

const (
	noStamp  stamp = math.MinInt64
	minStamp stamp = math.MinInt64 + 1
	maxStamp stamp = math.MaxInt64
)

// parseStamp is a record's datetime field as a stamp (none if absent or
// not RFC 3339). An absent field is not parsed: its parse error was 12 MB
// of garbage at 249k bullets.
func parseStamp(s string) stamp {
	if s == "" {
		return noStamp
	}
	t, _ := time.Parse(time.RFC3339Nano, s)
	return stampOf(t)
}

func stampOf(t time.Time) stamp {
	switch {
	case t.IsZero():
		return noStamp
	case t.Before(time.Unix(0, int64(minStamp))):
		return minStamp
	case t.After(time.Unix(0, int64(maxStamp))):
		return maxStamp
	}
	return stamp(t.UnixNano())
}

// Index is the search index of one repository.
type Index struct {
	mu      sync.Mutex
	did     string
	commit  string
	entries entryMap
	// Derived counts how many entries were (re)derived by the last Update.
	Derived int

	// the tree of the last update in pre-order, one row per item (its
	// entry and the size of its subtree), cut in blocks of about blockRows
	// rows, each with the corpus of its texts: a search is a loop over
	// slices, not a walk with a map lookup per bullet; an update changes
	// the rows of what changed in place, and lays out again only the
	// blocks they are in
	tree   *outline.Tree
	blocks []*block
	starts []int // starts[b] is block b's first row; starts[len(blocks)] the row count
	bytes  int64 // what the blocks hold, as last measured
	// relaid counts the blocks whose corpus the last update laid out
	// again, read the rows in them
	relaid, read int

	// size is Size's answer, kept at the end of each update: read without
	// the lock, so that a cache's measure never waits for a build
	size atomic.Int64
	// background: a search on an index never built for its repository
	// (cold) does not build it on its own time: it walks the tree,
	// deriving only what it visits up to its page, and the index is built
	// in the background for the next searches (Cache's indexes; New's
	// build on the first search). built is the repository the index was
	// last built or updated for; building is set while a background build
	// is under way, and bg waits for it.
	background bool
	built      atomic.Pointer[string]
	building   atomic.Bool
	bg         sync.WaitGroup
}

// blockRows is about how many rows a block holds: between blockRows/2 and
// 2*blockRows, unless the outline has fewer.
const blockRows = 1024

// row is one item of the pre-order scan.
type row struct {
	it   *outline.Item
	e    *entry // nil for a mirror
	size int    // rows of its subtree, its own included
}

// block is a run of the scan, with its corpus.
type block struct {
	rows  []row
	text  corpus
	dirty bool // text to lay out again
}

// corpus is the lower-cased text and note of every entry of a block in
// pre-order, each followed by sep, in one buffer: a substring query is one
// bytes.Index pass over it rather than two strings.Index calls per bullet
// through pointers to entries spread over the heap.
type corpus struct {
	buf []byte
	// off[i] is where row i's text begins (off[len(rows)] is the end);
	// note[i] where its note begins. A row without text to search (a
	// mirror) has off[i] == off[i+1].
	off, note []int32
}

// sep follows each text and note in the corpus. It is not in any
// lower-cased string (strings.ToLower returns valid UTF-8, where 0xFF never
// occurs), so no match spans two fields; scanText checks that anyway.
const sep = 0xFF

// layOut fills the block's corpus from its rows' entries.
func (b *block) layOut() {
	c := &b.text
	// sized first: grown by append, a corpus left four times its size
	// behind as garbage (48 MB at 249k bullets, for 11 MB kept)
	n := 0
	for _, r := range b.rows {
		if r.e != nil {
			n += len(r.it.Str("text")) + 2
			if r.it.Note != nil {
				t, _ := r.it.Note.Value.Text("text")
				n += len(t)
			}
		}
	}
	if cap(c.buf) < n {
		c.buf = make([]byte, 0, n)
	}
	if cap(c.off) < len(b.rows)+1 {
		c.off, c.note = make([]int32, 0, len(b.rows)+1), make([]int32, 0, len(b.rows))
	}
	c.buf, c.off, c.note = c.buf[:0], c.off[:0], c.note[:0]
	for _, r := range b.rows {
		c.off = append(c.off, int32(len(c.buf)))
		if r.e == nil {
			c.note = append(c.note, int32(len(c.buf)))
			continue
		}
		c.buf = appendLower(c.buf, r.it.Str("text"))
		c.buf = append(c.buf, sep)
		c.note = append(c.note, int32(len(c.buf)))
		if r.it.Note != nil {
			t, _ := r.it.Note.Value.Text("text")
			c.buf = appendLower(c.buf, t)
		}
		c.buf = append(c.buf, sep)
	}
	c.off = append(c.off, int32(len(c.buf)))
	b.dirty = false
}

func (b *block) bytes() int64 {
	return int64(cap(b.text.buf) + 4*(cap(b.text.off)+cap(b.text.note)) + 24*cap(b.rows) + 64)
}

// region is row i's lower-cased text and note in the block's corpus.
func (c *corpus) region(i int) (text, note []byte) {
	return c.buf[c.off[i] : c.note[i]-1], c.buf[c.note[i] : c.off[i+1]-1]
}

// appendLower appends s in lower case (strings.ToLower's), without a
// copy of its own when s is ASCII.
func appendLower(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return append(buf, strings.ToLower(s)...)
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf
}

// lowered is it's text and note in lower case, as a corpus holds them (for
// an item outside the scan).
func lowered(it *outline.Item) (text, note []byte) {
	text = appendLower(nil, it.Str("text"))
	if it.Note != nil {
		t, _ := it.Note.Value.Text("text")
		note = appendLower(nil, t)
	}
	return text, note
}

// New returns an empty index.
func New() *Index { return &Index{entries: newEntryMap(0), starts: []int{0}} }

func derive(it *outline.Item) *entry {
	e := &entry{cid: it.Rec.CID}
	// made only for a bullet that has one of them (a local whose address
	// is taken is allocated for every bullet: 20 MB of garbage at 249k)
	var tags, mentions []string
	noteCID := ""
	if it.Note != nil {
		noteCID = it.Note.CID
	}
	if it.Rec.Value.Has("facets") { // read in place, nothing decoded
		for _, t := range facet.StoredValues(it.Rec.Value, facet.Tag) {
			tags = append(tags, strings.ToLower(t))
		}
		mentions = facet.StoredValues(it.Rec.Value, facet.Mention)
	}
	if tags != nil || mentions != nil || noteCID != "" {
		e.facets = &facets{tags: tags, mentions: mentions, noteCID: noteCID}
	}
	e.setLayout(it.Str("layout"))
	e.created, e.completed = parseStamp(it.Str("createdAt")), parseStamp(it.Str("completedAt"))
	return e
}

// Update brings the index to tree t: entries of nodes whose record or note
// CID changed since the last update are derived again. The same commit is
// a no-op. After a commit of the same repository, only what changed is
// visited: trees share every unchanged bullet (outline.Tree.Next), so an
// unchanged subtree is one pointer, and its rows stay where they are; the
// rows of what changed are replaced in place, and only the blocks they are
// in are laid out again.
func (x *Index) Update(t *outline.Tree) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.update(t)
}

// Warm is Update ahead of the first search (tools.Env.Warm), except that
// an index a search already brought to a newer commit of the repository is
// left as it is (a tree read before that commit would only take it back).
func (x *Index) Warm(t *outline.Tree) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.tree != nil && x.did == t.DID.String() && x.tree.Rev > t.Rev {
		return
	}
	x.update(t)
}

func (x *Index) update(t *outline.Tree) {
	if x.did == t.DID.String() && x.commit == t.Commit && t.Commit != "" && x.tree != nil {
		return
	}
	x.Derived, x.relaid, x.read = 0, 0, 0
	if x.did != t.DID.String() || x.tree == nil || x.tree.DID != t.DID {
		x.entries = newEntryMap(t.Nodes.Len())
		x.did = t.DID.String()
		rows := make([]row, 0, t.Nodes.Len()+t.Mirrors.Len())
		for it := range t.Roots.Items() {
			rows = x.layout(rows, it)
		}
		x.blocks = cut(rows)
		x.restart()
	} else {
		x.sync(t.Roots, x.tree.Roots, 0)
	}
	x.commit, x.tree = t.Commit, t
	x.bytes = 0
	for _, b := range x.blocks {
		if b.dirty {
			b.layOut()
			x.relaid++
			x.read += len(b.rows)
		}
		x.bytes += b.bytes()
	}
	did := x.did
	x.built.Store(&did)
	defer func() { x.size.Store(x.bytes + int64(8*cap(x.starts)) + int64(x.entries.len())*entryBytes) }()
	// entries of bullets no longer in the outline: swept once they are a
	// fifth of the index
	if x.entries.len() > t.Nodes.Len()+t.Nodes.Len()/5+64 {
		x.entries.sweep(func(k string) bool { return t.Nodes.Get(k) != nil })
	}
}

// entry returns it's entry, derived again if its record or note changed.
func (x *Index) entry(it *outline.Item) *entry {
	if it.Mirror {
		return nil
	}
	noteCID := ""
	if it.Note != nil {
		noteCID = it.Note.CID
	}
	e := x.entries.get(it.Key())
	if e == nil || e.cid != it.Rec.CID || e.noteCID() != noteCID || it.Rec.CID == "" {
		e = derive(it)
		x.entries.set(it.Key(), e)
		x.Derived++
	}
	return e
}

// layout appends the rows of it's subtree in pre-order.
func (x *Index) layout(rows []row, it *outline.Item) []row {
	i := len(rows)
	rows = append(rows, row{it: it, e: x.entry(it)})
	for c := range it.Children.Items() {
		rows = x.layout(rows, c)
	}
	rows[i].size = len(rows) - i
	return rows
}

// cut makes blocks of rows (all to be laid out).
func cut(rows []row) []*block {
	if len(rows) == 0 {
		return nil
	}
	k := 1
	if len(rows) > 2*blockRows {
		k = len(rows) / blockRows
	}
	bs := make([]*block, k)
	for i := range k {
		a, b := len(rows)*i/k, len(rows)*(i+1)/k
		bs[i] = &block{rows: rows[a:b:b], dirty: true}
	}
	return bs
}

// restart counts the blocks' first rows again.
func (x *Index) restart() {
	x.starts = append(x.starts[:0], 0)
	n := 0
	for _, b := range x.blocks {
		n += len(b.rows)
		x.starts = append(x.starts, n)
	}
}

// rows is how many rows the scan has.
func (x *Index) rows() int { return x.starts[len(x.blocks)] }

// find is the block holding row i, and i's place in it (i < rows()).
func (x *Index) find(i int) (int, int) {
	b := sort.Search(len(x.blocks), func(k int) bool { return x.starts[k+1] > i })
	return b, i - x.starts[b]
}

// row is row i.
func (x *Index) row(i int) *row {
	b, j := x.find(i)
	return &x.blocks[b].rows[j]
}

// walker steps over the scan a subtree at a time, from row to row within
// a block without a search.
type walker struct {
	x    *Index
	b, j int
}

func (x *Index) walk(i int) walker {
	if i >= x.rows() {
		return walker{x: x, b: len(x.blocks)}
	}
	b, j := x.find(i)
	return walker{x, b, j}
}

// at is the current row (nil past the end).
func (w *walker) at() *row {
	if w.b >= len(w.x.blocks) {
		return nil
	}
	return &w.x.blocks[w.b].rows[w.j]
}

// skip steps over the current row's subtree.
func (w *walker) skip() {
	w.j += w.x.blocks[w.b].rows[w.j].size
	for w.b < len(w.x.blocks) && w.j >= len(w.x.blocks[w.b].rows) {
		w.j -= len(w.x.blocks[w.b].rows)
		w.b++
	}
}

// pos is the current row's number.
func (w *walker) pos() int {
	if w.b >= len(w.x.blocks) {
		return w.x.rows()
	}
	return w.x.starts[w.b] + w.j
}

// splice replaces rows [a, a+del) with ins: the blocks they are in are cut
// again (with a neighbour when they would be small) and laid out.
func (x *Index) splice(a, del int, ins []row) {
	if del == 0 && len(ins) == 0 {
		return
	}
	if len(x.blocks) == 0 {
		x.blocks = cut(slices.Clone(ins))
		x.restart()
		return
	}
	var b0, j0 int
	if a >= x.rows() {
		b0 = len(x.blocks) - 1
		j0 = len(x.blocks[b0].rows)
	} else {
		b0, j0 = x.find(a)
	}
	b1, j1 := b0, j0
	if del > 0 {
		b1, j1 = x.find(a + del - 1)
		j1++
	}
	rows := make([]row, 0, j0+len(ins)+len(x.blocks[b1].rows)-j1+blockRows)
	rows = append(rows, x.blocks[b0].rows[:j0]...)
	rows = append(rows, ins...)
	rows = append(rows, x.blocks[b1].rows[j1:]...)
	lo, hi := b0, b1+1
	if len(rows) < blockRows/2 {
		if hi < len(x.blocks) {
			rows = append(rows, x.blocks[hi].rows...)
			hi++
		} else if lo > 0 {
			rows = append(slices.Clone(x.blocks[lo-1].rows), rows...)
			lo--
		}
	}
	x.blocks = slices.Replace(x.blocks, lo, hi, cut(rows)...)
	x.restart()
}

// key tells items of a sibling list apart (a node and its mirror share a
// record key).
type key struct {
	mirror bool
	k      string
}

func keyOf(it *outline.Item) key { return key{it.Mirror, it.Key()} }

// sync brings the rows from q on, the scan of sibling list olds (the
// indexed tree's), to items, the same list in the new tree, in place, and
// returns the change in the number of rows. What both lists begin and end
// with (the same pointers: unchanged subtrees) is stepped over; in the
// rest, a new version of an item keeps its row, its children synced in
// turn, and other subtrees are taken out or laid out (a moved subtree from
// its entries, as they were).
func (x *Index) sync(kids, oldKids outline.Kids, q int) int {
	// the items both lists share at their start and end (the chunks of a
	// long list they share passed over whole), then those between
	i, suf := kids.CommonEnds(oldKids)
	w := x.walk(q)
	for range i {
		w.skip()
	}
	ni, no := kids.Len()-suf, oldKids.Len()-suf
	if i == ni && i == no {
		return 0
	}
	mid, omid := kids.Slice(i, ni), oldKids.Slice(i, no)
	if len(mid) == 0 && len(omid) == 0 {
		return 0
	}
	q = w.pos()
	inNew := make(map[key]bool, len(mid))
	for _, it := range mid {
		inNew[keyOf(it)] = true
	}
	inOld := make(map[key]bool, len(omid))
	for _, it := range omid {
		inOld[keyOf(it)] = true
	}
	delta := 0
	// a run of rows out and rows in, spliced at once: [pa, pa+del) are
	// the old rows (still in place), ins the new ones
	pa, del := -1, 0
	var ins []row
	flush := func() {
		if pa >= 0 {
			x.splice(pa, del, ins)
			delta += len(ins) - del
			q = pa + len(ins)
		}
		pa, del, ins = -1, 0, nil
	}
	out := func() { // the old subtree at q goes
		if pa < 0 {
			pa = q
		}
		s := x.row(q).size
		del += s
		q += s
	}
	for a, b := 0, 0; a < len(mid) || b < len(omid); {
		switch {
		case b < len(omid) && (a == len(mid) || !inNew[keyOf(omid[b])]):
			out()
			b++
		case a < len(mid) && (b == len(omid) || !inOld[keyOf(mid[a])]):
			if pa < 0 {
				pa = q
			}
			ins = x.layout(ins, mid[a])
			a++
		case keyOf(mid[a]) == keyOf(omid[b]):
			flush()
			if mid[a] != omid[b] {
				delta += x.pair(mid[a], omid[b], q)
			}
			q += x.row(q).size
			a++
			b++
		default: // in both lists, in another order: the old one goes, and is laid out where it is now
			inOld[keyOf(omid[b])] = false
			out()
			b++
		}
	}
	flush()
	return delta
}

// pair brings row q, old's, to it, a new version of the same item, and its
// subtree's rows; it returns the change in the number of rows.
func (x *Index) pair(it, old *outline.Item, q int) int {
	b, j := x.find(q)
	r := &x.blocks[b].rows[j]
	e := x.entry(it)
	if r.e != e {
		x.blocks[b].dirty = true
	}
	r.it, r.e = it, e
	d := x.sync(it.Children, old.Children, q+1)
	if d != 0 {
		x.row(q).size += d // the blocks may have been cut again
	}
	return d
}

// position is it's place in the scan of tree t (false if it is not in it:
// detached, or another tree's item): found from the top down, a sibling
// list at a time.
func (x *Index) position(t *outline.Tree, it *outline.Item) (int, bool) {
	var path []*outline.Item
	for p := it; p != nil; p = t.Parent(p) {
		path = append(path, p)
	}
	items, w := t.Roots, x.walk(0)
	for i := len(path) - 1; i >= 0; i-- {
		found := false
		for s := range items.Items() {
			r := w.at()
			if r == nil || r.it != s {
				return 0, false
			}
			if s == path[i] {
				found = true
				break
			}
			w.skip()
		}
		if !found {
			return 0, false
		}
		if i > 0 {
			items = path[i].Children
			w = x.walk(w.pos() + 1)
		}
	}
	return w.pos(), true
}

// Query is what to look for; every given filter must match.
type Query struct {
	Text     string   // case-insensitive substring of text or note
	Regex    bool     // Text is a regular expression (case-insensitive)
	Tags     []string // every tag (without "#"), case-insensitive
	Mentions []string // every mention: DIDs, or handles matched as "@handle" in the text
	Layout   string   // exact layout ("bullet" also matches no layout)
	State    string   // "open" or "done" (todos only)
	// Date ranges, inclusive: RFC 3339 times or YYYY-MM-DD dates (a "to"
	// date covers the whole day, UTC).
	CreatedFrom, CreatedTo, CompletedFrom, CompletedTo string
	Under                                              *outline.Item // restrict to this bullet's subtree (nil: all)
	// Depth, with Under, is how many levels below Under to look (1: its
	// children only, Under itself left out); 0 is the whole subtree.
	Depth  int
	Limit  int // hits per page (default 20)
	Cursor string
}

// Hit is one matching bullet.
type Hit struct {
	RKey string `json:"rkey"`
	URI  string `json:"uri"`
	// Text is the bullet's text, shortened around the match when the
	// match is in it.
	Text   string `json:"text"`
	InNote bool   `json:"inNote,omitempty"`
	// Note is the matching part of the bullet's note, shortened around
	// the match, when the match is in the note.
	Note       string   `json:"note,omitempty"`
	Breadcrumb []string `json:"breadcrumb"` // ancestor texts, top first
	Parent     string   `json:"parent,omitempty"`
	Layout     string   `json:"layout,omitempty"`
	Done       bool     `json:"done,omitempty"`
	ChildCount int      `json:"childCount"`
	// Author is the contributor whose repository holds the bullet, when it
	// is a contributor's bullet shown in this outline (empty: this
	// repository's own).
	Author string `json:"author,omitempty"`
}

// Result is a page of hits.
type Result struct {
	Hits    []Hit  `json:"hits"`
	Cursor  string `json:"cursor,omitempty"` // set when more hits may follow
	Scanned int    `json:"scanned"`
	// Notices are what the searcher should know about the query (a layout
	// Bulleted does not render, and the layouts there are).
	Notices []string `json:"notices,omitempty"`
}

type matcher struct {
	q                  Query
	re                 *regexp.Regexp
	sub                string
	plain              bool   // a substring query (Text set, not Regex)
	needle             []byte // sub, for the corpus scan
	cf, ct, df, dt     stamp  // unbounded: minStamp, maxStamp
	hasC, hasD         bool
	handles, dids      []string
	tags               []string
	wantOpen, wantDone bool
}

// ParseDate reads a date bound as search takes it (created_from and the
// others): YYYY-MM-DD (end: its last instant) or RFC 3339; "" is none.
// Anything else is ErrQuery, naming the value.
func ParseDate(s string, end bool) (time.Time, error) { return parseDate(s, end) }

func parseDate(s string, end bool) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		return t, fmt.Errorf("%w: date %q is neither YYYY-MM-DD nor RFC 3339", ErrQuery, s)
	}
	if end {
		t = t.Add(24*time.Hour - time.Nanosecond)
	}
	return t, nil
}

func newMatcher(q Query) (*matcher, error) {
	m := &matcher{q: q, sub: strings.ToLower(q.Text)}
	if q.Regex && q.Text != "" {
		re, err := regexp.Compile("(?i)" + q.Text)
		if err != nil {
			return nil, fmt.Errorf("%w: regex: %v", ErrQuery, err)
		}
		m.re = re
	}
	if !q.Regex && q.Text != "" {
		m.plain, m.needle = true, []byte(m.sub)
	}
	for _, b := range []struct {
		s   string
		end bool
		to  *stamp
	}{{q.CreatedFrom, false, &m.cf}, {q.CreatedTo, true, &m.ct}, {q.CompletedFrom, false, &m.df}, {q.CompletedTo, true, &m.dt}} {
		t, err := parseDate(b.s, b.end)
		if err != nil {
			return nil, err
		}
		switch {
		case !t.IsZero():
			*b.to = stampOf(t)
		case b.end:
			*b.to = maxStamp
		default:
			*b.to = minStamp
		}
	}
	m.hasC = q.CreatedFrom != "" || q.CreatedTo != ""
	m.hasD = q.CompletedFrom != "" || q.CompletedTo != ""
	for _, mn := range q.Mentions {
		mn = strings.TrimPrefix(strings.TrimSpace(mn), "@")
		if strings.HasPrefix(mn, "did:") {
			m.dids = append(m.dids, mn)
		} else if mn != "" {
			m.handles = append(m.handles, strings.ToLower(mn))
		}
	}
	for _, t := range q.Tags {
		if t = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(t), "#")); t != "" {
			m.tags = append(m.tags, t)
		}
	}
	if q.Depth < 0 || q.Depth > 0 && q.Under == nil {
		return nil, fmt.Errorf("%w: depth must be at least 1, and only with under", ErrQuery)
	}
	switch q.State {
	case "":
	case "open":
		m.wantOpen = true
	case "done":
		m.wantDone = true
	default:
		return nil, fmt.Errorf("%w: state must be open or done, got %q", ErrQuery, q.State)
	}
	return m, nil
}

func inRange(t, from, to stamp) bool {
	return t != noStamp && from <= t && t <= to
}

// filter reports whether e passes every filter but the text.
func (m *matcher) filter(e *entry, text []byte) bool {
	layout := e.layoutName()
	if m.q.Layout != "" && layout != m.q.Layout && !(m.q.Layout == "bullet" && layout == "") {
		return false
	}
	if m.wantOpen && (layout != "todo" || e.completed != noStamp) {
		return false
	}
	if m.wantDone && (layout != "todo" || e.completed == noStamp) {
		return false
	}
	for _, t := range m.tags {
		if !slices.Contains(e.tags(), t) {
			return false
		}
	}
	for _, d := range m.dids {
		if !slices.Contains(e.mentions(), d) {
			return false
		}
	}
	for _, h := range m.handles {
		if !bytes.Contains(text, []byte("@"+h)) {
			return false
		}
	}
	if m.hasC && !inRange(e.created, m.cf, m.ct) {
		return false
	}
	if m.hasD && !inRange(e.completed, m.df, m.dt) {
		return false
	}
	return true
}

// match reports whether e, whose lower-cased text and note are given,
// matches; at is the byte offset of the text match in text (or note when
// inNote), -1 without a text filter.
func (m *matcher) match(e *entry, text, note []byte) (ok bool, at, n int, inNote bool) {
	at = -1
	if !m.filter(e, text) {
		return false, 0, 0, false
	}
	if m.q.Text == "" {
		return true, -1, 0, false
	}
	find := func(s []byte) (int, int) {
		if m.re != nil {
			if loc := m.re.FindIndex(s); loc != nil {
				return loc[0], loc[1] - loc[0]
			}
			return -1, 0
		}
		return bytes.Index(s, m.needle), len(m.needle)
	}
	if i, n := find(text); i >= 0 {
		return true, i, n, false
	}
	if i, n := find(note); i >= 0 {
		return true, i, n, true
	}
	return false, 0, 0, false
}

type step struct {
	S string `json:"s"`
	K string `json:"k"`
}

type cursor struct {
	Q string `json:"q"`           // fingerprint of the query
	P []step `json:"p"`           // the last hit's path
	R string `json:"r,omitempty"` // the revision of the tree searched
}

// CursorRev is the revision of the tree a search cursor was made from (""
// for a cursor that carries none), so that the next page can search the
// same tree while it is kept, or say that the outline changed in between.
func CursorRev(s string) (string, error) {
	var c cursor
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(raw, &c) != nil || len(c.P) == 0 {
		return "", fmt.Errorf("%w: not a cursor from this server", ErrCursor)
	}
	return c.R, nil
}

func fingerprint(q Query) string {
	under := ""
	if q.Under != nil {
		under = q.Under.Key()
	}
	f := []any{q.Text, q.Regex, q.Tags, q.Mentions, q.Layout, q.State, q.CreatedFrom, q.CreatedTo, q.CompletedFrom, q.CompletedTo, under}
	if q.Depth > 0 { // only then: the cursors of queries without it stay as they were
		f = append(f, q.Depth)
	}
	b, _ := json.Marshal(f)
	return shortHash(b)
}

func shortHash(b []byte) string {
	var h uint64 = 1469598103934665603
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return fmt.Sprintf("%016x", h)
}

func cmp(it *outline.Item, s step) int {
	if c := strings.Compare(it.SortKey(), s.S); c != 0 {
		return c
	}
	return strings.Compare(it.Key(), s.K)
}

// search is Search without the notices.
func (x *Index) search(t *outline.Tree, q Query) (*Result, error) {
	m, err := newMatcher(q)
	if err != nil {
		return nil, err
	}
	if q.Limit <= 0 {
		q.Limit = 20
	}
	var after []step
	fp := fingerprint(q)
	if q.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(q.Cursor)
		var c cursor
		if err != nil || json.Unmarshal(raw, &c) != nil || len(c.P) == 0 {
			return nil, fmt.Errorf("%w: not a cursor from this server", ErrCursor)
		}
		if c.Q != fp {
			return nil, fmt.Errorf("%w: it continues a different query; repeat the same filters", ErrCursor)
		}
		after = c.P
	}
	if x.background && !x.builtFor(t) {
		// cold: the first searches after start do not wait for the index
		// (nor for the warm-up building it); the walk costs what it visits
		res := x.walkTree(t, q, m, fp, after, func(it *outline.Item) *entry {
			if it.Mirror {
				return nil
			}
			return derive(it)
		})
		x.buildSoon(t)
		return res, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.update(t)
	if res, ok := x.scan(t, q, m, fp, after); ok {
		return res, nil
	}
	return x.walkTree(t, q, m, fp, after, x.entry), nil
}

// builtFor reports whether the index was built for t's repository (an
// update to t then costs what changed since).
func (x *Index) builtFor(t *outline.Tree) bool {
	d := x.built.Load()
	return d != nil && *d == t.DID.String()
}

// buildSoon builds the index for t in the background, unless a build is
// under way (the next cold search asks again if that one was for another
// repository).
func (x *Index) buildSoon(t *outline.Tree) {
	if !x.building.CompareAndSwap(false, true) {
		return
	}
	x.bg.Add(1)
	go func() {
		defer x.bg.Done()
		defer x.building.Store(false)
		x.Warm(t)
	}()
}

// Settle waits for a background build of the index to end (tests and
// benchmarks).
func (x *Index) Settle() { x.bg.Wait() }

// walkTree is a search by walking the tree in pre-order from the cursor's
// place (or Under), up to the page: for what the pre-order scan cannot
// start (scan) and for a cold index. entryOf gives a bullet's entry (nil
// for a mirror).
func (x *Index) walkTree(t *outline.Tree, q Query, m *matcher, fp string, after []step, entryOf func(*outline.Item) *entry) *Result {
	res := &Result{Hits: []Hit{}}
	var stack []*outline.Item
	var last *outline.Item
	full := false
	base := 0 // Under's ancestors in stack: len(stack)-base is the level below Under
	var visit func(it *outline.Item) bool
	visit = func(it *outline.Item) bool {
		level := len(stack) - base
		if q.Depth > 0 && level > q.Depth {
			return true
		}
		// entry, not the map: a detached subtree (a contribution searched
		// with Under) is not in the pre-order scan, so derived here
		if e := entryOf(it); e != nil && (q.Depth == 0 || level > 0) {
			res.Scanned++
			text, note := lowered(it)
			if ok, at, n, inNote := m.match(e, text, note); ok {
				if len(res.Hits) == q.Limit {
					full = true
					return false
				}
				res.Hits = append(res.Hits, hit(t, it, stack, at, n, inNote))
				last = it
			}
		}
		if q.Depth > 0 && level == q.Depth {
			return true // its children are below depth
		}
		stack = append(stack, it)
		defer func() { stack = stack[:len(stack)-1] }()
		for c := range it.Children.Items() {
			if !visit(c) {
				return false
			}
		}
		return true
	}
	all := func(items outline.Kids, from int) bool {
		for _, it := range items.From(from) {
			if !visit(it) {
				return false
			}
		}
		return true
	}
	var resume func(items outline.Kids, path []step) bool
	resume = func(items outline.Kids, path []step) bool {
		if len(path) == 0 {
			return all(items, 0)
		}
		i, found := items.SearchFunc(func(it *outline.Item) int { return cmp(it, path[0]) })
		if found {
			it := items.At(i)
			stack = append(stack, it)
			ok := resume(it.Children, path[1:])
			stack = stack[:len(stack)-1]
			if !ok {
				return false
			}
			i++
		}
		return all(items, i)
	}
	top := t.Roots
	if q.Under != nil {
		for p := t.Parent(q.Under); p != nil; p = t.Parent(p) {
			stack = append([]*outline.Item{p}, stack...)
		}
		base = len(stack)
		top = outline.KidsOf([]*outline.Item{q.Under})
	}
	resume(top, after)
	if full && last != nil {
		var path []step
		for p := last; p != nil; p = t.Parent(p) {
			path = append([]step{{S: p.SortKey(), K: p.Key()}}, path...)
			if p == q.Under {
				break
			}
		}
		raw, _ := json.Marshal(cursor{Q: fp, P: path, R: t.Rev})
		res.Cursor = base64.RawURLEncoding.EncodeToString(raw)
	}
	return res
}

// scan is Search over the pre-order slice; false when it cannot tell
// where to start (a cursor whose bullet is gone, another tree object),
// and the walk takes over.
func (x *Index) scan(t *outline.Tree, q Query, m *matcher, fp string, after []step) (*Result, bool) {
	if x.tree != t {
		return nil, false
	}
	start, stop, u := 0, x.rows(), 0
	if q.Under != nil {
		i, ok := x.position(t, q.Under)
		if !ok {
			return nil, false
		}
		start, stop, u = i, i+x.row(i).size, i
	}
	if len(after) > 0 {
		items := t.Roots // a cursor's path starts at the top, or at Under
		if q.Under != nil {
			items = outline.KidsOf([]*outline.Item{q.Under})
		}
		var last *outline.Item
		for _, s := range after {
			i, found := items.SearchFunc(func(it *outline.Item) int { return cmp(it, s) })
			if !found {
				return nil, false
			}
			last = items.At(i)
			items = last.Children
		}
		i, ok := x.position(t, last)
		if !ok || i+1 < start {
			return nil, false
		}
		start = max(start, i+1)
	}
	var ms []found
	if q.Depth > 0 {
		// the rows within Depth levels below Under, in runs of adjacent
		// rows, from start on
		for _, r := range x.levels(u, start, q.Depth) {
			if ms = append(ms, x.matches(m, r[0], r[1], q.Limit+1-len(ms))...); len(ms) > q.Limit {
				break
			}
		}
	} else {
		ms = x.matches(m, start, stop, q.Limit+1)
	}
	res := &Result{Hits: []Hit{}}
	var lastHit *outline.Item
	full := false
	for _, mt := range ms {
		i, at, n, inNote := mt.i, mt.at, mt.n, mt.inNote
		if len(res.Hits) == q.Limit {
			full = true
			break
		}
		it := x.row(i).it
		var stack []*outline.Item
		for p := t.Parent(it); p != nil; p = t.Parent(p) {
			stack = append(stack, p)
		}
		slices.Reverse(stack)
		res.Hits = append(res.Hits, hit(t, it, stack, at, n, inNote))
		lastHit = it
	}
	if full && lastHit != nil {
		var path []step
		for p := lastHit; p != nil; p = t.Parent(p) {
			path = append([]step{{S: p.SortKey(), K: p.Key()}}, path...)
			if p == q.Under {
				break
			}
		}
		raw, _ := json.Marshal(cursor{Q: fp, P: path, R: t.Rev})
		res.Cursor = base64.RawURLEncoding.EncodeToString(raw)
	}
	return res, true
}

// levels are the rows 1 to depth levels below row u, as runs [a, b) of
// adjacent rows, from row from on: what is deeper is skipped by subtree
// sizes, so it costs the rows within depth.
func (x *Index) levels(u, from, depth int) [][2]int {
	var out [][2]int
	add := func(i int) {
		if i < from {
			return
		}
		if n := len(out); n > 0 && out[n-1][1] == i {
			out[n-1][1] = i + 1
			return
		}
		out = append(out, [2]int{i, i + 1})
	}
	var below func(i, end, level int)
	below = func(i, end, level int) { // the children of the row before i, up to end
		for i < end {
			size := x.row(i).size
			if i+size > from { // before from: nothing of it is wanted
				add(i)
				if level < depth {
					below(i+1, i+size, level+1)
				}
			}
			i += size
		}
	}
	below(u+1, u+x.row(u).size, 1)
	return out
}

type found struct {
	i, at, n int
	inNote   bool
}

// Below parallelMin entries a range is scanned on one core; a longer one
// is cut into chunks of at least chunkMin entries that every core takes in
// order.
const (
	parallelMin = 20_000
	chunkMin    = 8_192
)

// matches returns the first limit matches in [start, stop), in order; a
// long range is scanned in chunks on every core, and no chunk is started
// once the chunks done hold limit matches (a common query stops early).
func (x *Index) matches(m *matcher, start, stop, limit int) []found {
	scan := func(a, b int) []found {
		if m.plain {
			return x.scanText(m, a, b, limit)
		}
		return x.scanEntries(m, a, b, limit)
	}
	workers := runtime.GOMAXPROCS(0)
	if stop-start < parallelMin || workers < 2 {
		return scan(start, stop)
	}
	k := min(4*workers, (stop-start)/chunkMin)
	bound := func(c int) int { return start + (stop-start)*c/k }
	parts := make([][]found, k)
	// chunks are claimed in order, so when the chunks done hold limit
	// matches, every chunk before them is claimed and will be done: the
	// first limit matches are in the claimed chunks, and no more are claimed
	var next, hits atomic.Int64
	work := func() {
		for hits.Load() < int64(limit) {
			c := int(next.Add(1) - 1)
			if c >= k {
				return
			}
			parts[c] = scan(bound(c), bound(c+1))
			hits.Add(int64(len(parts[c])))
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	var out []found
	for _, p := range parts {
		out = append(out, p...)
		if len(out) >= limit {
			return out[:limit]
		}
	}
	return out
}

// blocksOf calls fn for each block holding rows of [a, b), with the
// block's part of the range and its first row's number, until fn says
// stop.
func (x *Index) blocksOf(a, b int, fn func(bl *block, la, lb, base int) bool) {
	if a >= b {
		return
	}
	k, _ := x.find(a)
	for ; k < len(x.blocks) && x.starts[k] < b; k++ {
		base := x.starts[k]
		if !fn(x.blocks[k], max(a-base, 0), min(b-base, len(x.blocks[k].rows)), base) {
			return
		}
	}
}

// scanEntries matches entry by entry (regex and filter-only queries).
func (x *Index) scanEntries(m *matcher, a, b, limit int) []found {
	var out []found
	x.blocksOf(a, b, func(bl *block, la, lb, base int) bool {
		for i := la; i < lb && len(out) < limit; i++ {
			if e := bl.rows[i].e; e != nil {
				text, note := bl.text.region(i)
				if ok, at, n, inNote := m.match(e, text, note); ok {
					out = append(out, found{base + i, at, n, inNote})
				}
			}
		}
		return len(out) < limit
	})
	return out
}

// scanText finds a substring query's matches among rows [a, b) in the
// blocks' corpora: the first occurrence in an entry's region is in its
// text if the text has one (the text comes first), else in its note, as
// match finds it; the other filters are checked only for entries that
// contain the text.
func (x *Index) scanText(m *matcher, a, b, limit int) []found {
	var out []found
	x.blocksOf(a, b, func(bl *block, la, lb, base int) bool {
		out = bl.scanText(m, la, lb, base, limit, out)
		return len(out) < limit
	})
	return out
}

// scanText is Index.scanText within one block (rows [a, b) of it, the
// first numbered base in the scan).
func (bl *block) scanText(m *matcher, a, b, base, limit int, out []found) []found {
	c := &bl.text
	n := len(m.needle)
	p, end := int(c.off[a]), int(c.off[b])
	i := a
	for len(out) < limit && p < end {
		j := bytes.Index(c.buf[p:end], m.needle)
		if j < 0 {
			break
		}
		at := p + j
		// the entry whose region holds at: off only grows, and empty
		// regions (off[i] == off[i+1]) cannot hold it
		i += sort.Search(b-i, func(k int) bool { return int(c.off[i+k+1]) > at })
		var pos int
		var inNote bool
		off, note, next := int(c.off[i]), int(c.note[i]), int(c.off[i+1])
		switch {
		case at+n < note: // in the text (which ends with sep at note[i]-1)
			pos = at - off
		case at >= note && at+n < next:
			pos, inNote = at-note, true
		default: // across a separator: look again from the next byte
			p = at + 1
			continue
		}
		if text, _ := c.region(i); m.filter(bl.rows[i].e, text) {
			out = append(out, found{base + i, pos, n, inNote})
		}
		p = next // one hit per bullet
	}
	return out
}

// Window is how many characters of context a hit's text keeps on each side
// of the match.
const Window = 40

func hit(t *outline.Tree, it *outline.Item, stack []*outline.Item, at, n int, inNote bool) Hit {
	h := Hit{RKey: it.Key(), URI: t.NodeURI(it.Key()), Layout: it.Str("layout"), ChildCount: it.Children.Len(), Breadcrumb: []string{}, InNote: inNote}
	h.Done = h.Layout == "todo" && it.Str("completedAt") != ""
	if par := t.Parent(it); par != nil {
		h.Parent = par.Key()
	}
	for _, a := range stack {
		h.Breadcrumb = append(h.Breadcrumb, clip(a.Str("text"), 32))
	}
	if inNote {
		// the bullet's own text, and the note around the match
		h.Text = clip(it.Str("text"), 2*Window+20)
		if it.Note != nil {
			note, _ := it.Note.Value.Text("text")
			h.Note = around(note, at, n)
		}
		return h
	}
	h.Text = around(it.Str("text"), at, n)
	return h
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// around shortens s to Window characters either side of the byte range
// [at, at+n); lower-casing keeps byte offsets for the ASCII and most other
// text, and offsets are clamped to rune boundaries.
func around(s string, at, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if at < 0 || at > len(s) {
		return clip(s, 2*Window+20)
	}
	for at > 0 && !utf8.RuneStart(s[at]) {
		at--
	}
	end := min(at+n, len(s))
	for end < len(s) && !utf8.RuneStart(s[end]) {
		end++
	}
	pre, mid, post := []rune(s[:at]), s[at:end], []rune(s[end:])
	out := ""
	if len(pre) > Window {
		out = "…" + string(pre[len(pre)-Window:])
	} else {
		out = string(pre)
	}
	out += mid
	if len(post) > Window {
		out += string(post[:Window]) + "…"
	} else {
		out += string(post)
	}
	return out
}
