// Package outlinegen generates realistic outlines for benchmarks and tests,
// and Memory, an in-memory store.Repository to plan and apply against.
//
// The shape is the same at every size: about 20 sections (h1, fewer below
// 900 bullets), each 3–5 levels deep with wide and narrow levels, big
// levels of leaves (one of 2,000–2,500 children per 25,000 bullets from
// 5,000 bullets on, one of about an eighth of the outline below; the
// 3-level sections of outlines over 100,000 bullets are as wide again), about
// 30 % todos (half of them done), h2/h3 headings, notes, #tags, @mentions
// (with their facets), dates in the text, and exactly one bullet whose text
// holds "budget review" (an open todo at depth 4, when the outline has a
// depth 4). Every sibling list has its own sortKeys (order.Spread), all
// distinct. The same n and seed give the same records, keys included.
package outlinegen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// DID of generated repositories.
const DID = "did:plc:generatedoutline00000000"

// BudgetReview is the text of the one bullet holding "budget review" (an
// open todo at depth 4); no other bullet or note holds that phrase.
const BudgetReview = "Prepare the budget review with finance"

var words = []string{"budget", "review", "plan", "draft", "call", "meeting", "report", "design", "travel", "launch",
	"hiring", "ideas", "groceries", "book", "research", "fix", "follow", "up", "quarterly", "notes", "team", "client",
	"invoice", "roadmap", "release", "read", "write", "garden", "health", "music"}

// Handles mentioned in generated bullets (as "@handle" with a mention
// facet naming the DID of the same index in MentionDIDs); the first is
// mentioned most.
var (
	Handles     = []string{"friend.example.com", "alice.example.com", "bob.example.com", "carol.example.com"}
	MentionDIDs = []string{"did:plc:friend", "did:plc:alice", "did:plc:bob", "did:plc:carol"}
)

// BigLevel is the smallest level Generate counts as big from 5,000 bullets
// on.
const BigLevel = 2000

// shape of one bullet before it becomes a record
type gnode struct {
	depth   int // 1 = top level
	kids    []int
	big     bool // the parent of a big level
	section bool
}

type gen struct {
	r     *rand.Rand
	nodes []gnode
	roots []int
}

func (g *gen) add(parent, depth int) int {
	g.nodes = append(g.nodes, gnode{depth: depth})
	i := len(g.nodes) - 1
	if parent < 0 {
		g.roots = append(g.roots, i)
	} else {
		g.nodes[parent].kids = append(g.nodes[parent].kids, i)
	}
	return i
}

// grow gives node i children down to depth max while quota lasts.
func (g *gen) grow(i, max int, quota *int) {
	d := g.nodes[i].depth
	if d >= max || *quota <= 0 {
		return
	}
	if d > 2 && g.r.IntN(4) == 0 { // not every bullet has children
		return
	}
	var k int
	switch d {
	case 2:
		k = 2 + g.r.IntN(8)
	case 3:
		k = 2 + g.r.IntN(7)
	default:
		k = 1 + g.r.IntN(6)
	}
	for j := 0; j < k && *quota > 0; j++ {
		c := g.add(i, d+1)
		*quota--
		g.grow(c, max, quota)
	}
}

// plan lays out the outline's shape: n bullets.
func (g *gen) plan(n int) {
	sections := min(20, max(1, n/45))
	bigs, size := 0, 0
	switch {
	case n >= 5000:
		bigs = max(1, n/25_000)
	case n >= 200:
		bigs, size = 1, n/8
	}
	sizes := make([]int, bigs)
	rest := n - sections
	for k := range sizes {
		sizes[k] = size
		if n >= 5000 {
			sizes[k] = BigLevel + g.r.IntN(500)
		}
		rest -= 1 + sizes[k]
	}
	// each section's share of the rest, unequal (weights 1–3)
	weights, sum := make([]int, sections), 0
	for s := range weights {
		weights[s] = 1 + g.r.IntN(3)
		sum += weights[s]
	}
	quotas, given := make([]int, sections), 0
	for s := range quotas {
		quotas[s] = rest * weights[s] / sum
		given += quotas[s]
	}
	for s := 0; given < rest; s = (s + 1) % sections {
		quotas[s]++
		given++
	}
	// the sections holding big levels, spread over the outline
	bigIn := map[int][]int{}
	for k := range sizes {
		s := (3 + k*sections/bigs) % sections
		bigIn[s] = append(bigIn[s], sizes[k])
	}
	for s := 0; s < sections; s++ {
		sec := g.add(-1, 1)
		g.nodes[sec].section = true
		levels := 3 + s%3 // 3–5 levels
		quota := quotas[s]
		for quota > 0 {
			c := g.add(sec, 2)
			quota--
			g.grow(c, levels, &quota)
		}
		for _, size := range bigIn[s] {
			// a bullet with a big level of leaves, somewhere among the
			// section's children
			p := g.add(sec, 2)
			g.nodes[p].big = true
			kids := g.nodes[sec].kids
			at := g.r.IntN(len(kids))
			copy(kids[at+1:], kids[at:len(kids)-1])
			kids[at] = p
			for j := 0; j < size; j++ {
				g.add(p, 3)
			}
		}
	}
}

func (g *gen) words(k int) string {
	var b strings.Builder
	prev := ""
	for i := 0; i < k; i++ {
		w := words[g.r.IntN(len(words))]
		for prev == "budget" && w == "review" { // the phrase is BudgetReview's alone
			w = words[g.r.IntN(len(words))]
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		prev = w
	}
	return b.String()
}

func (g *gen) text() string { return g.words(2 + g.r.IntN(6)) }

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func stamp(t time.Time) string { return t.Format("2006-01-02T15:04:05.000Z") }

// Bullets249k is how many bullets make an outline of about 249,000 records
// with their notes: the largest size the benchmarks use (the issue's
// "249k"), under the 250,000-record bound.
const Bullets249k = 226_000

// Generate returns an outline of n bullets (app.bulleted.node records) and
// their notes (about one bullet in ten has one): about 1.1 n records.
func Generate(n int, seed uint64) []store.Record {
	g := &gen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	if n <= 0 {
		return nil
	}
	g.plan(n)
	r := g.r
	// the one "budget review" bullet: an open todo at depth 4
	review := -1
	var deep []int
	for i, nd := range g.nodes {
		if nd.depth == 4 {
			deep = append(deep, i)
		}
	}
	if len(deep) > 0 {
		review = deep[r.IntN(len(deep))]
	}
	recs := make([]store.Record, 0, n+n/9)
	seq := int64(0)
	uri := func(rk string) string { return "at://" + DID + "/" + lexicon.Node + "/" + rk }
	var emit func(list []int, parent string)
	emit = func(list []int, parent string) {
		keys, err := order.Spread("", "", len(list))
		if err != nil {
			panic(err)
		}
		for j, i := range list {
			nd := g.nodes[i]
			seq++
			rk := syntax.NewTID(epoch.UnixMicro()+seq*1000, 0).String()
			created := epoch.Add(time.Duration(r.IntN(334*24*60)) * time.Minute) // within January–November
			v := map[string]any{"$type": lexicon.Node, "sortKey": keys[j], "createdAt": stamp(created)}
			if parent != "" {
				v["parent"] = uri(parent)
			}
			t := g.text()
			switch x := r.IntN(100); {
			case nd.section:
				t, v["layout"] = "Section "+t, "h1"
			case i == review:
				t, v["layout"] = BudgetReview, "todo"
			case nd.big:
				if x < 50 {
					v["layout"] = "h2"
				}
			case len(nd.kids) > 0 && nd.depth == 2 && x < 15:
				v["layout"] = "h2"
			case len(nd.kids) > 0 && nd.depth == 3 && x < 8:
				v["layout"] = "h3"
			case x < 15:
				v["layout"] = "todo"
			case x < 30:
				v["layout"] = "todo"
				v["completedAt"] = stamp(created.Add(time.Duration(1+r.IntN(30*24)) * time.Hour))
			}
			if len(nd.kids) > 0 && !nd.big && !nd.section && r.IntN(20) == 0 {
				v["display"] = "collapsed"
			}
			var facets []any
			if !nd.section && i != review {
				if r.IntN(12) == 0 { // a date in the text
					day := epoch.AddDate(0, 0, r.IntN(365))
					t += []string{" due ", " on ", " by "}[r.IntN(3)] + day.Format("2006-01-02")
				}
				if r.IntN(10) == 0 {
					tag := words[r.IntN(len(words))]
					s := len(t) + 1
					t += " #" + tag
					facets = append(facets, map[string]any{"index": map[string]any{"byteStart": int64(s), "byteEnd": int64(len(t))},
						"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#tag", "tag": tag}}})
				}
				if r.IntN(20) == 0 {
					h := 0 // the first handle half the time
					if r.IntN(2) == 0 {
						h = r.IntN(len(Handles))
					}
					s := len(t) + 1
					t += " @" + Handles[h]
					facets = append(facets, map[string]any{"index": map[string]any{"byteStart": int64(s), "byteEnd": int64(len(t))},
						"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#mention", "did": MentionDIDs[h]}}})
				}
			}
			v["text"] = t
			if facets != nil {
				v["facets"] = facets
			}
			recs = append(recs, store.Record{Collection: lexicon.Node, RKey: rk, CID: "gen" + rk, Value: store.MustValue(v)})
			if !nd.section && r.IntN(10) == 0 {
				recs = append(recs, store.Record{Collection: lexicon.Note, RKey: rk, CID: "gennote" + rk, Value: store.MustValue(map[string]any{"$type": lexicon.Note,
					"subject": uri(rk), "text": g.text() + "\n" + g.text(), "createdAt": v["createdAt"]})})
			}
			emit(nd.kids, rk)
		}
	}
	emit(g.roots, "")
	return recs
}

// Writes returns the creates that put recs in the repository of did (their
// at:// references to DID rewritten to did).
func Writes(recs []store.Record, did string) []store.Write {
	ws := make([]store.Write, 0, len(recs))
	for _, r := range recs {
		m := r.Value.Map()
		v := make(map[string]any, len(m))
		for k, x := range m {
			if s, ok := x.(string); ok {
				x = strings.ReplaceAll(s, "at://"+DID+"/", "at://"+did+"/")
			}
			v[k] = x
		}
		ws = append(ws, store.Write{Op: store.Create, Collection: r.Collection, RKey: r.RKey, Value: v})
	}
	return ws
}

// Memory is an in-memory repository.
type Memory struct {
	mu   sync.Mutex
	snap *store.Snapshot
	n    int
}

// NewMemory holds recs.
func NewMemory(recs []store.Record) *Memory {
	return &Memory{snap: &store.Snapshot{DID: DID, Commit: "c0", Rev: "r000000000", Records: recs}}
}

// DID implements store.Repository.
func (m *Memory) DID() syntax.DID { return syntax.DID(DID) }

// Head implements store.Repository.
func (m *Memory) Head(context.Context) (string, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snap.Commit, m.snap.Rev, nil
}

// Snapshot implements store.Repository.
func (m *Memory) Snapshot(context.Context) (*store.Snapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.snap, nil
}

// Apply implements store.Repository (CIDs are counters).
func (m *Memory) Apply(_ context.Context, swap string, writes []store.Write) (*store.Result, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if swap != "" && swap != m.snap.Commit {
		return nil, store.ErrConflict
	}
	m.n++
	s := applied(m.snap, writes, m.n)
	// revs sort as strings, as real ones (TIDs) do: the engine keeps the
	// newest tree by rev
	s.Commit, s.Rev = fmt.Sprintf("c%d", m.n), fmt.Sprintf("r%09d", m.n)
	m.snap = s
	res := &store.Result{Commit: s.Commit, Rev: s.Rev}
	return res, nil
}

func applied(s *store.Snapshot, writes []store.Write, gen int) *store.Snapshot {
	idx := map[string]int{}
	out := &store.Snapshot{DID: s.DID, Records: append([]store.Record(nil), s.Records...)}
	for i, r := range out.Records {
		idx[r.Collection+"/"+r.RKey] = i
	}
	for _, w := range writes {
		path := w.Collection + "/" + w.RKey
		rec := store.Record{Collection: w.Collection, RKey: w.RKey, Value: store.MustValue(w.Value), CID: fmt.Sprintf("m%d-%s", gen, w.RKey)}
		switch w.Op {
		case store.Create, store.Update:
			if i, ok := idx[path]; ok {
				out.Records[i] = rec
			} else {
				idx[path] = len(out.Records)
				out.Records = append(out.Records, rec)
			}
		case store.Delete:
			if i, ok := idx[path]; ok {
				out.Records[i].Collection = ""
			}
		}
	}
	live := out.Records[:0]
	for _, r := range out.Records {
		if r.Collection != "" {
			live = append(live, r)
		}
	}
	out.Records = live
	return out
}
