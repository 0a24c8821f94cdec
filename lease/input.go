package lease

import "time"

// The inputs of a Machine (the table above Machine); ObserveEpoch and MarkDrained are
// in settle.go.

// Start begins the claim: the machine asks to read the lease.
func (m *Machine) Start(now time.Time) Output {
	return m.step(InputStart, now, func(out *Output) {
		if m.sub == unstarted {
			m.issue(out, now, claimReading, Op{Kind: OpRead, Purpose: PurposeClaim})
		}
	})
}

// Observe reports a record the watch delivered.
func (m *Machine) Observe(now time.Time, rec Record) Output {
	return m.step(InputObserve, now, func(out *Output) {
		if !m.Watching() {
			return // a record delivered before the watch stopped
		}
		if m.sub.attrs().renews {
			// Even with a call in flight: a renewal can hang for lease/4, and an
			// eviction must stop us serving at once.
			m.own(out, now, rec)
			return
		}
		if m.inflight == nil {
			// A claim call in flight decides from the store itself; a watch record
			// arriving meanwhile adds nothing it will not see, and may be stale.
			m.consider(out, now, rec)
		}
	})
}

// Tick lets the machine act on its deadlines.
func (m *Machine) Tick(now time.Time) Output {
	return m.step(InputDeadline, now, func(*Output) {})
}

// Release starts a clean release. The machine ends in StateReleased; it deletes the
// lease only at a revision that is ours.
func (m *Machine) Release(now time.Time) Output {
	return m.step(InputRelease, now, func(out *Output) { m.release(out, now) })
}

// Done reports the outcome of the call in flight. A result for any other call (a
// stale one, from a worker that was restarted) is ignored.
func (m *Machine) Done(now time.Time, res Result) Output {
	return m.step(InputDone, now, func(out *Output) {
		if m.inflight == nil || res.ID != m.inflight.ID {
			return
		}
		op, sent := *m.inflight, m.sentAt
		m.inflight = nil
		d := done{op: op, res: res, sent: sent, conflict: isConflict(res.Err)}
		switch m.sub {
		case releasingClaim, releasing, fencedReleasing, evictedReleasing:
			m.releaseDone(out, now, d)
		case markingDrained:
			m.markDone(out, now, d)
		case evicted:
			m.evictedDone(out, now, d)
		case publishing, standbyPublishing:
			m.published(out, d)
			m.settle(out, now, settlingIn[m.sub])
		case settlingEpoch, standbySettlingEpoch, advancingEpoch, fencedSettlingEpoch:
			m.epochDone(out, now, d)
		default:
			if m.sub.attrs().renews {
				m.holdDone(out, now, d)
			} else {
				m.claimDone(out, now, d)
			}
		}
	})
}
