package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/lease"
)

// The handover's successor phase (docs/architecture.md, cascade 1). Released, we keep
// our shared subscriptions until the engine that took the lease answers at the broker
// on every one of them, and only then tell the members to stop accepting: a call finds
// one of us subscribed at every instant, instead of "no responders" while the new
// holder subscribes. Both accept calls for that moment (an overlap, as before, now
// closed by the successor's confirmation rather than opened by our UNSUB); the calls we
// take in it are received calls, answered in our drain under the epoch the successor
// defers (Epoch, (b)). The wait is bounded, so an engine with no successor stops as
// before, a bound later.

// successorBound is how long after the release we go on serving while no successor
// answers: lease/4 (the designed overlap the no-overlap checker allows), and at most
// half of drain_seconds, which count from the release, so the calls taken meanwhile
// keep time to be answered. drain_seconds 0 closes everything at once: no wait.
func successorBound(leasePeriod, drain time.Duration) time.Duration {
	return max(0, min(leasePeriod/4, drain/2))
}

// beginSuccessor enters PhaseSuccessor and starts the wait; it reports whether the
// phase waits. Nothing to wait for: no member, no time (successorBound), or no release
// to follow (the lease was lost, and the members were stopped with it).
func (a *rootActor) beginSuccessor(c *actor.Context) (waits bool) {
	r, st := a.r, a.st
	st.released = time.Now()
	bound := successorBound(r.cfg.Ownership.Config().Lease, r.cfg.Drain)
	a.enter(c, PhaseSuccessor, st.released.Add(bound))
	if bound <= 0 || len(r.cfg.Members) == 0 || r.cfg.Ownership.Status().State != lease.StateReleased || a.skipSuccessor() {
		return false
	}
	if st.standbys == standbysNone {
		a.r.log.Info("handover: no engine stands by; stopping accepting at once")
		return false
	}
	store, me, confirm := r.cfg.Ownership.core.cfg.Store, r.cfg.Ownership.Config().Me.InstanceID, r.cfg.Successor
	a.goWait(c, st.deadline, func(ctx context.Context) any {
		h, err := nextHolder(ctx, store, me)
		if err == nil {
			if err = confirm(ctx, h); err != nil {
				err = fmt.Errorf("the new holder %s does not answer at the broker: %w", h, err)
			}
		}
		return successorDone{holder: h, err: err}
	})
	return true
}

// standbyCount is what the roll call at the handover's start found.
type standbyCount uint8

const (
	standbysUnknown standbyCount = iota // not answered yet, or it failed: wait as if one stood by
	standbysSome
	standbysNone
)

// rollCallWindow bounds the roll call: a standby answers within a round trip.
const rollCallWindow = 250 * time.Millisecond

// rollCall asks, as the handover begins, whether any engine stands by, on a goroutine
// of the root's that reports rollCallDone. An engine without a standby then ends its
// subscriptions right after the release, as before the successor phase, instead of
// serving on for its bound while nobody comes.
func (a *rootActor) rollCall(c *actor.Context) {
	ask := a.r.cfg.AnyStandby
	if ask == nil {
		return
	}
	a.goWait(c, time.Now().Add(rollCallWindow), func(ctx context.Context) any {
		found, err := ask(ctx)
		return rollCallDone{any: found, err: err}
	})
}

// rollCalled records the roll call's answer; it reports whether the cascade moves on:
// in the successor phase, an answer of none ends the wait.
func (a *rootActor) rollCalled(m rollCallDone) bool {
	st := a.st
	switch {
	case m.err != nil:
		a.r.log.Warn("handover: the roll call of standbys failed; waiting for a successor as if one stood by", zap.Error(m.err))
		return false
	case m.any:
		st.standbys = standbysSome
		return false
	}
	st.standbys = standbysNone
	if st.phase != PhaseSuccessor {
		return false
	}
	a.r.log.Info("handover: no engine stands by; stopping accepting")
	return true
}

// successorFound logs how the wait for a successor ended (its report, or the phase
// deadline: the same instant, whichever the root hears of first).
func (a *rootActor) successorFound(m successorDone) {
	log, took := a.r.log, time.Since(a.st.released)
	switch {
	case m.err == nil:
		log.Info("handover: the new holder answers at the broker; stopping accepting",
			zap.String("holder", m.holder.String()), zap.Duration("after_release", took))
	case errors.Is(m.err, context.DeadlineExceeded):
		a.noSuccessor(m.holder)
	default:
		log.Warn("handover: could not confirm a successor; stopping accepting",
			zap.Duration("after_release", took), zap.Error(m.err))
	}
}

// noSuccessor logs a wait for a successor that reached its bound: nobody took the lease
// (an engine without a standby), or the new holder did not answer in time.
func (a *rootActor) noSuccessor(h lease.Holder) {
	bound := successorBound(a.r.cfg.Ownership.Config().Lease, a.r.cfg.Drain)
	if h == (lease.Holder{}) {
		a.r.log.Info("handover: no engine answered for the released lease; stopping accepting", zap.Duration("waited", bound))
		return
	}
	a.r.log.Warn("handover: the new holder did not answer at the broker in time; stopping accepting",
		zap.String("holder", h.String()), zap.Duration("waited", bound))
}

// nextHolder watches the lease until another engine than me holds it, and returns it.
func nextHolder(ctx context.Context, store lease.Store, me string) (lease.Holder, error) {
	w, err := store.Watch(ctx)
	if err != nil {
		return lease.Holder{}, fmt.Errorf("watching the lease for a successor: %w", err)
	}
	defer w.Stop()
	for {
		select {
		case rec, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return lease.Holder{}, ctx.Err()
				}
				return lease.Holder{}, errors.New("the watch of the lease for a successor ended")
			}
			if !rec.Free() && rec.Holder.InstanceID != me {
				return rec.Holder, nil
			}
		case <-ctx.Done():
			return lease.Holder{}, ctx.Err()
		}
	}
}
