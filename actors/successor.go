package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

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
func (m *HandoverMachine) beginSuccessor(out *HandoverOutput, now time.Time) (waits bool) {
	m.released = now
	bound := successorBound(m.cfg.lease.Lease, m.cfg.drain)
	m.enter(out, now, PhaseSuccessor, m.released.Add(bound))
	if bound <= 0 || len(m.cfg.members) == 0 || m.owner != lease.StateReleased || m.cfg.faults.skipSuccessor {
		return false
	}
	if m.standbys == standbysNone {
		out.log(zapcore.InfoLevel, "handover: no engine stands by; stopping accepting at once")
		return false
	}
	out.Waits = append(out.Waits, WaitStart{Kind: WaitSuccessor, Deadline: m.deadline})
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
func (m *HandoverMachine) rollCall(out *HandoverOutput, now time.Time) {
	if !m.cfg.rollCall {
		return
	}
	out.Waits = append(out.Waits, WaitStart{Kind: WaitRollCall, Deadline: now.Add(rollCallWindow)})
}

// rollCalled records the roll call's answer; it reports whether the cascade moves on:
// in the successor phase, an answer of none ends the wait.
func (m *HandoverMachine) rollCalled(out *HandoverOutput, msg rollCallDone) bool {
	switch {
	case msg.err != nil:
		out.log(zapcore.WarnLevel, "handover: the roll call of standbys failed; waiting for a successor as if one stood by", zap.Error(msg.err))
		return false
	case msg.any:
		m.standbys = standbysSome
		return false
	}
	m.standbys = standbysNone
	if m.phase != PhaseSuccessor {
		return false
	}
	out.log(zapcore.InfoLevel, "handover: no engine stands by; stopping accepting")
	return true
}

// successorFound logs how the wait for a successor ended (its report, or the phase
// deadline: the same instant, whichever the root hears of first).
func (m *HandoverMachine) successorFound(out *HandoverOutput, now time.Time, msg successorDone) {
	took := now.Sub(m.released)
	switch {
	case msg.err == nil:
		out.log(zapcore.InfoLevel, "handover: the new holder answers at the broker; stopping accepting",
			zap.String("holder", msg.holder.String()), zap.Duration("after_release", took))
	case errors.Is(msg.err, context.DeadlineExceeded):
		m.noSuccessor(out, msg.holder)
	default:
		out.log(zapcore.WarnLevel, "handover: could not confirm a successor; stopping accepting",
			zap.Duration("after_release", took), zap.Error(msg.err))
	}
}

// noSuccessor logs a wait for a successor that reached its bound: nobody took the lease
// (an engine without a standby), or the new holder did not answer in time.
func (m *HandoverMachine) noSuccessor(out *HandoverOutput, h lease.Holder) {
	bound := successorBound(m.cfg.lease.Lease, m.cfg.drain)
	if h == (lease.Holder{}) {
		out.log(zapcore.InfoLevel, "handover: no engine answered for the released lease; stopping accepting", zap.Duration("waited", bound))
		return
	}
	out.log(zapcore.WarnLevel, "handover: the new holder did not answer at the broker in time; stopping accepting",
		zap.String("holder", h.String()), zap.Duration("waited", bound))
}

// NextHolder watches the lease until another engine than this one holds it, and
// returns it: the root's wait for a successor, on a goroutine of its own. It returns
// ctx's error when ctx ends first.
func (o *Ownership) NextHolder(ctx context.Context) (lease.Holder, error) {
	return nextHolder(ctx, o.core.cfg.Store, o.core.cfg.Lease.Me.InstanceID)
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
