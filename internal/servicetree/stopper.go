package servicetree

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Stopper stops the parts of one service in the reverse of the order they were built:
// each part pushes its stop once it exists, and Close runs them last first, once,
// passing each the C that the stops before it filled in. A part pushed once Close has
// run is stopped at once, bounded by the Stopper's bound, with a zero C.
type Stopper[C any] struct {
	log   *zap.Logger
	bound time.Duration

	mu     sync.Mutex
	stops  []namedStop[C]
	closed bool
}

type namedStop[C any] struct {
	name string
	stop func(ctx context.Context, c *C)
}

// NewStopper is a Stopper that logs each part stopped, and bounds the stop of a part
// pushed after Close by bound.
func NewStopper[C any](log *zap.Logger, bound time.Duration) *Stopper[C] {
	return &Stopper[C]{log: log, bound: bound}
}

// Push adds the stop of a part just built.
func (s *Stopper[C]) Push(name string, stop func(ctx context.Context, c *C)) {
	s.mu.Lock()
	if !s.closed {
		s.stops = append(s.stops, namedStop[C]{name: name, stop: stop})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.bound)
	defer cancel()
	var c C
	stop(ctx, &c)
}

// Close runs every stop pushed, last first, with c; a second Close finds none. The
// stops run one after another on the caller's goroutine.
func (s *Stopper[C]) Close(ctx context.Context, c *C) {
	s.mu.Lock()
	stops := s.stops
	s.stops, s.closed = nil, true
	s.mu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i].stop(ctx, c)
		s.log.Debug("stopped", zap.String("part", stops[i].name))
	}
}
