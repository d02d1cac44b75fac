// Package intent holds the intents the tools offer, one file each, as
// values that implement outline.Intent: each plans its writes through the
// engine's kit (outline.Planner's exported methods: read the tree, create,
// update, delete, place among siblings, reorder, summary and notes) and
// never touches the engine's internals. The engine checks its rules on
// every finished plan (parents in this repository or in an outline that
// admits this identity, no cascade, no cycles, policy roots owned, valid
// records) and runs the plan as one operation: recorded, budgeted,
// committed with swapCommit, resumable and undoable.
//
// Adding an intent is one file here and one tool constructor in package
// tools (see Sort and tools/sort.go).
package intent
