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

// Contributors. An owner admits identities to an outline with the
// contributors field of an app.bulleted.outline record (on `self` for the
// whole outline, or on a subtree's record; absent inherits from above,
// empty admits nobody). A contributor's agent adds to the shared outline by
// writing app.bulleted.node records in its own repository whose parent is
// the AT-URI of the owner's bullet (insert_after with
// parent=at://OWNER/app.bulleted.node/RKEY: the engine (outline, contrib.go)
// checks the admission and places them among outline.SharedChildren; writes always stay in
// the writer's own repository). Such bullets render in place in the owner's outline, marked
// with their author and read-only to everyone else; the owner's agent can
// neither edit, move nor delete them, and the contributor can neither edit
// nor reorder the owner's bullets around them. They are not detached:
// rendered in place their rows carry no detached reason, and the record
// check there leaves out the same-repository rule for parent (which only
// a contribution breaks, on purpose); list_detached in the contributor's
// repository lists them apart, as contributions to leave where they are,
// and move_node there refuses to move them (re-attaching them in the
// contributor's repository would pull them out of the shared outline).
// Their own children move like any other bullets.
