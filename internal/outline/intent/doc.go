// Package intent holds the intents the tools offer, one file each, as
// values that implement outline.Intent: each plans its writes through the
// engine's kit (outline.Planner's exported methods: read the tree, resolve
// a Position to a parent, sibling list and index, create, update, delete,
// re-parent, place among siblings, reorder, the shared-outline placement,
// summary and notes) and never touches the engine's internals. The
// structural intents (Insert, Move, Delete, Edit, Mirror, Policy, Outline)
// are written that way too: the kit is all any of them uses.
//
// The engine checks its rules on every finished plan, in its gate,
// whatever the intent did (parents in this repository or in an outline
// that admits this identity, no cascade, no cycles, notes with their
// bullets, policy roots owned, no tied sortKeys, valid records), and runs
// the plan as one operation: recorded, budgeted, committed with
// swapCommit, resumable and undoable. An intent refuses what it can tell
// is wrong with a typed error the model can act on; the gate is what makes
// it safe.
//
// Adding an intent is one file here and one tool constructor in package
// tools (see Sort and tools/sort.go).
package intent
