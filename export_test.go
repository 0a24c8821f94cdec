package engine

// EndCounts is what e's end stopped and released (lifecycle.go): endings run, Stop
// told to the members, releases of the lease asked, closes of the members.
func EndCounts(e *Engine) map[string]int32 {
	return map[string]int32{
		"endings":       e.counts.endings.Load(),
		"member stops":  e.counts.memberStops.Load(),
		"releases":      e.counts.releases.Load(),
		"member closes": e.counts.membersClose.Load(),
	}
}
