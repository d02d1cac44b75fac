package validate

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bluesky-social/indigo/atproto/atdata"
	indigolex "github.com/bluesky-social/indigo/atproto/lexicon"
)

// The AT Protocol interop test vectors (testdata/interop, see SOURCE.md)
// run against this package's own checks: every record string with a format
// goes through walker.value, and whole records through the schema walker
// and then indigo's validator, as DataWith does.

// InteropLines reads one of the syntax vector files: a value a line, with
// "#" comments and blank lines skipped.
func interopLines(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "interop", "syntax", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no vectors", name)
	}
	return out
}

func TestInteropSyntax(t *testing.T) {
	t.Parallel()
	files := []struct{ format, base string }{
		{"handle", "handle_syntax"},
		{"did", "did_syntax"},
		{"nsid", "nsid_syntax"},
		{"at-uri", "aturi_syntax"},
		{"tid", "tid_syntax"},
		{"record-key", "recordkey_syntax"},
		{"datetime", "datetime_syntax"},
	}
	v := Default()
	for _, f := range files {
		format := f.format
		def := indigolex.SchemaString{Format: &format}
		check := func(s string) []Problem {
			w := walker{cat: v.cat}
			w.value("example.interop", def, s, "value")
			return w.problems
		}
		for _, s := range interopLines(t, f.base+"_valid.txt") {
			if p := check(s); len(p) > 0 {
				t.Errorf("%s %q: refused as %v; the vectors say it is valid", format, s, p)
			}
		}
		for _, s := range interopLines(t, f.base+"_invalid.txt") {
			if p := check(s); len(p) == 0 {
				t.Errorf("%s %q: accepted; the vectors say it is invalid", format, s)
			}
		}
	}
	// syntactically well-formed datetimes that are not real instants
	format := "datetime"
	for _, s := range interopLines(t, "datetime_parse_invalid.txt") {
		w := walker{cat: v.cat}
		w.value("example.interop", indigolex.SchemaString{Format: &format}, s, "value")
		if len(w.problems) == 0 {
			t.Errorf("datetime %q: accepted; the vectors say it does not parse", s)
		}
	}
}

type recordFixture struct {
	Name string          `json:"name"`
	RKey string          `json:"rkey"`
	Data json.RawMessage `json:"data"`
}

func interopRecords(t *testing.T, name string) []recordFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "interop", "lexicon", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []recordFixture
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no fixtures", name)
	}
	return out
}

// interopValidator is a Validator over the vectors' own catalog.
func interopValidator(t *testing.T) *Validator {
	t.Helper()
	cat := indigolex.NewBaseCatalog()
	if err := cat.LoadDirectory(filepath.Join("testdata", "interop", "lexicon", "catalog")); err != nil {
		t.Fatal(err)
	}
	return &Validator{cat: cat}
}

// check runs a record through the same stages as DataWith: the walker with
// field paths, then indigo's validator on what the walker passed.
func (v *Validator) interopCheck(collection string, data map[string]any) ([]Problem, error) {
	rec, err := v.recordSchema(collection)
	if err != nil {
		return nil, err
	}
	p := v.schemaProblems(collection, rec, data)
	if len(p) == 0 {
		p = v.authority(collection, data)
	}
	return p, nil
}

func TestInteropRecordData(t *testing.T) {
	t.Parallel()
	v := interopValidator(t)
	const nsid = "example.lexicon.record"
	for _, fx := range interopRecords(t, "record-data-valid.json") {
		data, err := atdata.UnmarshalJSON(fx.Data)
		if err != nil {
			t.Errorf("valid %q: not AT Protocol data: %v", fx.Name, err)
			continue
		}
		p, err := v.interopCheck(nsid, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) > 0 {
			t.Errorf("valid %q: refused: %v", fx.Name, p)
		}
	}
	for _, fx := range interopRecords(t, "record-data-invalid.json") {
		data, err := atdata.UnmarshalJSON(fx.Data)
		if err != nil {
			continue // refused as data, before any schema
		}
		p, err := v.interopCheck(nsid, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == 0 {
			t.Errorf("invalid %q: accepted", fx.Name)
		}
	}
}

// TestInteropDataModel: JSON records that are not AT Protocol data are
// refused by JSON (validate_record's entry) as such, and valid ones are not.
func TestInteropDataModel(t *testing.T) {
	t.Parallel()
	type fixture struct {
		Note string          `json:"note"`
		JSON json.RawMessage `json:"json"`
	}
	read := func(name string) []fixture {
		raw, err := os.ReadFile(filepath.Join("testdata", "interop", "data-model", name))
		if err != nil {
			t.Fatal(err)
		}
		var out []fixture
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			t.Fatalf("%s: no fixtures", name)
		}
		return out
	}
	const notData = "not a JSON object of AT Protocol data"
	for _, fx := range read("data-model-valid.json") {
		err := Default().JSON(fx.JSON, "", nil)
		if err != nil && strings.Contains(err.Error(), notData) {
			t.Errorf("valid %q: refused as data: %v", fx.Note, err)
		}
	}
	for _, fx := range read("data-model-invalid.json") {
		err := Default().JSON(fx.JSON, "", nil)
		if err == nil || !strings.Contains(err.Error(), notData) {
			t.Errorf("invalid %q: not refused as data (got %v)", fx.Note, err)
		}
	}
}
