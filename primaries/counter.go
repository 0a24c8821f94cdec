package primaries

import (
	"context"
	"sync"
	"sync/atomic"
)

// counter counts calls in flight and lets waiters learn when none is left. The hot path
// (add, done) is one atomic operation, and one more load when the count falls to zero:
// the channel a waiter waits on is made by the waiter, so a busy engine whose count
// touches zero after every call allocates nothing.
type counter struct {
	n       atomic.Int64
	waiters atomic.Int64 // waits under way; done takes the lock only when there are some
	mu      sync.Mutex
	zero    chan struct{} // nil until a waiter needs it; closed (and cleared) at zero
}

func newCounter() *counter { return &counter{} }

func (c *counter) add() { c.n.Add(1) }

// done ends one call. A waiter registers (waiters) before it reads n, and done reads
// waiters after it has lowered n; the atomics are sequentially consistent, so either
// the waiter sees zero or done sees the waiter.
func (c *counter) done() {
	if c.n.Add(-1) != 0 || c.waiters.Load() == 0 {
		return
	}
	c.mu.Lock()
	if c.zero != nil {
		close(c.zero)
		c.zero = nil
	}
	c.mu.Unlock()
}

func (c *counter) load() int64 { return c.n.Load() }

// wait returns nil once nothing is in flight, or ctx's error.
func (c *counter) wait(ctx context.Context) error {
	c.waiters.Add(1)
	defer c.waiters.Add(-1)
	for {
		c.mu.Lock()
		if c.n.Load() == 0 {
			c.mu.Unlock()
			return nil
		}
		if c.zero == nil {
			c.zero = make(chan struct{})
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
