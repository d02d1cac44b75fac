// Package lexicon holds the project's lexicon documents for the six
// app.bulleted.* record collections and app.bsky.richtext.facet, embedded so
// the binary needs no files at run time.
//
// The facts in these files (key types, required fields, byte and grapheme
// limits, formats, open sets) come from the schemas Bulleted publishes. Where
// Bulleted's prose guide and the published schemas differ, the schemas win.
//
// Rules the schema language cannot express, which the application enforces
// (package validate checks those that need no repository; the outline planner
// checks the rest):
//
//   - app.bulleted.commentPolicy and app.bulleted.outline: root is present if
//     and only if the record key is not "self".
//   - app.bulleted.outline: imageAlt is required whenever image is present.
//   - app.bulleted.note: co-keyed with its node — the note at
//     at://{did}/app.bulleted.note/{rkey} has subject
//     at://{did}/app.bulleted.node/{rkey}.
//   - parent (node, mirror) names an app.bulleted.node in the same repository;
//     original (mirror) and subject (note, comment) name an app.bulleted.node.
//   - commentPolicy root names a bullet the writer owns (same repository).
//   - allow is an open set too: a rule outside the known set is valid but
//     grants nothing (validate notes it; this server writes only
//     "mentioned"); the one defined rule is "mentioned".
//   - sortKey is non-empty; siblings order by its bytes, then by record key.
//   - layout and display are open sets: unknown values are valid and are
//     preserved on update.
package lexicon
