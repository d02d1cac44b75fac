package outline

// FullBuilds is how many times Next fell back to building the whole tree.
func FullBuilds() int64 { return fullBuilds.Load() }
