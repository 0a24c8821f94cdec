package actors

import (
	"context"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/anthdm/hollywood/actor"
)

// watchRetry is how long the contender waits before watching again after a failure.
const watchRetry = 250 * time.Millisecond

// watched is a record from the contender's watch goroutine number gen.
type watched struct {
	gen uint64
	rec lease.Record
}

// contender watches the lease (while claiming or standing by, to see the holder renew
// or go; while holding, to see any write not ours at once) and owns the takeover,
// standby and retry timer.
//
// State: the timer, the watch's cancel function (nil: off) and its generation. Goroutines:
// one watch at a time, started on watch{on}, cancelled on watch{off}, on stop and on
// restart, never waited for here (Ownership.Stop waits for it). It sends each record to
// the contender tagged with its generation, so records of a watch already cancelled are
// dropped instead of reaching the machine out of order. Messages: it takes arm and watch
// from the ownership actor and watched from its goroutine; it sends the ownership actor
// tick, observed, and childUp after a restart.
type contender struct {
	store  lease.Store
	tasks  tasks
	timer  timer
	gen    uint64
	cancel context.CancelFunc
}

func (t *contender) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Stopped:
		t.timer.stop()
		t.stopWatch()
	case arm:
		t.timer.arm(c, m.at)
	case watch:
		if m.on {
			t.startWatch(c)
		} else {
			t.stopWatch()
		}
	case watched:
		if t.cancel != nil && m.gen == t.gen {
			c.Send(c.Parent(), observed{rec: m.rec})
		}
	}
}

// Restart implements Restarter: the ownership actor turns the watch on again if it
// should be.
func (t *contender) Restart(c *actor.Context) {
	t.timer.stop()
	t.stopWatch()
	c.Send(c.Parent(), childUp{name: ContenderName})
}

func (t *contender) startWatch(c *actor.Context) {
	if t.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel = cancel
	t.gen++
	e, self, s, gen := c.Engine(), c.PID(), t.store, t.gen
	t.tasks.start(func() {
		for {
			if w, err := s.Watch(ctx); err == nil {
				for rec := range w.Updates() {
					e.Send(self, watched{gen: gen, rec: rec})
				}
				w.Stop()
			}
			retry := time.NewTimer(watchRetry)
			select {
			case <-ctx.Done():
				retry.Stop()
				return
			case <-retry.C:
			}
		}
	})
}

// stopWatch cancels the watch; its goroutine ends on its own.
func (t *contender) stopWatch() {
	if t.cancel == nil {
		return
	}
	t.cancel()
	t.cancel = nil
}
