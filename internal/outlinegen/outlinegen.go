// Package outlinegen generates realistic outlines for benchmarks: about 20
// sections, 3–5 levels, some levels of 2,000+ children, about 30 % todos
// (half of them done), notes, tags and mentions; and Memory, an in-memory
// store.Repository to plan and apply against.
package outlinegen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/bluesky-social/indigo/atproto/syntax"

	"github.com/bulleted-mcp/bulleted-mcp/internal/order"
	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// DID of generated repositories.
const DID = "did:plc:generatedoutline00000000"

var words = []string{"budget", "review", "plan", "draft", "call", "meeting", "report", "design", "travel", "launch",
	"hiring", "ideas", "groceries", "book", "research", "fix", "follow", "up", "quarterly", "notes", "team", "client",
	"invoice", "roadmap", "release", "read", "write", "garden", "health", "music"}

// Generate returns about n records (nodes and notes) of a realistic outline.
func Generate(n int, seed uint64) []store.Record {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	clock := syntax.NewTIDClock(0)
	var recs []store.Record
	nodes := 0
	text := func() string {
		k := 2 + r.IntN(6)
		s := ""
		for i := 0; i < k; i++ {
			if i > 0 {
				s += " "
			}
			s += words[r.IntN(len(words))]
		}
		return s
	}
	var add func(parent string, depth, kids, maxDepth, limit int, big bool)
	add = func(parent string, depth, kids, maxDepth, limit int, big bool) {
		keys, _ := order.Spread("", "", kids)
		for i := 0; i < kids && nodes < limit; i++ {
			rk := clock.Next().String()
			t := text()
			v := map[string]any{"$type": lexicon.Node, "text": t, "sortKey": keys[i], "createdAt": fmt.Sprintf("2026-%02d-%02dT10:00:00.000Z", 1+r.IntN(12), 1+r.IntN(28))}
			if parent != "" {
				v["parent"] = "at://" + DID + "/" + lexicon.Node + "/" + parent
			}
			switch x := r.IntN(100); {
			case x < 15:
				v["layout"] = "todo"
			case x < 30:
				v["layout"], v["completedAt"] = "todo", "2026-06-01T10:00:00.000Z"
			case x < 33 && depth == 1:
				v["layout"] = "h2"
			}
			var facets []any
			if r.IntN(10) == 0 {
				tag := words[r.IntN(len(words))]
				s := len(t) + 1
				t += " #" + tag
				facets = append(facets, map[string]any{"index": map[string]any{"byteStart": int64(s), "byteEnd": int64(len(t))},
					"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#tag", "tag": tag}}})
			}
			if r.IntN(20) == 0 {
				s := len(t) + 1
				t += " @friend.example.com"
				facets = append(facets, map[string]any{"index": map[string]any{"byteStart": int64(s), "byteEnd": int64(len(t))},
					"features": []any{map[string]any{"$type": "app.bsky.richtext.facet#mention", "did": "did:plc:friend"}}})
			}
			v["text"] = t
			if facets != nil {
				v["facets"] = facets
			}
			recs = append(recs, store.Record{Collection: lexicon.Node, RKey: rk, CID: "gen" + rk, Value: v})
			nodes++
			if r.IntN(10) == 0 {
				recs = append(recs, store.Record{Collection: lexicon.Note, RKey: rk, CID: "gennote" + rk, Value: map[string]any{"$type": lexicon.Note,
					"subject": "at://" + DID + "/" + lexicon.Node + "/" + rk, "text": text() + "\n" + text(), "createdAt": v["createdAt"]}})
			}
			if depth < maxDepth {
				k := 2 + r.IntN(8)
				if big && depth == 1 && i == 0 {
					k = 2000 + r.IntN(500) // a big level, of leaves
					add(rk, maxDepth, k, maxDepth, limit, false)
					continue
				}
				add(rk, depth+1, k, maxDepth, limit, false)
			}
		}
	}
	sections, _ := order.Spread("", "", 4096)
	secs := 0
	for nodes < n {
		// ~20 sections, each with its share of the outline
		bigs := max(1, n/25_000) // sections holding a level of 2,000+
		per := max((n-bigs*2300)/20, 1)
		idx := secs
		secs++
		big := n >= 5000 && idx%(20/min(bigs, 20)) == 3
		if big {
			per += 2300
		}
		maxDepth := 2 + idx%3 // 3–5 levels with the section
		before := nodes
		sec := clock.Next().String()
		recs = append(recs, store.Record{Collection: lexicon.Node, RKey: sec, CID: "gen" + sec, Value: map[string]any{"$type": lexicon.Node,
			"text": "Section " + text(), "layout": "h1", "sortKey": sections[idx%len(sections)], "createdAt": "2026-01-01T10:00:00.000Z"}})
		nodes++
		for nodes-before < per && nodes < n {
			add(sec, 1, 10+r.IntN(20), maxDepth, min(before+per, n), big)
			big = false
		}
	}
	return recs
}

// Memory is an in-memory repository.
type Memory struct {
	mu   sync.Mutex
	snap *store.Snapshot
	n    int
}

// NewMemory holds recs.
func NewMemory(recs []store.Record) *Memory {
	return &Memory{snap: &store.Snapshot{DID: DID, Commit: "c0", Rev: "r0", Records: recs}}
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
	s.Commit, s.Rev = fmt.Sprintf("c%d", m.n), fmt.Sprintf("r%d", m.n)
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
		rec := store.Record{Collection: w.Collection, RKey: w.RKey, Value: w.Value, CID: fmt.Sprintf("m%d-%s", gen, w.RKey)}
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
