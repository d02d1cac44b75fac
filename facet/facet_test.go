package facet

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

func TestDetectVectors(t *testing.T) {
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
