package outline

import (
	"regexp"
	"strings"
)

var (
	reLink    = regexp.MustCompile(`https?://[^\s<>"'` + "`" + `]+[^\s<>"'.,;:!?)\]` + "`" + `]`)
	reMention = regexp.MustCompile(`(^|[\s(])@([a-zA-Z0-9][a-zA-Z0-9.-]*\.[a-zA-Z]{2,})`)
	reTag     = regexp.MustCompile(`(^|\s)#([^\s#.,;:!?()\[\]]{1,64})`)
)

// facets parses links, mentions and tags out of text into v["facets"] with
// UTF-8 byte ranges. Mentions need the resolver; unresolved ones get no facet
// and a diagnostic.
func (p *Planner) facets(v map[string]any, text string) {
	var out []any
	add := func(s, e int, feat map[string]any) {
		out = append(out, map[string]any{
			"index":    map[string]any{"byteStart": s, "byteEnd": e},
			"features": []any{feat},
		})
	}
	for _, m := range reLink.FindAllStringIndex(text, -1) {
		add(m[0], m[1], map[string]any{"$type": "app.bsky.richtext.facet#link", "uri": text[m[0]:m[1]]})
	}
	for _, m := range reMention.FindAllStringSubmatchIndex(text, -1) {
		s, e := m[4]-1, m[5]
		handle := strings.ToLower(text[m[4]:m[5]])
		if p.e.Resolver == nil {
			p.note("mention @%s left as plain text: no identity resolver (offline)", handle)
			continue
		}
		did, err := p.e.Resolver.ResolveHandle(p.ctx, handle)
		if err != nil {
			p.note("mention @%s left as plain text: %v", handle, err)
			continue
		}
		add(s, e, map[string]any{"$type": "app.bsky.richtext.facet#mention", "did": did.String()})
	}
	for _, m := range reTag.FindAllStringSubmatchIndex(text, -1) {
		add(m[4]-1, m[5], map[string]any{"$type": "app.bsky.richtext.facet#tag", "tag": text[m[4]:m[5]]})
	}
	if len(out) > 0 {
		v["facets"] = out
	}
}
