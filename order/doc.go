// Package order owns sibling order: it chooses sortKeys for inserts and moves
// so that every key sorts strictly between its new neighbours (compared as
// bytes, ties broken by record key), uses only the alphabet 0-9A-Za-z, stays
// at most 512 bytes, and stays short under the editing patterns people and
// agents produce.
//
// # Encoding
//
// A key we generate is a sequence of integers, each written as a
// self-delimiting, order-preserving element: a head byte that says the sign
// and the number of base-62 digits that follow, then the digits. Non-negative
// n uses head 'a'+(d-1) and n in d digits (d minimal), so 0 is "a0", 61 "az",
// 62 "b10"; negative n uses head 'Z'-(d-1) and 62^d+n in d digits, so -1 is
// "Zz". Because every element is prefix-free and order-preserving, comparing
// two keys as bytes compares their integer sequences lexicographically, with a
// proper prefix first. Positive single elements coincide with the integer
// part of rocicorp/fractional-indexing, so keys like "a0", "a1" written by
// other clients are already in this form.
//
// # Between two keys
//
// For neighbours lo < hi the generator finds the integers a and b whose
// elements bracket them at the first level (binary search over the element
// order, so foreign keys such as "a", "ba", "a0V" or punctuation work too).
// If a and b are at least two apart it picks an integer between them;
// otherwise it keeps the element of a and descends one level, where the side
// that the common element leaves open is unbounded. Which integer it picks is
// the bias, chosen by the caller from the neighbours' ages (record keys are
// TIDs, so the newest sibling is known from the snapshot):
//
//   - next to the older neighbour when the other neighbour is the newest
//     sibling (typing down a list, inserting again after the same bullet,
//     zig-zag between the two newest): the run continues from the key it
//     extends as a counter, and counters grow logarithmically (one more digit
//     per factor of 62), where a memoryless midpoint grows linearly;
//   - the middle otherwise (random edits), like a midpoint;
//   - appends and prepends at the ends of the list are a counter step.
//
// When a fresh level opens with both sides unbounded, the biased choice jumps
// ±3,844 (62²) from zero so that both counters of a zig-zag have room.
//
// # Renormalisation
//
// A key is never longer than Threshold bytes (24). When the generated key
// would be longer, when the neighbours are equal, or when a neighbour is
// itself invalid (empty or over 512 bytes, so it cannot be a bound), Place
// respaces a window of existing siblings around the insertion point, doubling
// it until fresh, evenly spread keys fit; the outermost window is the whole
// sibling list with open ends, which always fits. The respaced siblings are
// returned as updates so the planner can cost them (2 points each) and commit
// them with the insert. Renormalisation never changes the visible order.
//
// Nodes and mirrors under the same parent share one key space: the planner
// passes both as siblings.
package order
