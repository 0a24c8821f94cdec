package primaries

import (
	"context"
	"sync"
	"sync/atomic"
)

// counter counts calls in flight and lets waiters learn when none is left. The hot path
// (add, done) is one atomic operation unless the count falls to zero.
type counter struct {
	n    atomic.Int64
	mu   sync.Mutex
	zero chan struct{} // closed and replaced each time n falls to zero
}

func newCounter() *counter { return &counter{zero: make(chan struct{})} }

func (c *counter) add() { c.n.Add(1) }

func (c *counter) done() {
	if c.n.Add(-1) != 0 {
		return
	}
	c.mu.Lock()
	close(c.zero)
	c.zero = make(chan struct{})
	c.mu.Unlock()
}

func (c *counter) load() int64 { return c.n.Load() }

// wait returns nil once nothing is in flight, or ctx's error.
func (c *counter) wait(ctx context.Context) error {
	for {
		c.mu.Lock()
		if c.n.Load() == 0 {
			c.mu.Unlock()
			return nil
		}
		zero := c.zero
		c.mu.Unlock()
		select {
		case <-zero:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}
