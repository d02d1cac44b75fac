// Package facet finds rich-text facets (links, mentions, tags) in bullet
// text and reads them back out of stored records. Detection follows the
// rules of the reference rich-text parser of the AT Protocol client library
// (app.bsky.richtext.facet): a tag needs at least one character that is not
// a digit or punctuation (so "#1" is not a tag), trailing punctuation is
// not part of a tag or a link, and a mention is "@" plus a domain-like
// handle at the start of the text or after a space or "(".
package facet

import (
	"golang.org/x/net/idna"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/bulleted-mcp/bulleted-mcp/internal/store"
)

// Kind of a detected span.
type Kind string

// The facet kinds.
const (
	Link    Kind = "link"
	Mention Kind = "mention"
	Tag     Kind = "tag"
)

// Feature $types of app.bsky.richtext.facet.
const (
	TypeLink    = "app.bsky.richtext.facet#link"
	TypeMention = "app.bsky.richtext.facet#mention"
	TypeTag     = "app.bsky.richtext.facet#tag"
)

// Span is one detected facet: UTF-8 byte range [Start, End) of the text,
// and its value — the URI of a link, the handle of a mention (lower case,
// without "@"), the tag without "#".
type Span struct {
	Kind  Kind   `json:"kind"`
	Start int    `json:"start"`
	End   int    `json:"end"`
	Value string `json:"value"`
}

const zw = `\x{00AD}\x{2060}\x{200A}\x{200B}\x{200C}\x{200D}\x{20E2}`

// sp is white space as the reference parser (JavaScript's \s) has it: Go's
// \s is ASCII only, so a no-break or ideographic space would otherwise end
// up inside a link or tag.
const sp = `\s\p{Z}\x{FEFF}`

var (
	reLink    = regexp.MustCompile(`(^|[` + sp + `(])(https?://[^` + sp + `]+)`)
	reMention = regexp.MustCompile(`(^|[` + sp + `(])@([a-zA-Z0-9.-]+)\b`)
	reTag     = regexp.MustCompile(`(^|[` + sp + `])[#＃]([^` + sp + zw + `]+)`)
	reTagOK   = regexp.MustCompile(`[^\d` + sp + `\p{P}` + zw + `]`)
	reTrailP  = regexp.MustCompile(`\p{P}+$`)
	reDomain  = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?$`)
)

// MaxTag is the longest tag, in characters.
const MaxTag = 64

// Detect returns the links, mentions and tags of text, in that order, each
// in text order.
func Detect(text string) []Span {
	var out []Span
	for _, m := range reLink.FindAllStringSubmatchIndex(text, -1) {
		s, e := m[4], m[5]
		uri := text[s:e]
		if strings.ContainsAny(uri[len(uri)-1:], ".,;:!?") {
			uri, e = uri[:len(uri)-1], e-1
		}
		if strings.HasSuffix(uri, ")") && !strings.Contains(uri, "(") {
			uri, e = uri[:len(uri)-1], e-1
		}
		out = append(out, Span{Kind: Link, Start: s, End: e, Value: uri})
	}
	for _, m := range reMention.FindAllStringSubmatchIndex(text, -1) {
		h := text[m[4]:m[5]]
		if !validHandle(h) {
			continue
		}
		out = append(out, Span{Kind: Mention, Start: m[4] - 1, End: m[5], Value: strings.ToLower(h)})
	}
	for _, m := range reTag.FindAllStringSubmatchIndex(text, -1) {
		tag := reTrailP.ReplaceAllString(text[m[4]:m[5]], "")
		if !reTagOK.MatchString(tag) || tag == "" || utf8.RuneCountInString(tag) > MaxTag {
			continue
		}
		// the "#" (or full-width "＃") starts right after the leading space
		start := m[3]
		out = append(out, Span{Kind: Tag, Start: start, End: m[4] + len(tag), Value: tag})
	}
	return out
}

// validHandle is a domain-like handle: labels of letters, digits and
// hyphens, a last label that starts with a letter.
func validHandle(h string) bool {
	return len(h) <= 253 && reDomain.MatchString(h)
}

// Record returns the facets of a stored record value as spans: mentions
// carry the DID, links the URI, tags the tag.
func Record(v map[string]any) []Span {
	var out []Span
	fs, _ := v["facets"].([]any)
	for _, f := range fs {
		fm, _ := f.(map[string]any)
		idx, _ := fm["index"].(map[string]any)
		s, e := num(idx["byteStart"]), num(idx["byteEnd"])
		feats, _ := fm["features"].([]any)
		for _, ft := range feats {
			m, _ := ft.(map[string]any)
			switch m["$type"] {
			case TypeMention:
				if d, ok := m["did"].(string); ok {
					out = append(out, Span{Kind: Mention, Start: s, End: e, Value: d})
				}
			case TypeLink:
				if u, ok := m["uri"].(string); ok {
					out = append(out, Span{Kind: Link, Start: s, End: e, Value: u})
				}
			case TypeTag:
				if t, ok := m["tag"].(string); ok {
					out = append(out, Span{Kind: Tag, Start: s, End: e, Value: t})
				}
			}
		}
	}
	return out
}

func num(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case int64:
		return int(n)
	case uint64:
		return int(n)
	}
	return 0
}

// Values returns the distinct values of kind in a record's facets.
func Values(v map[string]any, kind Kind) []string {
	var out []string
	for _, s := range Record(v) {
		if s.Kind == kind && !slices.Contains(out, s.Value) {
			out = append(out, s.Value)
		}
	}
	return out
}

// LinkURI is the URI a link facet records for a link as written in the
// text, as RFC 3987 maps an IRI to a URI, so that the facet's uri is a
// valid lexicon "uri" (printable ASCII only): a non-ASCII host name
// ("https://münchen.de/") becomes its IDNA A-label (punycode,
// "xn--mnchen-3ya.de", the name DNS and browsers resolve; golang.org/x/net/idna's
// lookup profile), and every other byte that is not printable ASCII (the
// letters of "https://en.wikipedia.org/wiki/Zürich", a space-like character)
// is percent-encoded. A host IDNA refuses is percent-encoded too. The text
// itself keeps the link as written, and the facet's byte range still covers
// it there.
func LinkURI(link string) string {
	const hex = "0123456789ABCDEF"
	if !strings.ContainsFunc(link, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return link
	}
	link = asciiHost(link)
	var b strings.Builder
	for i := 0; i < len(link); i++ {
		c := link[i]
		if c > ' ' && c < 0x7f {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// asciiHost is link with its host, when it is a non-ASCII name, as its
// IDNA A-label (unchanged when there is no such host, or IDNA refuses it).
func asciiHost(link string) string {
	i := strings.Index(link, "://")
	if i <= 0 {
		return link
	}
	start := i + 3
	end := len(link)
	if j := strings.IndexAny(link[start:], "/?#"); j >= 0 {
		end = start + j
	}
	auth := link[start:end]
	if k := strings.LastIndexByte(auth, '@'); k >= 0 {
		start += k + 1 // the user information stays as it is (percent-encoded)
		auth = auth[k+1:]
	}
	host := auth
	if k := strings.LastIndexByte(auth, ':'); k >= 0 && !strings.Contains(auth[k+1:], "]") {
		host = auth[:k]
	}
	if !strings.ContainsFunc(host, func(r rune) bool { return r >= 0x80 }) {
		return link
	}
	a, err := idna.Lookup.ToASCII(host)
	if err != nil || strings.ContainsFunc(a, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
		return link
	}
	return link[:start] + a + link[start+len(host):]
}

// Feature is the app.bsky.richtext.facet feature object of a span; a
// mention's feature takes the resolved DID, a link's the URI of LinkURI.
func Feature(s Span, did string) map[string]any {
	switch s.Kind {
	case Link:
		return map[string]any{"$type": TypeLink, "uri": LinkURI(s.Value)}
	case Mention:
		return map[string]any{"$type": TypeMention, "did": did}
	}
	return map[string]any{"$type": TypeTag, "tag": s.Value}
}

// Facet is the app.bsky.richtext.facet object of a span with feature f.
func Facet(s Span, f map[string]any) map[string]any {
	return map[string]any{
		"index":    map[string]any{"byteStart": s.Start, "byteEnd": s.End},
		"features": []any{f},
	}
}

// StoredValues is Values of a stored record, read in place from its
// encoding (nothing decoded: the search index reads every bullet's tags
// and mentions this way).
func StoredValues(v store.Value, kind Kind) []string {
	var out []string
	fs, ok := v.Field("facets")
	if !ok {
		return nil
	}
	fs.Elems(func(f store.Raw) bool {
		feats, _ := f.Field("features")
		feats.Elems(func(ft store.Raw) bool {
			t, _ := ft.Field("$type")
			typ, _ := t.Text()
			var key string
			switch {
			case typ == TypeMention && kind == Mention:
				key = "did"
			case typ == TypeLink && kind == Link:
				key = "uri"
			case typ == TypeTag && kind == Tag:
				key = "tag"
			default:
				return true
			}
			x, _ := ft.Field(key)
			if s, ok := x.Text(); ok && !slices.Contains(out, s) {
				out = append(out, s)
			}
			return true
		})
		return true
	})
	return out
}
