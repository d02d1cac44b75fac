package outline

import "github.com/bulleted-mcp/bulleted-mcp/facet"

// facets detects links, mentions and tags in text (package facet) and sets
// v["facets"] with UTF-8 byte ranges. Mentions need the resolver;
// unresolved ones get no facet and a diagnostic.
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
		out = append(out, facet.Facet(s, facet.Feature(s, did)))
	}
	if len(out) > 0 {
		v["facets"] = out
	}
}
