package store

// BeforeCompactRename stops a compaction before its rename (tests).
func BeforeCompactRename(fn func() error) { beforeCompactRename = fn }
