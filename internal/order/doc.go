// Package order owns sibling order: it chooses sortKeys for inserts and moves
// so that every key sorts strictly between its new neighbours (compared as
// bytes, ties broken by record key), uses only the alphabet 0-9A-Za-z, stays
// at most 512 bytes, and stays short under the editing patterns people and
// agents produce.
//
// The lexicon allows any string up to 512 bytes as a sortKey. Where another
// client's keys leave no alphabet key between two neighbours ("a!" and
// "a0"), Place takes a key of graphic ASCII, printable without the space,
// that fits ("a(V": a byte between theirs, then an alphabet byte; see Wide)
// rather than rewriting siblings; only where no such key fits either ("a"
// and "a!": every key between them starts "a ") does it respace. No key
// it mints holds a space: a client that trims keys would misorder it.
// Existing keys, spaces and all, are kept and compared as bytes.
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
// TIDs, so the newest sibling is known from the snapshot; see BiasFor):
//
//   - Next when typing down (the newest is the lower neighbour) and Prev
//     when inserting again and again after the same bullet (the newest is
//     the upper neighbour): the run counts on from the key it extends, in
//     steps of 62 on an open side (so later inserts between the run's
//     bullets find room at the same level) and of at most 1/64 of a bounded
//     gap;
//   - NearLo/NearHi when zig-zagging between the two newest: next to the
//     older neighbour, so the gap the next edit will use stays wide;
//   - the middle otherwise (random edits): of the gap when it is bounded,
//     and on a deeper level's open side of the integers as long as the
//     neighbour's, so later edits there find room on both sides at the same
//     length. Neighbours that are not element sequences get a memoryless
//     midpoint (never one ending in '0', which leaves no room below it).
//
// Counters grow logarithmically (one more digit per factor of 62), where a
// memoryless midpoint grows linearly. When a fresh level opens with both
// sides unbounded, a zig-zag's choice jumps ±119,164 (62³/2) from zero so
// that its two counters each have about 115,000 keys of 4 bytes before they
// meet (a repository holds at most 250,000 records); from 8 bytes into a key
// the jump is ±1,922 (62²/2), so each nested level costs 3 bytes, not 4.
// Keys that do not parse as elements from the start (midpoints, foreign
// keys) continue a run from their last element, or open a fresh level under
// the lower neighbour; a neighbour whose bracketing element would be longer
// than itself plus one byte (a raw tail such as "V" read as a six-digit
// negative) is not used as a level.
//
// # Renormalisation
//
// Keys stay at most MaxGen (32) bytes wherever that costs at most Window
// (32) rewrites. A key over Threshold (24) bytes is first avoided by
// respacing a window of at most Window of this client's own siblings when
// that brings every key back to Threshold; if there is none, the longer key
// is taken. Over MaxGen Place respaces a window with foreign siblings
// (fewest foreign first; the planner says which via Options.Foreign), still
// at most Window of them. When no such window fits either — more than
// Window siblings packed under one long common prefix, which nested editing
// campaigns at one spot can build — the insert takes a key longer than
// MaxGen (up to MaxKey) instead of rewriting more: no insert ever rewrites
// more than Window siblings, and later inserts there respace back to short
// keys as soon as a window fits. Only when the neighbours are equal or
// invalid (empty or over 512 bytes, so they cannot be a bound) or have no
// printable key between them does Place respace windows doubling up to the
// whole list with open ends (which always fits). Respaced keys are spread
// evenly, with room between them; they are returned as updates so the
// planner can cost them (2 points each) and commit them with the insert.
// Renormalisation never changes the visible order.
//
// No scheme keeps every key short with a bounded number of rewrites per
// insert against every sequence of inserts (online list labelling needs
// Ω(log n) amortised relabels for polynomial label spaces), so the bound
// kept absolutely is the per-insert one; key length is kept at MaxGen in
// every single pattern at 100,000 inserts, and under 2×MaxGen in random
// mixes of them (TestBoundedRespacing; figures in BenchmarkPatterns).
//
// Nodes and mirrors under the same parent share one key space: the planner
// passes both as siblings.
package order
