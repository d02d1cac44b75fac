package store

// BeforeCompactRename stops a compaction before its rename (tests).
func BeforeCompactRename(fn func() error) { beforeCompactRename = fn }

// Every store the tests open maps its log (mapLog), however small, so that
// a value that still pointed into the mapping once it is released would
// fault in the tests; the read path is the one a refresh takes.
func init() { mapMin = 1 }
