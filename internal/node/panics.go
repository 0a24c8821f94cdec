package node

import (
	"context"
	"fmt"
	"strings"

	"github.com/abi-engine/engine/actors"
	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
)

// watchPanics makes every actor panic the recover middleware catches visible (docs/design.md
// §4.5): logged once with the actor and its stack, counted by actor kind, and counted
// in /status. It runs before any actor of the engine is spawned.
func (e *Engine) watchPanics(sys *actor.Engine) {
	stop := actors.WatchPanics(sys, e.actorPanicked)
	e.actorStops.Push("panics", func(context.Context, *closing) { stop() })
}

func (e *Engine) actorPanicked(p actors.Panicked) {
	kind := actors.Kind(p.PID)
	e.metrics.Panics.WithLabelValues(kind).Inc()
	e.metrics.PanicCount.Add(1)
	// The panic's own stack is the one that matters, not the logger's.
	e.log.WithOptions(zap.AddStacktrace(zap.FatalLevel)).Error("an actor panicked: it was restarted in place",
		zap.String("actor", p.PID.String()), zap.String("kind", kind),
		zap.String("reason", fmt.Sprint(p.Reason)), zap.String("stack", string(p.Stack)))
}

// InjectPanic makes one of the engine's actors panic, as a bug would, for the chaos
// harness and tests: the actor is restarted in place and keeps what its spawner holds
// (the lease, calls in flight, open sessions), except a transfer session's own actor,
// whose session ends (its next call is NOT_FOUND).
// Targets: "root", "ownership", "renewer", "fencer", "contender", "primary:<service>",
// "transfer:object_storage", "overflow", "jobs", and "session:<session id>" for one
// transfer session.
func (e *Engine) InjectPanic(target string) error {
	e.mu.Lock()
	sys, own, root, set := e.actorSys, e.ownership, e.root, e.serving
	e.mu.Unlock()
	if sys == nil || own == nil {
		return fmt.Errorf("%w: %q (the engine runs no actors)", e.opts.Errors.NoTarget, target)
	}
	var pid *actor.PID
	switch {
	case target == "ownership":
		pid = own.PID()
	case target == actors.RenewerName || target == actors.FencerName || target == actors.ContenderName:
		pid = own.Child(target)
	case target == "root" && root != nil:
		pid = root.PID()
	case strings.HasPrefix(target, "session:") && set != nil:
		id := strings.TrimPrefix(target, "session:")
		for _, h := range set.transfers {
			if p := h.SessionPID(id); p != nil {
				pid = p
			}
		}
	case set != nil:
		pid = set.named[target]
	}
	if pid == nil {
		return fmt.Errorf("%w: %q", e.opts.Errors.NoTarget, target)
	}
	sys.Send(pid, actors.Kill{Reason: "injected by InjectPanic"})
	return nil
}
