package outline

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// The change log: what the kept tree learnt at each advance, and who wrote
// it. Every time the engine brings its tree forward (Tree), the records
// that changed between the two trees are attributed: to a writer of this
// engine (WithWriter: a session of the MCP server) when they are what that
// writer's own batch wrote, else to another writer (the app in a browser,
// another device, another process on the same data directory). A bounded
// log of those advances answers ChangedSince: what others changed since a
// revision a session last saw.

// Log bounds: advances kept, and per advance and writer the record keys
// kept for counting distinct records and the change lines kept in full.
const (
	LogAdvances   = 64
	maxChanges    = 20 // change lines in one answer of ChangedSince
	maxSections   = 10 // sections in one answer (the last one sums the rest)
	logKeys       = 256
	logLines      = 8
	logSections   = 16
	excerptRunes  = 50
	maxOwnMarks   = 300_000
	serverWriter  = "\x00server" // this engine's writes made without a writer
	externalWrite = ""           // not this engine
	otherSections = "(other sections)"
)

type writerKey struct{}

// WithWriter returns a context whose writes the engine attributes to
// writer (a session of this server), so that ChangedSince(rev, writer)
// leaves them out; writes without a writer are this server's, and count
// as others' for every writer.
func WithWriter(ctx context.Context, writer string) context.Context {
	return context.WithValue(ctx, writerKey{}, writer)
}

func writerOf(ctx context.Context) string {
	if w, _ := ctx.Value(writerKey{}).(string); w != "" {
		return w
	}
	return serverWriter
}

// Change is one record changed by another writer, as the agent is told.
type Change struct {
	RKey       string `json:"rkey"`
	Collection string `json:"collection"`
	// Change is created, edited, moved, "moved, edited" or deleted (for a
	// note, comment, comment policy or outline record, of that record).
	Change string `json:"change"`
	// Text is the start of the bullet's text (the bullet a note, policy or
	// outline record belongs to, the bullet a comment is on).
	Text string `json:"text,omitempty"`
	// Node is the bullet's record key when the record is not the bullet
	// itself (a note, comment, policy, outline record).
	Node string `json:"node,omitempty"`
	// Section is the record key of the top-level bullet it is under ("":
	// detached or unknown).
	Section string `json:"section,omitempty"`
	writer  string
}

// Section counts the changes under one top-level bullet.
type Section struct {
	RKey  string `json:"rkey"` // "": detached, or beyond the sections counted one by one
	Text  string `json:"text"`
	Count int    `json:"count"`
}

// Changed is what others changed since a revision (ChangedSince).
type Changed struct {
	Since string // the revision asked about
	Rev   string // the kept tree's revision: what the caller has now seen ("": no tree yet)
	// Complete is false when the log no longer reaches back to Since:
	// records may have changed since then that it cannot name.
	Complete bool
	// Count is how many records others changed (a record counts once);
	// Approximate: more changed than the log counts one by one, so a
	// record changed in several advances may count more than once.
	Count       int
	Approximate bool
	// External: changed by writers other than this server; Sessions: by
	// other writers of this server (its other sessions).
	External, Sessions int
	Sections           []Section // most changes first, at most maxSections
	Changes            []Change  // the newest first, at most maxChanges (logLines per advance)
}

// Any reports whether there is something to tell.
func (c *Changed) Any() bool { return c != nil && (c.Count > 0 || !c.Complete) }

// tally is what one writer changed in one advance.
type tally struct {
	count    int
	keys     map[string]bool // coll/rkey, at most logKeys
	over     int             // changes beyond keys
	lines    []Change        // at most logLines
	sections map[string]*Section
}

type advance struct {
	from, to string // revisions
	by       map[string]*tally
}

// ownMark is what this engine's latest write of one record key was.
type ownMark struct {
	writer  string
	pending bool   // sent, not yet known to have landed
	gen     uint64 // the pend that made it (pending)
	rev     string // the commit it landed in
	deleted bool
	cid     string // "": unknown
}

// changeLog is the engine's log of advances and its own writes' marks.
type changeLog struct {
	mu      sync.Mutex
	base    string // the log is complete from this revision on ("": no tree yet)
	entries []advance
	own     map[string]ownMark
	gen     uint64
}

// pend marks batch as being sent by writer; unpend(gen) clears what did
// not land.
func (l *changeLog) pend(batch []store.Write, writer string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gen++
	if l.own == nil {
		l.own = map[string]ownMark{}
	}
	for _, w := range batch {
		if len(l.own) >= maxOwnMarks {
			break // beyond it, this engine's own writes may be told as others'
		}
		l.own[w.Collection+"/"+w.RKey] = ownMark{writer: writer, pending: true, gen: l.gen}
	}
	return l.gen
}

func (l *changeLog) unpend(gen uint64) {
	if gen == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, m := range l.own {
		if m.pending && m.gen == gen {
			delete(l.own, k)
		}
	}
}

// landed marks batch as committed at rev (results: the repository's
// answer, one per write, when known).
func (l *changeLog) landed(batch []store.Write, rev string, results []store.WriteResult, writer string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.own == nil {
		l.own = map[string]ownMark{}
	}
	for i, w := range batch {
		m := ownMark{writer: writer, rev: rev, deleted: w.Op == store.Delete}
		if len(results) == len(batch) && strings.HasSuffix(results[i].URI, "/"+w.Collection+"/"+w.RKey) {
			m.cid = results[i].CID
		}
		k := w.Collection + "/" + w.RKey
		if _, ok := l.own[k]; ok || len(l.own) < maxOwnMarks {
			l.own[k] = m
		}
	}
}

// matches reports whether the record now (exists, r) is this mark's write.
func (m ownMark) matches(r store.Record, exists bool) bool {
	switch {
	case m.pending:
		return true
	case m.deleted:
		return !exists
	}
	return exists && (m.cid == "" || m.cid == r.CID)
}

// started sets the log's base at the first tree kept.
func (l *changeLog) started(rev string) {
	l.mu.Lock()
	if l.base == "" {
		l.base = rev
	}
	l.mu.Unlock()
}

// add logs the advance from before to after (a nil adv: nothing changed)
// and lets go of the marks of own commits after now holds.
func (l *changeLog) add(before, after *Tree, adv *advance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.base == "" {
		l.base = before.Rev
	}
	for k, m := range l.own {
		if !m.pending && m.rev <= after.Rev {
			delete(l.own, k)
		}
	}
	if adv == nil || len(adv.by) == 0 {
		return
	}
	l.entries = append(l.entries, *adv)
	if len(l.entries) > LogAdvances {
		l.base = l.entries[0].to
		l.entries = slices.Delete(l.entries, 0, 1)
	}
}

// classify attributes the records that changed from before to after
// (candidates: the keys that may have; nil with all: every record).
func (l *changeLog) classify(before, after *Tree, candidates []recKey) *advance {
	l.mu.Lock()
	own := make(map[string]ownMark, min(len(candidates), len(l.own)))
	for _, c := range candidates {
		if m, ok := l.own[c.coll+"/"+c.rkey]; ok {
			own[c.coll+"/"+c.rkey] = m
		}
	}
	l.mu.Unlock()
	adv := &advance{from: before.Rev, to: after.Rev, by: map[string]*tally{}}
	seen := make(map[recKey]bool, len(candidates))
	for _, c := range candidates {
		if seen[c] {
			continue
		}
		seen[c] = true
		b, hadB := before.Record(c.coll, c.rkey)
		a, hasA := after.Record(c.coll, c.rkey)
		if !hadB && !hasA || hadB && hasA && b.CID == a.CID && b.CID != "" {
			continue
		}
		writer := externalWrite
		if m, ok := own[c.coll+"/"+c.rkey]; ok && m.matches(a, hasA) {
			writer = m.writer
		}
		t := adv.by[writer]
		if t == nil {
			t = &tally{keys: map[string]bool{}, sections: map[string]*Section{}}
			adv.by[writer] = t
		}
		t.count++
		if len(t.keys) < logKeys {
			t.keys[c.coll+"/"+c.rkey] = true
		} else {
			t.over++
		}
		ch := describe(before, after, c, b, hadB, a, hasA, len(t.lines) < logLines)
		sec := t.sections[ch.Section]
		if sec == nil && len(t.sections) >= logSections {
			sec = t.sections["?"]
			if sec == nil {
				sec = &Section{Text: otherSections}
				t.sections["?"] = sec
			}
		}
		if sec == nil {
			sec = &Section{RKey: ch.Section, Text: sectionText(after, before, ch.Section)}
			t.sections[ch.Section] = sec
		}
		sec.Count++
		if len(t.lines) < logLines {
			ch.writer = writer
			t.lines = append(t.lines, ch)
		}
	}
	return adv
}

type recKey struct{ coll, rkey string }

// keysOf are the record keys of changes.
func keysOf(changes []store.Record) []recKey {
	out := make([]recKey, 0, len(changes))
	for _, r := range changes {
		out = append(out, recKey{r.Collection, r.RKey})
	}
	return out
}

// diffKeys are the records whose CID differs between a and b, or that
// only one of them has (a full comparison: when the repository could not
// say what changed).
func diffKeys(a, b *Tree) []recKey {
	var out []recKey
	items := func(coll string, x, y *Map[*Item]) {
		for k, it := range y.All() {
			if o := x.Get(k); o == nil || o.Rec.CID != it.Rec.CID || it.Rec.CID == "" && o != it {
				out = append(out, recKey{coll, k})
			}
		}
		for k := range x.All() {
			if y.Get(k) == nil {
				out = append(out, recKey{coll, k})
			}
		}
	}
	recs := func(coll string, x, y *Map[store.Record]) {
		key := func(k string) recKey {
			if coll == "" {
				c, r, _ := strings.Cut(k, "/")
				return recKey{c, r}
			}
			return recKey{coll, k}
		}
		for k, r := range y.All() {
			if o, ok := x.Lookup(k); !ok || o.CID != r.CID || r.CID == "" {
				out = append(out, key(k))
			}
		}
		for k := range x.All() {
			if _, ok := y.Lookup(k); !ok {
				out = append(out, key(k))
			}
		}
	}
	items(lexicon.Node, &a.Nodes, &b.Nodes)
	items(lexicon.Mirror, &a.Mirrors, &b.Mirrors)
	recs(lexicon.Note, &a.Notes, &b.Notes)
	recs(lexicon.CommentPolicy, &a.Policies, &b.Policies)
	recs(lexicon.Outline, &a.Outlines, &b.Outlines)
	recs("", &a.Others, &b.Others)
	if !sameRecords(a.Comments, b.Comments) {
		ac := map[string]string{}
		for _, r := range a.Comments {
			ac[r.RKey] = r.CID
		}
		for _, r := range b.Comments {
			if c, ok := ac[r.RKey]; !ok || c != r.CID || c == "" {
				out = append(out, recKey{lexicon.Comment, r.RKey})
			}
			delete(ac, r.RKey)
		}
		for k := range ac {
			out = append(out, recKey{lexicon.Comment, k})
		}
	}
	return out
}

func sameRecords(a, b []store.Record) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	for i := range a {
		if a[i].RKey != b[i].RKey || a[i].CID != b[i].CID || a[i].CID == "" {
			return false
		}
	}
	return true
}

// describe says how one record changed (full: with its text and whether
// a bullet moved; else only its section, for counting).
func describe(before, after *Tree, c recKey, b store.Record, hadB bool, a store.Record, hasA bool, full bool) Change {
	ch := Change{RKey: c.rkey, Collection: c.coll}
	switch {
	case !hadB:
		ch.Change = "created"
	case !hasA:
		ch.Change = "deleted"
	default:
		ch.Change = "edited"
	}
	// the bullet it is about, in the tree that has it
	t, rec := after, a
	if !hasA {
		t, rec = before, b
	}
	var it *Item
	switch c.coll {
	case lexicon.Node:
		it = t.Nodes.Get(c.rkey)
		if hadB && hasA && full {
			bi, ai := before.Nodes.Get(c.rkey), after.Nodes.Get(c.rkey)
			if bi != nil && ai != nil {
				moved := bi.ParentKey() != ai.ParentKey() || bi.Detached != ai.Detached || bi.SortKey() != ai.SortKey()
				edited := bi.Str("text") != ai.Str("text") || !moved
				switch {
				case moved && edited:
					ch.Change = "moved, edited"
				case moved:
					ch.Change = "moved"
				}
			}
		}
	case lexicon.Mirror:
		it = t.Mirrors.Get(c.rkey)
	case lexicon.Note, lexicon.CommentPolicy, lexicon.Outline:
		it = after.Nodes.Get(c.rkey)
		if it == nil {
			it, t = before.Nodes.Get(c.rkey), before
		} else {
			t = after
		}
		ch.Node = c.rkey
	case lexicon.Comment:
		subject, _ := rec.Value.Text("subject")
		if u, err := parseNodeURI(subject); err == nil {
			ch.Node = u
			if it = after.Nodes.Get(u); it != nil {
				t = after
			} else if it = before.Nodes.Get(u); it != nil {
				t = before
			}
		}
	}
	if it == nil {
		if s, _ := rec.Value.Text("text"); s != "" && full {
			ch.Text = excerpt(s)
		}
		return ch
	}
	ch.Section = sectionOf(t, it)
	if !full {
		return ch
	}
	if it.Mirror {
		ch.Text = "(mirror)"
	} else {
		ch.Text = excerpt(it.Str("text"))
	}
	return ch
}

// parseNodeURI is the record key of an at:// URI of a node.
func parseNodeURI(s string) (string, error) {
	_, rest, ok := strings.Cut(strings.TrimPrefix(s, "at://"), "/"+lexicon.Node+"/")
	if !ok || !strings.HasPrefix(s, "at://") || rest == "" || strings.Contains(rest, "/") {
		return "", errNotNode
	}
	return rest, nil
}

var errNotNode = errors.New("not a node URI")

// sectionOf is the key of the top-level bullet it is under ("": detached).
func sectionOf(t *Tree, it *Item) string {
	for i := 0; i < 10_000; i++ {
		if it.Detached != "" {
			return ""
		}
		p := t.Parent(it)
		if p == nil {
			return it.Key()
		}
		it = p
	}
	return ""
}

func sectionText(after, before *Tree, key string) string {
	if key == "" {
		return "(detached)"
	}
	it := after.Nodes.Get(key)
	if it == nil {
		it = after.Mirrors.Get(key)
	}
	if it == nil {
		it = before.Nodes.Get(key)
	}
	if it == nil {
		return key
	}
	if it.Mirror {
		return "(mirror)"
	}
	return excerpt(it.Str("text"))
}

// excerpt is the start of s on one line, at most excerptRunes runes.
func excerpt(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= excerptRunes {
		return s
	}
	n := 0
	for i := range s {
		if n == excerptRunes-1 {
			return s[:i] + "…"
		}
		n++
	}
	return s
}

// changedSince merges the advances after since, leaving out writer's.
func (l *changeLog) changedSince(since, now, writer string) *Changed {
	c := &Changed{Since: since, Rev: now, Complete: true}
	if since == "" || now == "" || since >= now {
		return c
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.base == "" || since < l.base {
		c.Complete = false
	}
	keys := map[string]bool{}
	secs := map[string]*Section{}
	lined := map[string]bool{}
	for i := len(l.entries) - 1; i >= 0; i-- {
		e := l.entries[i]
		if e.to <= since {
			break
		}
		writers := make([]string, 0, len(e.by))
		for w := range e.by {
			if w != writer {
				writers = append(writers, w)
			}
		}
		slices.Sort(writers)
		for _, w := range writers {
			t := e.by[w]
			n := 0
			for k := range t.keys {
				if !keys[k] {
					keys[k] = true
					n++
				}
			}
			n += t.over
			if t.over > 0 {
				c.Approximate = true
			}
			c.Count += n
			if w == externalWrite {
				c.External += n
			} else {
				c.Sessions += n
			}
			for k, s := range t.sections {
				if secs[k] == nil {
					secs[k] = &Section{RKey: s.RKey, Text: s.Text}
				}
				secs[k].Count += s.Count
			}
			for _, ch := range t.lines {
				if k := ch.Collection + "/" + ch.RKey; !lined[k] && len(c.Changes) < maxChanges {
					lined[k] = true
					c.Changes = append(c.Changes, ch)
				}
			}
		}
	}
	for _, s := range secs {
		c.Sections = append(c.Sections, *s)
	}
	rest := Section{Text: otherSections}
	if s := secs["?"]; s != nil {
		rest.Count = s.Count
	}
	c.Sections = slices.DeleteFunc(c.Sections, func(s Section) bool { return s.Text == otherSections })
	slices.SortFunc(c.Sections, func(a, b Section) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.RKey, b.RKey))
	})
	if len(c.Sections) > maxSections-1 {
		for _, s := range c.Sections[maxSections-1:] {
			rest.Count += s.Count
		}
		c.Sections = c.Sections[:maxSections-1]
	}
	if rest.Count > 0 {
		c.Sections = append(c.Sections, rest) // last
	}
	return c
}

// ChangedSince is what writers other than writer (a WithWriter tag; ""
// leaves out nothing of this engine's) changed in the outline after
// revision since, as far as the kept tree knows (it does not read the
// repository: the tree is brought forward by every read). Rev in the
// answer is the kept tree's revision: pass it next time.
func (e *Engine) ChangedSince(since, writer string) *Changed {
	e.mu.Lock()
	now := ""
	if e.cache != nil {
		now = e.cache.Rev
	}
	e.mu.Unlock()
	if writer == "" {
		writer = "\x00none"
	}
	return e.changes.changedSince(since, now, writer)
}

// keepFrom makes t the kept tree unless a newer one is there already, and
// logs who changed what since the tree it replaces (changes: what the
// repository said changed since the tree t was made from; all: it could
// not say, compare every record). The comparison runs without the lock.
func (e *Engine) keepFrom(t *Tree, changes []store.Record, all bool) *Tree {
	for {
		e.mu.Lock()
		cur := e.cache
		e.mu.Unlock()
		if cur != nil && cur.Rev > t.Rev {
			return t
		}
		var adv *advance
		if cur != nil && cur.Commit != t.Commit && cur.DID == t.DID {
			var keys []recKey
			if all {
				keys = diffKeys(cur, t)
			} else {
				keys = keysOf(changes)
			}
			adv = e.changes.classify(cur, t, keys)
		}
		e.mu.Lock()
		if e.cache != cur {
			e.mu.Unlock()
			continue // another read kept a tree meanwhile: compare with it
		}
		e.cache = t
		if cur == nil || cur.DID != t.DID {
			e.changes.started(t.Rev)
		} else {
			e.changes.add(cur, t, adv)
		}
		e.mu.Unlock()
		return t
	}
}
