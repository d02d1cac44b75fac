package tools

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
)

// Snapshots keeps the trees that recent cursors were made from (read_outline
// and search pages), so that the next page continues on the same tree: a
// level paged while bullets move between pages still gives every child
// exactly once, and the page says that the outline changed since the read
// began. A cursor whose tree is no longer kept is read from the current tree,
// and the page says that bullets moved since may be missed or repeated.
//
// The bound is on the trees and on the memory they hold beyond the current
// tree of their repository: trees of one repository share every bullet that
// did not change (outline.Tree.Next), so a kept tree costs the bullets that
// changed since, unless the tree was built again from every record (a
// backend that cannot tell what a commit changed), when it costs them all.
// Several environments may share one Snapshots (trees are kept by
// repository and revision).
type Snapshots struct {
	MaxTrees int           // trees kept (0: DefaultSnapshotTrees)
	MaxBytes int64         // estimated bytes held beyond the current trees (0: DefaultSnapshotBytes)
	MaxAge   time.Duration // unused this long, a tree is dropped (0: DefaultSnapshotAge)
	Now      func() time.Time

	mu   sync.Mutex
	kept []*snapshot // most recently used first
}

// Defaults of a Snapshots.
const (
	DefaultSnapshotTrees = 3
	DefaultSnapshotBytes = 16 << 20
	DefaultSnapshotAge   = 10 * time.Minute
)

// itemBytes estimates the memory of one bullet of a tree that no other tree
// shares (the item, its record's decoded value, its note, its map slots):
// about 1,175 bytes a bullet measured on a generated 20,000-bullet outline
// built from its records. Its list of children is counted besides (a
// bullet moved in a level of 2,000 makes a new list of 2,000 pointers).
const itemBytes = 1200

type snapshot struct {
	t    *outline.Tree
	used time.Time
	// against vs (the current tree of its repository when last compared):
	// records created, changed or deleted, and bytes not shared with it
	vs      *outline.Tree
	changed int
	bytes   int64
}

func (s *Snapshots) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// compare fills in k's figures against cur (a tree of the same repository).
func (k *snapshot) compare(cur *outline.Tree) {
	if k.vs == cur {
		return
	}
	k.vs = cur
	if k.t == cur {
		k.changed, k.bytes = 0, 0
		return
	}
	changed, bytes := 0, int64(0)
	items := func(old, now *outline.Map[*outline.Item]) {
		removed := 0
		for key, it := range old.All() {
			n := now.Get(key)
			if n == it {
				continue
			}
			bytes += itemBytes + 8*int64(it.Children.Len())
			switch {
			case n == nil:
				removed++
				changed++
			case n.Rec.CID != it.Rec.CID || n.Rec.CID == "":
				changed++
			}
		}
		changed += now.Len() - (old.Len() - removed) // created
	}
	items(&k.t.Nodes, &cur.Nodes)
	items(&k.t.Mirrors, &cur.Mirrors)
	removed := 0
	for key, n := range k.t.Notes.All() {
		m, ok := cur.Notes.Lookup(key)
		switch {
		case !ok:
			removed++
			changed++
		case m.CID != n.CID || m.CID == "":
			changed++
		}
	}
	changed += cur.Notes.Len() - (k.t.Notes.Len() - removed)
	k.changed, k.bytes = changed, bytes
}

// keep remembers t, which a cursor was just made from; cur is the current
// tree of t's repository.
func (s *Snapshots) keep(t, cur *outline.Tree) {
	if t.Rev == "" {
		return // a cursor without a revision is never looked up
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var k *snapshot
	for i, x := range s.kept {
		if x.t.DID == t.DID && x.t.Rev == t.Rev {
			k = x
			s.kept = append(s.kept[:i], s.kept[i+1:]...)
			break
		}
	}
	if k == nil {
		k = &snapshot{t: t}
	}
	k.used = now
	s.kept = append([]*snapshot{k}, s.kept...)
	s.trim(cur, now)
}

// get returns the kept tree of repository did at revision rev, and how
// many records changed between it and cur (the current tree), or nil.
func (s *Snapshots) get(did, rev string, cur *outline.Tree) (*outline.Tree, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.trim(cur, now)
	for _, k := range s.kept {
		if k.t.DID.String() == did && k.t.Rev == rev {
			k.used = now
			k.compare(cur)
			return k.t, k.changed
		}
	}
	return nil, 0
}

// Len is how many trees are kept.
func (s *Snapshots) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.kept)
}

// Drop forgets the kept trees of repository did. The hosted instance calls
// it when it closes a user's engine: their trees would each hold a whole
// outline then, while MaxBytes counts only what they do not share with
// the current tree. A cursor of a dropped tree says that its revision is
// no longer kept.
func (s *Snapshots) Drop(did string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.kept[:0]
	for _, k := range s.kept {
		if k.t.DID.String() != did {
			out = append(out, k)
		}
	}
	clear(s.kept[len(out):])
	s.kept = out
}

// trim drops trees unused for MaxAge, then the least recently used beyond
// MaxTrees or MaxBytes. The sizes of cur's repository's trees are measured
// against cur.
func (s *Snapshots) trim(cur *outline.Tree, now time.Time) {
	maxTrees, maxBytes, maxAge := s.MaxTrees, s.MaxBytes, s.MaxAge
	if maxTrees <= 0 {
		maxTrees = DefaultSnapshotTrees
	}
	if maxBytes <= 0 {
		maxBytes = DefaultSnapshotBytes
	}
	if maxAge <= 0 {
		maxAge = DefaultSnapshotAge
	}
	var total int64
	out := s.kept[:0]
	for _, k := range s.kept {
		if cur != nil && k.t.DID == cur.DID {
			k.compare(cur)
		}
		if now.Sub(k.used) > maxAge || len(out) >= maxTrees || total+k.bytes > maxBytes {
			continue
		}
		total += k.bytes
		out = append(out, k)
	}
	clear(s.kept[len(out):])
	s.kept = out
}

// snapshots returns env's Snapshots, made on first use.
func (env *Env) snapshots() *Snapshots {
	env.snapMu.Lock()
	defer env.snapMu.Unlock()
	if env.Snapshots == nil {
		env.Snapshots = &Snapshots{}
	}
	return env.Snapshots
}

// pageChange is what a page says when its cursor was made from another
// revision than the current one.
type pageChange struct {
	Rev      string `json:"rev"`               // the revision the read began at ("" : not said by the cursor)
	Now      string `json:"now"`               // the current revision
	Changed  *int   `json:"changed,omitempty"` // bullets and notes created, changed or deleted since (when the snapshot is kept)
	Snapshot bool   `json:"snapshot"`          // the page continues on the tree the read began at
	// Contributions: contributors' bullets shown in the outline changed
	// since (they are read live).
	Contributions bool   `json:"contributions,omitempty"`
	Message       string `json:"message"`
}

// pageTree picks the tree a page continues on: cur (the current tree of
// the repository read) when the cursor was made from it or there is no
// cursor; the tree the cursor was made from while it is kept; otherwise
// cur, with a change saying that bullets may be missed or repeated. rev
// reads a cursor's revision; a cursor it cannot read is left to the read
// to refuse.
func (env *Env) pageTree(cur *outline.Tree, cursor string, rev func(string) (string, error)) (*outline.Tree, *pageChange) {
	if cursor == "" {
		return cur, nil
	}
	r, err := rev(cursor)
	if err != nil || r == cur.Rev {
		return cur, nil
	}
	c := &pageChange{Rev: r, Now: cur.Rev}
	if r == "" {
		c.Message = "this cursor does not say which revision of the outline it was made at, so whether the outline changed since cannot be told: this page is read from the current outline, and bullets moved since the read began may be missed or repeated; read again from the start (without cursor) for a complete read"
		return cur, c
	}
	if t, n := env.snapshots().get(cur.DID.String(), r, cur); t != nil {
		c.Changed, c.Snapshot = &n, true
		c.Message = fmt.Sprintf("the outline has changed since this read began (revision %s, now %s: %d bullet(s) or note(s) created, changed, moved or deleted); this page continues from the snapshot the read began at, so every bullet comes exactly once, as it was then; read again from the start (without cursor) for the current state", r, cur.Rev, n)
		return t, c
	}
	c.Message = fmt.Sprintf("the outline has changed since this read began (revision %s, now %s) and that revision is no longer kept: this page is read from the current outline, so bullets moved since may be missed or repeated; read again from the start (without cursor) for a complete read", r, cur.Rev)
	return cur, c
}

// keepPage remembers t, a page's tree, when the page gave a cursor.
func (env *Env) keepPage(t, cur *outline.Tree, cursor string) {
	if cursor != "" {
		env.snapshots().keep(t, cur)
	}
}

// withChange adds c to a page result: "changedSince" in its structured
// content and a last text block with the message.
func withChange(res *mcp.CallToolResult, c *pageChange) *mcp.CallToolResult {
	if c == nil || res == nil || res.IsError {
		return res
	}
	res.Content = append(res.Content, mcp.NewTextContent("Note: "+c.Message+"."))
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		m = map[string]any{}
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			_ = json.Unmarshal(b, &m)
		}
	}
	m["changedSince"] = c
	res.StructuredContent = m
	return res
}

// searchCursorRev is the revision a search cursor was made at: the owner's
// own hits' (search.CursorRev) or the contributors' (contribParts).
func searchCursorRev(c string) (string, error) {
	if strings.HasPrefix(c, contribPrefix) {
		rev, _ := contribParts(c)
		return rev, nil
	}
	return search.CursorRev(c)
}

// contribParts reads the owner's revision and the ContributionsPrint of a
// contributors' cursor ("~SKIP.QUERYPRINT.REV.CONTRIBUTIONSPRINT").
func contribParts(c string) (rev, print string) {
	parts := strings.Split(strings.TrimPrefix(c, contribPrefix), ".")
	if len(parts) > 2 {
		rev = parts[2]
	}
	if len(parts) > 3 {
		print = parts[3]
	}
	return rev, print
}

// contributionsChange adds to c (nil: the owner's outline did not change)
// that the contributors' bullets shown in the outline changed since the
// cursor was made (was, now: view.ContributionsPrint). Contributors' trees
// are read live, never kept: their bullets may be missed or repeated.
func contributionsChange(c *pageChange, cur *outline.Tree, was, now string) *pageChange {
	if was == now {
		return c
	}
	msg := "contributors' bullets shown in this outline changed since this read began (they are read live, not from a snapshot), so theirs may be missed or repeated; read again from the start (without cursor) for a complete read"
	if c == nil {
		return &pageChange{Rev: cur.Rev, Now: cur.Rev, Contributions: true, Message: msg}
	}
	c.Contributions = true
	c.Message += "; also, " + msg
	return c
}
