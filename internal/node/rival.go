package node

import (
	"context"

	"github.com/abi-engine/engine/internal/rivals"
)

// This file is the engine's part of the watch of rivals (package rivals): the check
// before the claim is the claim's (load.go); the watch runs while the engine serves.

// watchRivals looks, while the engine serves, for an engine that serves the kernel
// services with a lease this one cannot see (both started at once, or one of a version
// that does not check at start), and ends this engine when it must yield: the
// teardown releases the lease, and the end's error is the root package's *RivalError
// (exit 3). The engine owns its goroutines: stopWatchers stops them and waits.
func (e *Engine) watchRivals(f *rivals.Finder) {
	pace := rivals.Pace(e.cfg.NATS.Engine.Lease())
	// base ends with the watch, or at once when the engine stops it, so a Shutdown does
	// not wait out a ping in flight.
	base, cancelBase := context.WithCancel(context.Background())
	e.watchers.Add(2)
	go func() {
		defer e.watchers.Done()
		select {
		case <-e.stopWatch:
			cancelBase()
		case <-base.Done():
		}
	}()
	go func() {
		defer e.watchers.Done()
		defer cancelBase()
		f.Watch(base, pace, func() bool { return e.View().Serving() }, e.opts.Errors.Rival,
			func(err error) { e.beginEnd(endOnItsOwn, err) })
	}()
}
