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
// not "self", imageAlt with image, allow rules known, facet byte ranges inside
// the text.
//
// Open sets stay open: unknown layout or display values and unknown fields are
// valid, and nothing is ever stripped from a record.
//
// Data must come from atdata.UnmarshalJSON (not encoding/json), so that blobs,
// bytes and links have the types the lexicon validator expects; JSON and
// Record do that conversion.
package validate
