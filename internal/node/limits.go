package node

import "github.com/abi-engine/engine/sessions"

// sessionLimits are the limits block as the sessions package takes it: one budget for
// the object-storage transfers and the overflow host together, so the memory every
// session of the engine holds has one bound (docs/operations.md sizes a pod from it).
// The tree owns the budget's trimmer, which hands memory back to the system once the
// sessions that held it have ended.
func (e *Engine) sessionLimits() sessions.Limits {
	l := e.cfg.Limits
	b := sessions.NewBudget(l.Bytes(), l.ClientBytes())
	e.tree.Add(svcBudget, b)
	return sessions.Limits{
		Budget:               b,
		MaxSessions:          l.Sessions,
		MaxSessionsPerClient: l.ClientSessions,
		MaxSessionBytes:      l.SessionBytes(),
		MaxRequestBytes:      l.RequestUploadBytes(),
		IdleTimeout:          l.SessionIdle(),
		MaxLifetime:          l.SessionMax(),
	}
}
