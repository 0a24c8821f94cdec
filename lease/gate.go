package lease

import (
	"sync/atomic"
	"time"
)

// Gate answers, with one atomic load, whether a call may run now (docs/design.md §5.8): only
// while the lease was renewed less than lease/2 ago. The ownership driver moves it; every
// ServicePrimary checks it before running a call, so a process that resumes after a pause
// executes nothing it finds queued, even before its fencer runs.
//
// The zero Gate is closed. It measures time on the monotonic clock from its own base.
type Gate struct {
	base  time.Time
	until atomic.Int64 // nanoseconds after base; calls before it may run
	open  atomic.Bool  // a clean handover drains: calls received may run
}

// NewGate returns a closed gate.
func NewGate() *Gate { return &Gate{base: time.Now()} }

// Allow lets calls run until t.
func (g *Gate) Allow(until time.Time) {
	g.open.Store(false)
	g.until.Store(int64(until.Sub(g.base)))
}

// Drain lets calls run with no deadline: after a clean release, the calls this engine
// already received are answered while the next engine serves (shared backends make the
// overlap safe).
func (g *Gate) Drain() { g.open.Store(true) }

// Close refuses every call from now on.
func (g *Gate) Close() {
	g.open.Store(false)
	g.until.Store(0)
}

// Valid reports whether a call may run now.
func (g *Gate) Valid() bool { return g.ValidAt(time.Now()) }

// ValidAt reports whether a call may run at now.
func (g *Gate) ValidAt(now time.Time) bool {
	return g.open.Load() || int64(now.Sub(g.base)) < g.until.Load()
}
