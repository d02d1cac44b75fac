package outline

import (
	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// facets detects links, mentions and tags in text (package facet) and sets
// v["facets"] with UTF-8 byte ranges. Mentions need the resolver;
// unresolved ones get no facet and a diagnostic, as does a facet that
// would not be valid against its lexicon.
func (p *Planner) facets(v map[string]any, text string) {
	p.facetsKnowing(v, text, nil, nil)
}

// refacet sets the text of v, a record as it was, and its facets for that
// text: a mention v already carried keeps its DID without a lookup, and one
// it held as plain text stays plain text without a word when there is no
// resolver (nothing the edit changed); the rest as facets.
func (p *Planner) refacet(v map[string]any, text string) {
	known, plain := priorMentions(v)
	delete(v, "facets")
	v["text"] = text
	p.facetsKnowing(v, text, known, plain)
}

func (p *Planner) facetsKnowing(v map[string]any, text string, known map[string]string, plain map[string]bool) {
	var out []any
	for _, s := range facet.Detect(text) {
		did := ""
		if s.Kind == facet.Mention {
			if d, ok := known[s.Value]; ok {
				did = d
			} else if p.e.Resolver == nil {
				if !plain[s.Value] {
					p.note("mention @%s left as plain text: no identity resolver (offline)", s.Value)
				}
				continue
			} else {
				d, err := p.e.Resolver.ResolveHandle(p.ctx, s.Value)
				if err != nil {
					p.note("mention @%s left as plain text: %v", s.Value, err)
					continue
				}
				did = d.String()
			}
		}
		f := facet.Facet(s, facet.Feature(s, did))
		// a facet this server derived never refuses the write: one that
		// would not be valid is left out, and the result says so
		if err := validate.Default().Facet(f); err != nil {
			p.note("%s %q (bytes %d-%d) left as plain text: its facet would not be valid (%v)", s.Kind, s.Value, s.Start, s.End, err)
			continue
		}
		out = append(out, f)
	}
	if len(out) > 0 {
		v["facets"] = out
	}
}

// priorMentions reads the mentions of v as it was (its text and facets):
// the DID of each handle a mention facet covers, and the handles its text
// held as plain text (no mention facet).
func priorMentions(v map[string]any) (known map[string]string, plain map[string]bool) {
	old, _ := v["text"].(string)
	if old == "" {
		return nil, nil
	}
	known, plain = map[string]string{}, map[string]bool{}
	covered := map[[2]int]string{}
	for _, f := range facet.Record(v) {
		if f.Kind == facet.Mention {
			covered[[2]int{f.Start, f.End}] = f.Value
		}
	}
	for _, s := range facet.Detect(old) {
		if s.Kind != facet.Mention {
			continue
		}
		if d, ok := covered[[2]int{s.Start, s.End}]; ok {
			known[s.Value] = d
		} else {
			plain[s.Value] = true
		}
	}
	return known, plain
}
