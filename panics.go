package engine

import (
	"fmt"

	"github.com/abi-engine/engine/actors"
	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
)

// watchPanics makes every actor panic the recover middleware catches visible (design
// §4.5): logged once with the actor and its stack, counted by actor kind, and counted
// in /status. It runs before any actor of the engine is spawned.
func (e *Engine) watchPanics(sys *actor.Engine) {
	stop := actors.WatchPanics(sys, e.actorPanicked)
	e.mu.Lock()
	e.stopPanics = stop
	e.mu.Unlock()
}

func (e *Engine) actorPanicked(p actors.Panicked) {
	kind := actors.Kind(p.PID)
	e.metrics.panics.WithLabelValues(kind).Inc()
	e.metrics.panicCount.Add(1)
	// The panic's own stack is the one that matters, not the logger's.
	e.log.WithOptions(zap.AddStacktrace(zap.FatalLevel)).Error("an actor panicked: it was restarted in place",
		zap.String("actor", p.PID.String()), zap.String("kind", kind),
		zap.String("reason", fmt.Sprint(p.Reason)), zap.String("stack", string(p.Stack)))
}
