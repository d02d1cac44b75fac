package outline

import (
	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/validate"
)

// facets detects links, mentions and tags in text (package facet) and sets
// v["facets"] with UTF-8 byte ranges. Mentions need the resolver;
// unresolved ones get no facet and a diagnostic, as does a facet that would
// not be valid against its lexicon.
func (p *Planner) facets(v map[string]any, text string) {
	var out []any
	for _, s := range facet.Detect(text) {
		did := ""
		if s.Kind == facet.Mention {
			if p.e.Resolver == nil {
				p.note("mention @%s left as plain text: no identity resolver (offline)", s.Value)
				continue
			}
			d, err := p.e.Resolver.ResolveHandle(p.ctx, s.Value)
			if err != nil {
				p.note("mention @%s left as plain text: %v", s.Value, err)
				continue
			}
			did = d.String()
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
