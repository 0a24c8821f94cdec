package engine

// EndCounts is what e's end stopped and released (internal/node's lifecycle): endings
// run, Stop told to the members, releases of the lease asked, closes of the members.
func EndCounts(e *Engine) map[string]int32 { return e.n.EndCounts() }
