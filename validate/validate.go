package validate

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/bluesky-social/indigo/atproto/atdata"
	indigolex "github.com/bluesky-social/indigo/atproto/lexicon"
	"github.com/bluesky-social/indigo/atproto/syntax"
	"github.com/rivo/uniseg"

	"github.com/bulleted-mcp/bulleted-mcp/internal/facet"
	"github.com/bulleted-mcp/bulleted-mcp/lexicon"
)

// ErrInvalidRecord is wrapped by every *Error: a record does not satisfy its
// lexicon or one of the record-level rules.
var ErrInvalidRecord = errors.New("invalid record")

// Problem is one reason a record is invalid, with the field path it concerns
// (empty for the record as a whole).
type Problem struct {
	Path string `json:"path"`
	Msg  string `json:"message"`
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Msg
	}
	return p.Path + ": " + p.Msg
}

// Error carries the problems of one record; it wraps ErrInvalidRecord.
type Error struct {
	Collection string
	Problems   []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("invalid %s record: %s", e.Collection, strings.Join(parts, "; "))
}

func (e *Error) Unwrap() error { return ErrInvalidRecord }

// WithPrefix returns a copy of e whose paths start with prefix (e.g. "nodes[2]").
func (e *Error) WithPrefix(prefix string) *Error {
	out := &Error{Collection: e.Collection}
	for _, p := range e.Problems {
		q := p
		switch {
		case q.Path == "":
			q.Path = prefix
		case strings.HasPrefix(q.Path, "["):
			q.Path = prefix + q.Path
		default:
			q.Path = prefix + "." + q.Path
		}
		out.Problems = append(out.Problems, q)
	}
	return out
}

// Validator validates records against the embedded lexicons.
type Validator struct {
	cat *indigolex.BaseCatalog
}

var (
	defaultOnce sync.Once
	defaultV    *Validator
)

// Default returns the shared validator over the embedded lexicons.
func Default() *Validator {
	defaultOnce.Do(func() {
		v, err := New()
		if err != nil {
			panic(err) // the embedded schemas are part of the binary: a bug
		}
		defaultV = v
	})
	return defaultV
}

// New loads the embedded lexicons into a fresh catalog.
func New() (*Validator, error) {
	cat := indigolex.NewBaseCatalog()
	if err := cat.LoadEmbedFS(lexicon.Schemas); err != nil {
		return nil, fmt.Errorf("loading lexicons: %w", err)
	}
	return &Validator{cat: cat}, nil
}

// JSON validates one record given as JSON. collection may be empty, in which
// case the record's $type names it. self, when non-nil, is the record's own
// AT-URI and enables the rules that depend on it.
func (v *Validator) JSON(raw []byte, collection string, self *syntax.ATURI) error {
	data, err := atdata.UnmarshalJSON(raw)
	if err != nil {
		return &Error{Collection: collection, Problems: []Problem{{Msg: "not a JSON object of AT Protocol data: " + err.Error()}}}
	}
	return v.Data(data, collection, self)
}

// JSONNotes is JSON that also returns notes: values of open sets
// (knownValues) that this version does not know. Such a record is valid
// and kept as written; a note says Bulleted does not render the value (or,
// for a comment-policy rule, that it grants nothing).
func (v *Validator) JSONNotes(raw []byte, collection string, self *syntax.ATURI) ([]Problem, error) {
	data, err := atdata.UnmarshalJSON(raw)
	if err != nil {
		return nil, &Error{Collection: collection, Problems: []Problem{{Msg: "not a JSON object of AT Protocol data: " + err.Error()}}}
	}
	return v.Check(data, collection, self, Options{})
}

// Record validates a record built in Go (plain maps, slices, strings and
// numbers) by passing it through JSON and atdata, the way it will be sent.
func (v *Validator) Record(rec map[string]any, collection string, self *syntax.ATURI) error {
	raw, err := json.Marshal(rec)
	if err != nil {
		return &Error{Collection: collection, Problems: []Problem{{Msg: "cannot encode record: " + err.Error()}}}
	}
	return v.JSON(raw, collection, self)
}

// Data validates a record decoded with atdata.UnmarshalJSON or UnmarshalCBOR.
func (v *Validator) Data(data map[string]any, collection string, self *syntax.ATURI) error {
	return v.DataWith(data, collection, self, Options{})
}

// Options relax the rules for one record.
type Options struct {
	// KeptParent is a parent URI in another repository that the record
	// already has and keeps: a contribution to another identity's shared
	// outline (its contributors admit this identity), edited in place. The
	// same-repository rule applies to every other parent.
	KeptParent string
}

// DataWith is Data with options.
func (v *Validator) DataWith(data map[string]any, collection string, self *syntax.ATURI, opt Options) error {
	_, err := v.Check(data, collection, self, opt)
	return err
}

// Check is DataWith that also returns the notes on a record, valid or not:
// values of open sets (knownValues) that this version does not know. Such a
// value is valid (an open set admits values a later version adds) and kept
// as written; the note says Bulleted does not render it, or for a
// comment-policy rule, that it grants nothing.
func (v *Validator) Check(data map[string]any, collection string, self *syntax.ATURI, opt Options) ([]Problem, error) {
	typ, _ := data["$type"].(string)
	if collection == "" {
		collection = typ
	}
	if self != nil && collection == "" {
		collection = self.Collection().String()
	}
	e := &Error{Collection: collection}
	add := func(path, format string, args ...any) {
		e.Problems = append(e.Problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	var notes []Problem
	note := func(path, format string, args ...any) {
		notes = append(notes, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
	}
	if !lexicon.IsCollection(collection) {
		add("$type", "%q is not an app.bulleted record collection (one of %s)", collection, strings.Join(lexicon.Collections, ", "))
		return nil, e
	}
	if typ != collection {
		if typ == "" {
			add("$type", "missing; it must be %q", collection)
		} else {
			add("$type", "%q does not match the collection %q", typ, collection)
		}
		return nil, e
	}
	if self != nil && self.Collection().String() != collection {
		add("", "record URI %s is not in collection %s", self, collection)
	}

	rec, err := v.recordSchema(collection)
	if err != nil {
		return nil, err // a bug: the schemas are embedded
	}
	data = iriLinks(data, note)
	rules(collection, data, self, opt, add, note)
	w := v.walk(collection, rec, data, notes)
	e.Problems = append(e.Problems, w.problems...)
	notes = append(notes, w.notes...)
	sort.SliceStable(notes, func(i, j int) bool { return notes[i].Path < notes[j].Path })
	if self != nil {
		keyRule(self, rec.Key, add)
	}

	if len(e.Problems) == 0 {
		e.Problems = append(e.Problems, v.authority(collection, data)...)
	}
	if len(e.Problems) == 0 {
		return notes, nil
	}
	sort.SliceStable(e.Problems, func(i, j int) bool { return e.Problems[i].Path < e.Problems[j].Path })
	return notes, e
}

// iriLinks returns data, for checking only, with each facet link uri that
// is an IRI (non-ASCII characters, as in "https://de.wikipedia.org/wiki/Köln")
// replaced by its percent-encoded URI, with a note for each. The reference
// validator accepts such a uri and other clients write them; the lexicon's
// "uri" format (RFC 3986) wants the encoded form, which is what this server
// writes for the links it detects. A record as written is never changed:
// the copy shares everything else with data.
func iriLinks(data map[string]any, note func(string, string, ...any)) map[string]any {
	fs, ok := data["facets"].([]any)
	if !ok {
		return data
	}
	var nfs []any
	for i, f := range fs {
		fm, _ := f.(map[string]any)
		feats, _ := fm["features"].([]any)
		var nfeats []any
		for j, ft := range feats {
			m, _ := ft.(map[string]any)
			u, _ := m["uri"].(string)
			if m["$type"] != facet.TypeLink || u == "" || !strings.ContainsFunc(u, func(r rune) bool { return r >= 0x80 }) {
				continue
			}
			enc := facet.LinkURI(u)
			if _, err := syntax.ParseURI(enc); err != nil {
				continue // not an IRI that encodes to a URI: the walker says why
			}
			if nfeats == nil {
				nfeats = append([]any(nil), feats...)
			}
			nm := maps.Clone(m)
			nm["uri"] = enc
			nfeats[j] = nm
			note(fmt.Sprintf("facets[%d].features[%d].uri", i, j), "%q has non-ASCII characters: valid as the reference validator reads it and kept as written, but a URI proper (RFC 3986) percent-encodes them: %q", u, enc)
		}
		if nfeats != nil {
			if nfs == nil {
				nfs = append([]any(nil), fs...)
			}
			nf := maps.Clone(fm)
			nf["features"] = nfeats
			nfs[i] = nf
		}
	}
	if nfs == nil {
		return data
	}
	out := maps.Clone(data)
	out["facets"] = nfs
	return out
}

// recordSchema resolves a record collection's schema in the catalog.
func (v *Validator) recordSchema(collection string) (indigolex.SchemaRecord, error) {
	schema, err := v.cat.Resolve(collection)
	if err != nil {
		return indigolex.SchemaRecord{}, fmt.Errorf("resolving %s: %w", collection, err)
	}
	rec, ok := schema.Def.(indigolex.SchemaRecord)
	if !ok {
		return indigolex.SchemaRecord{}, fmt.Errorf("%s is not a record schema", collection)
	}
	return rec, nil
}

// schemaProblems walks data against the record schema, giving each problem
// its field path.
func (v *Validator) schemaProblems(collection string, rec indigolex.SchemaRecord, data map[string]any) []Problem {
	return v.walk(collection, rec, data, nil).problems
}

// walk runs the walker over data; notes already made by the record-level
// rules mark paths the walker need not note again.
func (v *Validator) walk(collection string, rec indigolex.SchemaRecord, data map[string]any, notes []Problem) *walker {
	w := &walker{cat: v.cat, noted: map[string]bool{}}
	for _, n := range notes {
		w.noted[n.Path] = true // the rule's own note says more
	}
	w.object(collection, rec.Record, data, "")
	return w
}

// authority is indigo's validator, which has the last word on data the
// walker passed (the walker only adds paths).
func (v *Validator) authority(collection string, data map[string]any) []Problem {
	if err := indigolex.ValidateRecord(v.cat, data, collection, 0); err != nil {
		return []Problem{{Msg: err.Error()}}
	}
	return nil
}

func keyRule(self *syntax.ATURI, keyType string, add func(string, string, ...any)) {
	rk := self.RecordKey().String()
	switch keyType {
	case "tid":
		if _, err := syntax.ParseTID(rk); err != nil {
			add("", "record key %q is not a TID (this collection's keys are TIDs)", rk)
		}
	default:
		if _, err := syntax.ParseRecordKey(rk); err != nil {
			add("", "record key %q is not a valid record key", rk)
		}
	}
}

// rules checks what a lexicon cannot express.
func rules(collection string, d map[string]any, self *syntax.ATURI, opt Options, add, note func(string, string, ...any)) {
	str := func(k string) (string, bool) {
		s, ok := d[k].(string)
		return s, ok
	}
	// refTo checks an at-uri field names a record of the given collection.
	refTo := func(field, coll string, sameRepo bool) *syntax.ATURI {
		s, ok := str(field)
		if !ok {
			return nil
		}
		u, err := parseATURI(s)
		if err != nil {
			return nil // the schema walker reports the syntax
		}
		if u.Collection().String() != coll || u.RecordKey() == "" {
			add(field, "%s is not an %s record URI (at://DID/%s/RKEY)", s, coll, coll)
			return nil
		}
		if sameRepo && self != nil && u.Authority() != self.Authority() && !(field == "parent" && s == opt.KeptParent) {
			add(field, "%s is in another repository; it must be in %s", s, self.Authority())
		}
		return &u
	}
	switch collection {
	case lexicon.Node, lexicon.Mirror:
		if sk, ok := str("sortKey"); ok && sk == "" {
			add("sortKey", "empty; a sortKey must be at least one byte")
		}
		refTo("parent", lexicon.Node, true)
		if collection == lexicon.Mirror {
			refTo("original", lexicon.Node, false)
		}
	case lexicon.Note:
		if u := refTo("subject", lexicon.Node, true); u != nil && self != nil {
			if u.RecordKey() != self.RecordKey() {
				add("subject", "record key %s differs from the note's own %s; a note is co-keyed with its node", u.RecordKey(), self.RecordKey())
			}
		}
	case lexicon.Comment:
		refTo("subject", lexicon.Node, false)
	case lexicon.CommentPolicy, lexicon.Outline:
		refTo("root", lexicon.Node, true)
		if self != nil {
			_, hasRoot := d["root"]
			isSelf := self.RecordKey().String() == "self"
			if isSelf && hasRoot {
				add("root", "must be absent when the record key is self (self covers the whole repository)")
			}
			if !isSelf && !hasRoot {
				add("root", "required when the record key is not self (key %s)", self.RecordKey())
			}
		}
		if collection == lexicon.CommentPolicy {
			if allow, ok := d["allow"].([]any); ok {
				for i, r := range allow {
					s, _ := r.(string)
					// an open set (knownValues): valid, but a rule this
					// version does not know grants nothing
					if s != "" && !contains(lexicon.AllowRules, s) {
						note(fmt.Sprintf("allow[%d]", i), "rule %q is not one Bulleted knows, so it grants nothing there (valid: the allow list is an open set); the defined rule is \"mentioned\"", s)
					}
				}
			}
		} else {
			if _, img := d["image"]; img {
				if alt, _ := str("imageAlt"); alt == "" {
					add("imageAlt", "required whenever image is present")
				}
			}
		}
	}
	// facets: byte ranges inside the text
	if fs, ok := d["facets"].([]any); ok {
		text, _ := str("text")
		for i, f := range fs {
			fm, _ := f.(map[string]any)
			idx, _ := fm["index"].(map[string]any)
			if idx == nil {
				continue
			}
			s, ok1 := toInt(idx["byteStart"])
			e, ok2 := toInt(idx["byteEnd"])
			if !ok1 || !ok2 {
				continue
			}
			p := fmt.Sprintf("facets[%d].index", i)
			switch {
			case s >= e:
				add(p, "byteStart %d must be less than byteEnd %d", s, e)
			case e > int64(len(text)):
				add(p, "byteEnd %d is past the end of text (%s bytes)", e, Count(len(text)))
			}
		}
	}
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case float64:
		return int64(n), true
	}
	return 0, false
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// Count formats n with thousands separators: 2341 → "2,341".
func Count(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// walker follows the schema over the data and records problems with paths.
type walker struct {
	cat      indigolex.Catalog
	problems []Problem
	notes    []Problem       // open-set values this version does not know
	noted    map[string]bool // paths a rule already noted
}

func (w *walker) add(path, format string, args ...any) {
	w.problems = append(w.problems, Problem{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func (w *walker) object(nsid string, s indigolex.SchemaObject, d map[string]any, path string) {
	for _, k := range s.Required {
		if _, ok := d[k]; !ok {
			w.add(join(path, k), "required field is missing")
		}
	}
	keys := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, ok := d[k]
		if !ok || (v == nil && s.IsNullable(k)) {
			continue
		}
		w.value(nsid, s.Properties[k].Inner, v, join(path, k))
	}
}

func fullRef(nsid, ref string) string {
	if strings.HasPrefix(ref, "#") {
		return nsid + ref
	}
	return ref
}

func (w *walker) value(nsid string, def any, d any, path string) {
	switch s := def.(type) {
	case indigolex.SchemaString:
		str, ok := d.(string)
		if !ok {
			w.add(path, "expected a string, got %s", typeName(d))
			return
		}
		if s.MaxLength != nil && len(str) > *s.MaxLength {
			w.add(path, "%s bytes, the limit is %s", Count(len(str)), Count(*s.MaxLength))
		}
		if s.MaxGraphemes != nil {
			if g := uniseg.GraphemeClusterCount(str); g > *s.MaxGraphemes {
				w.add(path, "%s graphemes, the limit is %s", Count(g), Count(*s.MaxGraphemes))
			}
		}
		if len(s.KnownValues) > 0 && !contains(s.KnownValues, str) && !w.noted[path] {
			w.notes = append(w.notes, Problem{Path: path, Msg: fmt.Sprintf("%q is not one of the values Bulleted renders (%s); valid (an open set) and kept as written", str, strings.Join(s.KnownValues, ", "))})
		}
		sc := s
		sc.MaxLength, sc.MaxGraphemes = nil, nil
		check := func() error { return sc.Validate(str, 0) }
		var err error
		if sc.Format != nil && len(sc.Enum) == 0 && len(sc.KnownValues) == 0 && sc.Const == nil && sc.MinLength == nil && sc.MinGraphemes == nil {
			err = formatChecked(*sc.Format, str, check) // the same URI or date in many records
		} else {
			err = check()
		}
		if err != nil {
			msg := err.Error()
			if s.Format != nil {
				msg = fmt.Sprintf("%q is not a valid %s (%s)", str, *s.Format, err)
			}
			w.add(path, "%s", msg)
		}
	case indigolex.SchemaInteger:
		if err := s.Validate(d); err != nil {
			w.add(path, "%s", err)
		}
	case indigolex.SchemaBoolean:
		if err := s.Validate(d); err != nil {
			w.add(path, "%s", err)
		}
	case indigolex.SchemaBlob:
		b, ok := d.(atdata.Blob)
		if !ok {
			w.add(path, "expected a blob ({$type: blob, ref, mimeType, size}), got %s", typeName(d))
			return
		}
		if s.MaxSize != nil && b.Size > int64(*s.MaxSize) {
			w.add(path, "blob of %s bytes, the limit is %s", Count(int(b.Size)), Count(*s.MaxSize))
		}
		sc := s
		sc.MaxSize = nil
		if err := sc.Validate(d, 0); err != nil {
			if len(s.Accept) > 0 {
				w.add(path, "blob type %q is not accepted (accepted: %s)", b.MimeType, strings.Join(s.Accept, ", "))
			} else {
				w.add(path, "%s", err)
			}
		}
	case indigolex.SchemaArray:
		arr, ok := d.([]any)
		if !ok {
			w.add(path, "expected an array, got %s", typeName(d))
			return
		}
		if s.MaxLength != nil && len(arr) > *s.MaxLength {
			w.add(path, "%d items, the limit is %d", len(arr), *s.MaxLength)
		}
		if s.MinLength != nil && len(arr) < *s.MinLength {
			w.add(path, "%d items, at least %d required", len(arr), *s.MinLength)
		}
		for i, v := range arr {
			w.value(nsid, s.Items.Inner, v, fmt.Sprintf("%s[%d]", path, i))
		}
	case indigolex.SchemaObject:
		obj, ok := d.(map[string]any)
		if !ok {
			w.add(path, "expected an object, got %s", typeName(d))
			return
		}
		w.object(nsid, s, obj, path)
	case indigolex.SchemaRef:
		ref := fullRef(nsid, s.Ref)
		next, err := w.cat.Resolve(ref)
		if err != nil {
			w.add(path, "unresolvable schema reference %s", ref)
			return
		}
		w.value(strings.SplitN(ref, "#", 2)[0], next.Def, d, path)
	case indigolex.SchemaUnion:
		obj, ok := d.(map[string]any)
		if !ok {
			w.add(path, "expected an object with $type, got %s", typeName(d))
			return
		}
		t, _ := obj["$type"].(string)
		if t == "" {
			w.add(path, "missing $type")
			return
		}
		for _, r := range s.Refs {
			if fr := fullRef(nsid, r); fr == t || (strings.HasSuffix(fr, "#main") && strings.TrimSuffix(fr, "#main") == t) {
				next, err := w.cat.Resolve(fr)
				if err == nil {
					w.value(strings.SplitN(fr, "#", 2)[0], next.Def, d, path)
				}
				return
			}
		}
		if s.Closed != nil && *s.Closed {
			w.add(path, "$type %q is not one of the allowed variants", t)
		}
	default:
		// unknown, bytes, cid-link, token: leave to indigo's validator
	}
}

func typeName(d any) string {
	switch d.(type) {
	case string:
		return "a string"
	case int64, int, float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	case nil:
		return "null"
	}
	return reflect.TypeOf(d).String()
}

// FacetDef is the lexicon of the facets in a record's facets array.
const FacetDef = "app.bsky.richtext.facet"

// Facet checks one app.bsky.richtext.facet object built in Go (index and
// features) against its lexicon, so that a facet derived from text can be
// left out, rather than refuse the record, when it would not be valid.
// Paths start at the facet ("features[0].uri").
func (v *Validator) Facet(f map[string]any) error {
	e := &Error{Collection: FacetDef}
	raw, err := json.Marshal(f)
	if err != nil {
		e.Problems = append(e.Problems, Problem{Msg: "cannot encode facet: " + err.Error()})
		return e
	}
	data, err := atdata.UnmarshalJSON(raw)
	if err != nil {
		e.Problems = append(e.Problems, Problem{Msg: "not AT Protocol data: " + err.Error()})
		return e
	}
	schema, err := v.cat.Resolve(FacetDef)
	if err != nil {
		return fmt.Errorf("resolving %s: %w", FacetDef, err) // a bug: embedded
	}
	w := walker{cat: v.cat, noted: map[string]bool{}}
	w.value(FacetDef, schema.Def, data, "")
	if len(w.problems) == 0 {
		return nil
	}
	e.Problems = w.problems
	return e
}
