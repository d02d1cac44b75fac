package intent

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/bulleted-mcp/bulleted-mcp/internal/outline"
	"github.com/bulleted-mcp/bulleted-mcp/internal/search"
)

// MaxSelected bounds the bullets one where may select: a larger set is
// refused with its count, before anything is planned.
const MaxSelected = 5000

// sampleKeys is how many keys of a selection its note lists.
const sampleKeys = 10

// Where selects bullets by search's filters (package search: every given
// filter must match), on the tree the plan is made on: in a batch, with
// the earlier steps applied. Under is a record key or URI; Depth limits
// the levels below it. A selection is
// said in the plan's notes (selectionPrefix): its count, a fingerprint of
// its keys and the first of them, so a dry run shows what it took and a
// kept plan can be checked against the set the outline gives now
// (Selections).
type Where struct {
	Text          string   `json:"text,omitempty"`
	Regex         bool     `json:"regex,omitempty"`
	Tags          []string `json:"tags,omitempty"`
	Mentions      []string `json:"mentions,omitempty"`
	Layout        string   `json:"layout,omitempty"`
	State         string   `json:"state,omitempty"`
	CreatedFrom   string   `json:"created_from,omitempty"`
	CreatedTo     string   `json:"created_to,omitempty"`
	CompletedFrom string   `json:"completed_from,omitempty"`
	CompletedTo   string   `json:"completed_to,omitempty"`
	Under         string   `json:"under,omitempty"`
	// Depth, with Under: how many levels below it to look (1: its
	// children only); 0 is the whole subtree.
	Depth int `json:"depth,omitempty"`
}

// Filters reports whether w gives a filter besides under (search asks
// for one; under alone would select a whole subtree).
func (w Where) Filters() bool {
	return w.Text != "" || len(w.Tags) > 0 || len(w.Mentions) > 0 || w.Layout != "" || w.State != "" ||
		w.CreatedFrom != "" || w.CreatedTo != "" || w.CompletedFrom != "" || w.CompletedTo != ""
}

// selectionPrefix starts the note a selection adds to its plan.
const selectionPrefix = "where selected "

// Selections are the selection notes among a plan's diagnostics, in plan
// order: equal lists mean the same sets of bullets were selected.
func Selections(diags []string) []string {
	var out []string
	for _, d := range diags {
		if strings.HasPrefix(d, selectionPrefix) {
			// the set's fingerprint and count, not the sample's wording
			if i := strings.Index(d, ")"); i > 0 {
				d = d[:i+1]
			}
			out = append(out, d)
		}
	}
	return out
}

// pick is the bullets w selects on the plan's tree now, in the outline's
// order; more than MaxSelected are refused with their count. what names
// the argument ("where") in errors.
func (w Where) pick(p *outline.Planner, what string) ([]*outline.Item, error) {
	if !w.Filters() {
		return nil, outline.Fail(outline.ErrInvalidInput, "give at least one filter (text, tags, mentions, layout, state or a date); under alone is a whole subtree",
			"%s has no filter", what)
	}
	t := p.Tree()
	q := search.Query{Text: w.Text, Regex: w.Regex, Tags: w.Tags, Mentions: w.Mentions, Layout: w.Layout, State: w.State,
		CreatedFrom: w.CreatedFrom, CreatedTo: w.CreatedTo, CompletedFrom: w.CompletedFrom, CompletedTo: w.CompletedTo, Depth: w.Depth}
	if w.Depth != 0 && (w.Depth < 1 || w.Under == "") {
		return nil, outline.Fail(outline.ErrInvalidInput, "give depth as a whole number of at least 1, with under (1: under's children only)",
			"%s.depth must be at least 1 and needs %s.under, got %d", what, what, w.Depth)
	}
	if w.Under != "" {
		u, err := t.Resolve(w.Under)
		if err != nil {
			if oe, ok := err.(*outline.Error); ok {
				c := *oe
				c.Msg = what + ".under: " + oe.Msg
				return nil, &c
			}
			return nil, err
		}
		q.Under = u
	}
	var items []*outline.Item
	n := 0
	err := search.Select(t, q, func(it *outline.Item) bool {
		n++
		if n <= MaxSelected {
			items = append(items, it)
		}
		return true
	})
	if err != nil {
		return nil, outline.Fail(outline.ErrInvalidInput, "fix the filter and call again", "%s: %v", what, err)
	}
	if n > MaxSelected {
		e := outline.Fail(outline.ErrInvalidInput, "narrow the filters (under, state, dates, tags) or take the set in parts",
			"%s selects %d bullets, more than the %d one operation takes; nothing was written", what, n, MaxSelected).(*outline.Error)
		e.Data = map[string]any{"selected": n, "max": MaxSelected}
		return nil, e
	}
	p.Note("%s", selectionNote(items))
	return items, nil
}

// selectionNote is the note of a selection: its count, the fingerprint of
// its keys and the first sampleKeys of them.
func selectionNote(items []*outline.Item) string {
	h := fnv.New64a()
	var sample []string
	for i, it := range items {
		h.Write([]byte(it.Key()))
		h.Write([]byte{0})
		if i < sampleKeys {
			sample = append(sample, it.Key())
		}
	}
	s := fmt.Sprintf("%s%d bullet(s) (set %08x)", selectionPrefix, len(items), h.Sum64()&0xffffffff)
	switch {
	case len(items) == 0:
		s += ": nothing to change"
	case len(items) > len(sample):
		s += fmt.Sprintf(": %s … and %d more (search lists all)", strings.Join(sample, " "), len(items)-len(sample))
	default:
		s += ": " + strings.Join(sample, " ")
	}
	return s
}

// outermost drops the items that have an ancestor among items (they go
// with it), keeping the order; it returns how many it dropped.
func outermost(t *outline.Tree, items []*outline.Item) ([]*outline.Item, int) {
	in := make(map[*outline.Item]bool, len(items))
	for _, it := range items {
		in[it] = true
	}
	var out []*outline.Item
	for _, it := range items {
		inside := false
		for a := t.Parent(it); a != nil; a = t.Parent(a) {
			if in[a] {
				inside = true
				break
			}
		}
		if !inside {
			out = append(out, it)
		}
	}
	return out, len(items) - len(out)
}
