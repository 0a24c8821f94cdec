package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/abi-engine/engine/chaos/check"
	"github.com/abi-engine/engine/chaos/report"
	"github.com/abi-engine/engine/lease"
	"github.com/abi-engine/engine/lease/jetstreamstore"
)

// observer watches the lease key and records every value it sees.
type observer struct {
	w      lease.Watcher
	cancel context.CancelFunc
	done   chan struct{}
}

func (h *harness) observe() (*observer, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(h.ctx))
	openCtx, openCancel := context.WithTimeout(ctx, 30*time.Second)
	defer openCancel()
	store, err := jetstreamstore.Open(openCtx, h.nc, jetstreamstore.Config{Replicas: h.replicas})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open the lease bucket to watch it: %w", err)
	}
	w, err := store.Watch(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watch the lease: %w", err)
	}
	o := &observer{w: w, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		last := "\x00" // no holder seen yet
		for rec := range w.Updates() {
			holder := ""
			switch {
			case rec.Free():
			case rec.Holder.Known():
				holder = rec.Holder.InstanceID
			default:
				holder = check.ForeignHolder
			}
			now := time.Now()
			h.mu.Lock()
			h.leaseEv = append(h.leaseEv, check.LeaseEvent{At: now, Revision: rec.Revision, Holder: holder})
			h.mu.Unlock()
			if holder != last {
				last = holder
				h.event(report.KindLease, "lease", "%s (revision %d)", h.describeHolder(holder), rec.Revision)
			}
		}
	}()
	return o, nil
}

func (o *observer) stop() {
	o.cancel()
	o.w.Stop()
	<-o.done
}
