// Package view renders an outline.Tree for readers: pages of rows in
// pre-order (app.bulleted.getOutline rows, nested or flat), compact text,
// Markdown and OPML; and it fills in what lives in other repositories —
// the subtrees of mirrored originals, comments that render under the
// owner's policy, and the bullets of admitted contributors, rendered in
// place.
//
// Paging: a read stops after Options.Limit rows and returns a Cursor, an
// opaque token naming the last row emitted by its path of (sortKey, record
// key) pairs from the top of the read. The next read continues the pre-order
// walk right after that position, so a cursor stays valid across edits
// elsewhere: rows inserted before it are not repeated, rows after it are not
// skipped, and if the last row itself was deleted or moved the walk
// continues from where it stood.
package view
