package engine

import (
	"context"
	"sync"

	"github.com/abi-engine/engine/actors"
	"go.uber.org/zap"
)

// stopper stops the actors' part of what Load built in the reverse of the order it
// was built (cockroach's Stopper): each part pushes its stop once it exists — the
// panic watcher, the ownership, the members, the root — and close runs them last
// first, once: the root (no role command reaches a member behind it), the members,
// the ownership (the lease given up), the panic watcher (a panic of any of them is
// still reported). A part pushed once close has run is stopped at once.
type stopper struct {
	log    *zap.Logger
	mu     sync.Mutex
	stops  []namedStop
	closed bool
}

// namedStop is one part's stop. It reads and writes what the close has learnt so far
// (closing): the stops run one after another on the closing goroutine.
type namedStop struct {
	name string
	stop func(ctx context.Context, c *closing)
}

// closing is what the stops of one close pass on to those after them.
type closing struct {
	root     *actors.Root // the root, closed first: what it published is final
	jobsLeft bool         // a job's run had not returned when the members closed
}

// push adds the stop of a part just built.
func (s *stopper) push(name string, stop func(ctx context.Context, c *closing)) {
	s.mu.Lock()
	if !s.closed {
		s.stops = append(s.stops, namedStop{name: name, stop: stop})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), teardownBound)
	defer cancel()
	stop(ctx, &closing{})
}

// close runs every stop pushed, last first, with c; a second close finds none.
func (s *stopper) close(ctx context.Context, c *closing) {
	s.mu.Lock()
	stops := s.stops
	s.stops, s.closed = nil, true
	s.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i].stop(ctx, c)
		s.log.Debug("actors stopped", zap.String("part", stops[i].name))
	}
}
