package actors

import (
	"context"
	"time"

	"github.com/abi-engine/engine/lease"
	"github.com/anthdm/hollywood/actor"
)

// watchRetry is how long the contender waits before watching again after a failure.
const watchRetry = 250 * time.Millisecond

// watched is a record from the contender's watch goroutine number gen; watchedEpoch
// one from its epoch watch.
type (
	watched struct {
		gen uint64
		rec lease.Record
	}
	watchedEpoch struct {
		gen uint64
		rec lease.EpochRecord
	}
)

// contender watches the lease (while claiming or standing by, to see the holder renew
// or go; while holding, to see any write not ours at once) and the epoch record (while
// a bump is deferred, to see the draining engine's drain end), and owns the takeover,
// standby, retry and epoch timer.
//
// State: the timer and the two watches, each its cancel function (nil: off) and its
// generation. Goroutines: one per watch at a time, started on watch{on} (watchEpoch),
// cancelled on watch{off}, on stop and on restart, never waited for here
// (Ownership.Stop waits for them). Each sends its records to the contender tagged with
// its generation, so records of a watch already cancelled are dropped instead of
// reaching the machine out of order. Messages: it takes arm, watch and watchEpoch from
// the ownership actor and watched, watchedEpoch from its goroutines; it sends the
// ownership actor tick, observed, observedEpoch, and childUp after a restart.
type contender struct {
	store lease.Store
	tasks *Group
	timer timer
	lease keyWatch
	epoch keyWatch
}

func (t *contender) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Stopped:
		t.timer.stop()
		t.lease.stop()
		t.epoch.stop()
	case arm:
		t.timer.arm(c, m.at)
	case watch:
		if m.on {
			startKeyWatch(&t.lease, c, t.tasks, func(ctx context.Context) (watcherOf[lease.Record], error) {
				return t.store.Watch(ctx)
			}, func(gen uint64, rec lease.Record) any { return watched{gen: gen, rec: rec} })
		} else {
			t.lease.stop()
		}
	case watchEpoch:
		if m.on {
			startKeyWatch(&t.epoch, c, t.tasks, func(ctx context.Context) (watcherOf[lease.EpochRecord], error) {
				return t.store.WatchEpoch(ctx)
			}, func(gen uint64, rec lease.EpochRecord) any { return watchedEpoch{gen: gen, rec: rec} })
		} else {
			t.epoch.stop()
		}
	case watched:
		if t.lease.current(m.gen) {
			c.Send(c.Parent(), observed{rec: m.rec})
		}
	case watchedEpoch:
		if t.epoch.current(m.gen) {
			c.Send(c.Parent(), observedEpoch{rec: m.rec})
		}
	}
}

// Restart implements Restarter: the ownership actor turns the watches on again if they
// should be.
func (t *contender) Restart(c *actor.Context) {
	t.timer.stop()
	t.lease.stop()
	t.epoch.stop()
	c.Send(c.Parent(), childUp{name: ContenderName})
}

// watcherOf is what both watches of a lease.Store deliver through.
type watcherOf[T any] interface {
	Updates() <-chan T
	Stop()
}

// keyWatch is one of the contender's watches: at most one goroutine at a time, and the
// generation that tags its records.
type keyWatch struct {
	gen    uint64
	cancel context.CancelFunc
}

// current reports whether gen is the watch running now.
func (w *keyWatch) current(gen uint64) bool { return w.cancel != nil && gen == w.gen }

// startKeyWatch starts w's goroutine, unless it runs: it watches by open, sends each
// record to the contender as msg, and watches again after watchRetry when the watch
// ends or cannot start, until w is stopped.
func startKeyWatch[T any](w *keyWatch, c *actor.Context, tasks *Group, open func(context.Context) (watcherOf[T], error), msg func(uint64, T) any) {
	if w.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.gen++
	e, self, gen := c.Engine(), c.PID(), w.gen
	tasks.Go(func() {
		for {
			if wt, err := open(ctx); err == nil {
				for rec := range wt.Updates() {
					e.Send(self, msg(gen, rec))
				}
				wt.Stop()
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

// stop cancels the watch; its goroutine ends on its own.
func (w *keyWatch) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	w.cancel = nil
}
