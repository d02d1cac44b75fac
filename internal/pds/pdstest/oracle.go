package pdstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// The oracle reads a repository back through the reference PDS itself
// (com.atproto.repo.listRecords, straight over HTTP, never through package
// pds) and checks the outline it holds.

// Record is one record as the reference PDS lists it.
type Record struct {
	Collection string
	RKey       string
	CID        string
	Value      map[string]any // the record's JSON
}

// OracleTimeout bounds one request of the oracle; OracleMaxBody one answer.
const (
	OracleTimeout = 30 * time.Second
	OracleMaxBody = 16 << 20
)

var oracleClient = &http.Client{Timeout: OracleTimeout}

func oracleGet(ctx context.Context, pdsURL, nsid string, params url.Values, out any) error {
	u := strings.TrimRight(pdsURL, "/") + "/xrpc/" + nsid + "?" + params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := oracleClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, OracleMaxBody+1))
	if err != nil {
		return fmt.Errorf("%s: %w", nsid, err)
	}
	if len(raw) > OracleMaxBody {
		return fmt.Errorf("%s: answer larger than %d bytes", nsid, OracleMaxBody)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d: %s", nsid, resp.StatusCode, raw)
	}
	return json.Unmarshal(raw, out)
}

// ErrKeptChanging means the repository's head moved during every attempt
// of ReadRecords.
var ErrKeptChanging = errors.New("the repository kept changing while it was listed")

// ReadRecords lists every app.bulleted.* record of did on the PDS at
// pdsURL with com.atproto.repo.listRecords, pages of 100, between two reads
// of the head (getLatestCommit); if the head moved meanwhile it lists again
// (at most five times). Records come sorted by collection, then key.
func ReadRecords(ctx context.Context, pdsURL string, did syntax.DID) ([]Record, error) {
	head := func() (string, error) {
		var out struct{ CID string }
		err := oracleGet(ctx, pdsURL, GetLatestCommit, url.Values{"did": {did.String()}}, &out)
		return out.CID, err
	}
	for range 5 {
		before, err := head()
		if err != nil {
			return nil, err
		}
		var recs []Record
		for _, coll := range lexicon.Collections {
			cursor := ""
			for {
				params := url.Values{"repo": {did.String()}, "collection": {coll}, "limit": {"100"}}
				if cursor != "" {
					params.Set("cursor", cursor)
				}
				var out struct {
					Cursor  string `json:"cursor"`
					Records []struct {
						URI   string         `json:"uri"`
						CID   string         `json:"cid"`
						Value map[string]any `json:"value"`
					} `json:"records"`
				}
				if err := oracleGet(ctx, pdsURL, ListRecords, params, &out); err != nil {
					return nil, err
				}
				for _, r := range out.Records {
					u, err := syntax.ParseATURI(r.URI)
					if err != nil {
						return nil, fmt.Errorf("listRecords: %w", err)
					}
					if u.Collection().String() != coll || u.Authority().String() != did.String() {
						return nil, fmt.Errorf("listRecords %s of %s returned %s", coll, did, r.URI)
					}
					recs = append(recs, Record{Collection: coll, RKey: u.RecordKey().String(), CID: r.CID, Value: r.Value})
				}
				if len(out.Records) < 100 || out.Cursor == "" {
					break
				}
				cursor = out.Cursor
			}
		}
		after, err := head()
		if err != nil {
			return nil, err
		}
		if after == before {
			slices.SortFunc(recs, func(a, b Record) int {
				return strings.Compare(a.Collection+"/"+a.RKey, b.Collection+"/"+b.RKey)
			})
			return recs, nil
		}
	}
	return nil, ErrKeptChanging
}

// Node is a node or mirror of an outline read back.
type Node struct {
	Rec      Record
	Mirror   bool
	Note     *Record // the app.bulleted.note of the same key whose subject is this node
	Parent   *Node   // nil at the top level
	Children []*Node // in (sortKey bytes, record key, nodes first) order
	Detached string  // why it does not hang in the tree ("" if it does)
}

// Text is the node's text.
func (n *Node) Text() string { s, _ := n.Rec.Value["text"].(string); return s }

// SortKey is the node's sortKey.
func (n *Node) SortKey() string { s, _ := n.Rec.Value["sortKey"].(string); return s }

// Tree is an outline read back: every node and mirror under its parent.
type Tree struct {
	DID   syntax.DID
	Roots []*Node
	// Nodes and Mirrors by record key.
	Nodes   map[string]*Node
	Mirrors map[string]*Node
	// Detached are the nodes and mirrors that do not hang in the tree: the
	// parent is missing, not a node of this repository, or they sit in a
	// cycle.
	Detached []*Node
	// StrayNotes are notes with no node of their key, or whose subject is
	// not that node.
	StrayNotes []Record
	// Counts is the number of records by collection.
	Counts map[string]int
}

func compareNodes(a, b *Node) int {
	if c := strings.Compare(a.SortKey(), b.SortKey()); c != 0 {
		return c
	}
	if c := strings.Compare(a.Rec.RKey, b.Rec.RKey); c != 0 {
		return c
	}
	switch {
	case a.Mirror == b.Mirror:
		return 0
	case !a.Mirror:
		return -1
	}
	return 1
}

// Outline builds the tree of did's records: parent → children in
// (sortKey bytes, record key) order, notes attached to the node of their
// key.
func Outline(did syntax.DID, recs []Record) *Tree {
	t := &Tree{DID: did, Nodes: map[string]*Node{}, Mirrors: map[string]*Node{}, Counts: map[string]int{}}
	var all []*Node
	var notes []Record
	for _, r := range recs {
		t.Counts[r.Collection]++
		switch r.Collection {
		case lexicon.Node:
			n := &Node{Rec: r}
			t.Nodes[r.RKey] = n
			all = append(all, n)
		case lexicon.Mirror:
			n := &Node{Rec: r, Mirror: true}
			t.Mirrors[r.RKey] = n
			all = append(all, n)
		case lexicon.Note:
			notes = append(notes, r)
		}
	}
	prefix := "at://" + did.String() + "/" + lexicon.Node + "/"
	for _, r := range notes {
		n := t.Nodes[r.RKey]
		if subj, _ := r.Value["subject"].(string); n == nil || subj != prefix+r.RKey {
			t.StrayNotes = append(t.StrayNotes, r)
			continue
		}
		rc := r
		n.Note = &rc
	}
	// parents
	for _, n := range all {
		p, _ := n.Rec.Value["parent"].(string)
		switch {
		case p == "":
		case !strings.HasPrefix(p, prefix):
			n.Detached = "parent " + p + " is not a node of this repository"
		default:
			if parent := t.Nodes[strings.TrimPrefix(p, prefix)]; parent != nil {
				n.Parent = parent
			} else {
				n.Detached = "parent " + p + " is missing"
			}
		}
	}
	// cycles: a node whose ancestors come back to it
	for _, n := range all {
		seen := map[*Node]bool{}
		for a := n; a != nil; a = a.Parent {
			if seen[a] {
				n.Detached = "in a cycle"
				break
			}
			seen[a] = true
		}
	}
	for _, n := range all {
		// under a detached ancestor: it hangs from the detached one, which
		// is reported
		switch {
		case n.Detached != "":
			t.Detached = append(t.Detached, n)
		case n.Parent == nil:
			t.Roots = append(t.Roots, n)
		default:
			n.Parent.Children = append(n.Parent.Children, n)
		}
	}
	slices.SortFunc(t.Roots, compareNodes)
	slices.SortFunc(t.Detached, compareNodes)
	for _, n := range all {
		slices.SortFunc(n.Children, compareNodes)
	}
	return t
}

// CheckConsistent lists what is wrong with the outline: detached nodes,
// notes apart from their node, and (uniqueTexts) a text found twice in
// the whole outline, which the test made unique. Empty: consistent.
func (t *Tree) CheckConsistent(uniqueTexts bool) []string {
	var problems []string
	for _, n := range t.Detached {
		problems = append(problems, fmt.Sprintf("detached %s %s %q: %s", n.Rec.Collection, n.Rec.RKey, n.Text(), n.Detached))
	}
	for _, r := range t.StrayNotes {
		subj, _ := r.Value["subject"].(string)
		problems = append(problems, fmt.Sprintf("note %s apart from its node (subject %s)", r.RKey, subj))
	}
	if uniqueTexts {
		for _, d := range t.Duplicates() {
			problems = append(problems, "duplicate "+d)
		}
	}
	return problems
}

// Duplicates lists the texts of nodes that occur more than once, with how
// often ("\"x\" ×2"), sorted.
func (t *Tree) Duplicates() []string {
	count := map[string]int{}
	for _, n := range t.Nodes {
		count[n.Text()]++
	}
	var out []string
	for s, n := range count {
		if n > 1 {
			out = append(out, fmt.Sprintf("%q ×%d", s, n))
		}
	}
	slices.Sort(out)
	return out
}

// Shape is an outline as nested texts: a bullet's text, its note's text
// ("" when it has none) and its children, in order.
type Shape struct {
	Text     string
	Note     string
	Children []Shape
}

// Shape returns the attached outline (detached nodes left out: see
// CheckConsistent).
func (t *Tree) Shape() []Shape { return shapes(t.Roots) }

func shapes(ns []*Node) []Shape {
	var out []Shape
	for _, n := range ns {
		s := Shape{Text: n.Text(), Children: shapes(n.Children)}
		if n.Mirror {
			s.Text = "mirror of " + fmt.Sprint(n.Rec.Value["original"])
		}
		if n.Note != nil {
			s.Note, _ = n.Note.Value["text"].(string)
		}
		out = append(out, s)
	}
	return out
}

// Size is the number of bullets and of notes in s.
func Size(s []Shape) (bullets, notes int) {
	for _, x := range s {
		bullets++
		if x.Note != "" {
			notes++
		}
		b, n := Size(x.Children)
		bullets += b
		notes += n
	}
	return bullets, notes
}

// DiffShapes describes the first difference between got and want ("" if
// they are equal), with the path of texts to it.
func DiffShapes(got, want []Shape) string { return diffShapes(got, want, "") }

func diffShapes(got, want []Shape, path string) string {
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			return fmt.Sprintf("%s[%d]: missing %q (and %d more after it)", path, i, want[i].Text, len(want)-i-1)
		case i >= len(want):
			return fmt.Sprintf("%s[%d]: unexpected %q (and %d more after it)", path, i, got[i].Text, len(got)-i-1)
		case got[i].Text != want[i].Text:
			return fmt.Sprintf("%s[%d]: got %q, want %q", path, i, got[i].Text, want[i].Text)
		case got[i].Note != want[i].Note:
			return fmt.Sprintf("%s[%d] %q: note %q, want %q", path, i, got[i].Text, got[i].Note, want[i].Note)
		}
		if d := diffShapes(got[i].Children, want[i].Children, fmt.Sprintf("%s/%q", path, got[i].Text)); d != "" {
			return d
		}
	}
	return ""
}
