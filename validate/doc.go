// Package validate checks app.bulleted.* records before anything is written.
//
// Each record is checked twice: against its lexicon with indigo's
// atproto/lexicon (the authority on what the schema says), and by a walker over
// the same schema that reports every problem with its field path
// ("facets[0].index.byteEnd: …"), which indigo's errors do not carry. On top
// of the schema come the record-level rules a lexicon cannot express and that
// need no repository (see package lexicon's doc for the list): $type matches
// the collection, sortKey is non-empty, references point at the right
// collection (and, when the record's own URI is known, at the same repository
// and, for notes, the same record key), root present exactly when the key is
// not "self", imageAlt with image, facet byte ranges inside the text.
//
// Open sets stay open: every knownValues in the lexicons (layout, display,
// comment-policy allow rules) admits values this version does not know, and
// unknown fields are valid; nothing is ever stripped from a record. Check
// (and JSONNotes) return notes for such values: Bulleted does not render
// them, or an unknown allow rule grants nothing. Closed enums still refuse.
// A facet link uri with non-ASCII characters (an IRI, which the reference
// validator accepts and other clients write) is checked as its encoded
// form (the host name's IDNA A-label, other bytes percent-encoded), with a
// note; links this server detects are written
// encoded (package facet). Facet checks one derived facet on its own.
//
// Data must come from atdata.UnmarshalJSON (not encoding/json), so that blobs,
// bytes and links have the types the lexicon validator expects; JSON and
// Record do that conversion.
package validate
