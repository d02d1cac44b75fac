package facet

import (
	"encoding/json"
	"golang.org/x/net/idna"
	"net/url"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/syntax"
)

func TestDetectVectors(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/detect.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name  string `json:"name"`
		Text  string `json:"text"`
		Spans []Span `json:"spans"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			got := Detect(c.Text)
			if len(got) == 0 && len(c.Spans) == 0 {
				return
			}
			if !reflect.DeepEqual(got, c.Spans) {
				t.Fatalf("Detect(%q)\n got %+v\nwant %+v", c.Text, got, c.Spans)
			}
			for _, s := range got {
				if s.Kind == Tag && c.Text[s.Start:s.End] != "#"+s.Value && c.Text[s.Start:s.End] != "＃"+s.Value {
					t.Fatalf("tag range %q does not cover #%s", c.Text[s.Start:s.End], s.Value)
				}
			}
		})
	}
}

func TestRecordRoundTrip(t *testing.T) {
	t.Parallel()
	text := "ask @a.test about #plans"
	var fs []any
	for _, s := range Detect(text) {
		did := ""
		if s.Kind == Mention {
			did = "did:plc:aaaa"
		}
		fs = append(fs, Facet(s, Feature(s, did)))
	}
	// through JSON, as a record read back from a repository
	raw, _ := json.Marshal(map[string]any{"text": text, "facets": fs})
	var v map[string]any
	json.Unmarshal(raw, &v)
	if got := Values(v, Tag); !reflect.DeepEqual(got, []string{"plans"}) {
		t.Fatalf("tags %v", got)
	}
	if got := Values(v, Mention); !reflect.DeepEqual(got, []string{"did:plc:aaaa"}) {
		t.Fatalf("mentions %v", got)
	}
}

// TestLinkURI: a link with characters outside printable ASCII is recorded
// as a valid lexicon uri (percent-encoded bytes) that decodes back to the
// link as written; an ASCII link is recorded as it is.
func TestLinkURI(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ link, want string }{
		{"https://example.com/a?b=c%20d", "https://example.com/a?b=c%20d"},
		{"https://en.wikipedia.org/wiki/Zürich", "https://en.wikipedia.org/wiki/Z%C3%BCrich"},
		{"https://ja.wikipedia.org/wiki/東京", "https://ja.wikipedia.org/wiki/%E6%9D%B1%E4%BA%AC"},
		{"https://münchen.de/", "https://xn--mnchen-3ya.de/"},
		{"https://Bücher.example:8443/straße?q=ü#ö", "https://xn--bcher-kva.example:8443/stra%C3%9Fe?q=%C3%BC#%C3%B6"},
		{"https://user:pä@例え.テスト/", "https://user:p%C3%A4@xn--r8jz45g.xn--zckzah/"},
		{"https://münchen.de", "https://xn--mnchen-3ya.de"},
	} {
		got := LinkURI(c.link)
		if got != c.want {
			t.Fatalf("LinkURI(%q) = %q, want %q", c.link, got, c.want)
		}
		if _, err := syntax.ParseURI(got); err != nil {
			t.Fatalf("LinkURI(%q) = %q: %v", c.link, got, err)
		}
		// back to the link as written: the host by IDNA, the rest by
		// percent-decoding
		back, err := url.PathUnescape(got)
		if err == nil {
			if u, perr := url.Parse(got); perr == nil {
				if h, ierr := idna.Lookup.ToUnicode(u.Hostname()); ierr == nil {
					back = strings.Replace(back, u.Hostname(), h, 1)
				}
			}
		}
		if err != nil || (!strings.EqualFold(back, c.link) && !strings.Contains(c.link, "%")) {
			t.Fatalf("%q decodes to %q (%v)", got, back, err)
		}
	}
	// the facet built from a detected link carries the encoded uri, over
	// the bytes of the link as written
	text := "see https://en.wikipedia.org/wiki/Zürich."
	s := Detect(text)
	if len(s) != 1 {
		t.Fatalf("Detect: %+v", s)
	}
	f := Feature(s[0], "")
	if f["uri"] != "https://en.wikipedia.org/wiki/Z%C3%BCrich" || text[s[0].Start:s[0].End] != "https://en.wikipedia.org/wiki/Zürich" {
		t.Fatalf("feature %v over %q", f, text[s[0].Start:s[0].End])
	}
}
