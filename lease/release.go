package lease

import "time"

// release starts a clean release: a watcher stops at once; a call in flight is waited
// for; a lease that is ours (or turns out to be) is deleted at our revision, and a
// release from serving marks the epoch record draining just before (releaseDelete).
func (m *Machine) release(out *Output, now time.Time) {
	switch m.sub {
	case unstarted, claimRetryWait, claimWatching, watchRetryWait, standingBy, standbyRetryWait, refused:
		out.Events = append(out.Events, Event{Kind: EventReleaseSkipped})
		m.to(out, released)
	case claimReading, creating, watchReading, watchCreating, takingOver,
		standbyReading, standbyCreating, standbyTakingOver, publishing, standbyPublishing,
		settlingEpoch, standbySettlingEpoch:
		m.to(out, releasingClaim)
	case holding:
		m.releaseDelete(out, now, releasing)
	case fenced:
		m.deleteOp(out, now, fencedReleasing)
	case renewing, renewReading, renewCreating, republishing, advancingEpoch:
		m.to(out, releasing)
	case fencedRenewing, fencedReading, fencedCreating, fencedPublishing, fencedSettlingEpoch, evictedReading:
		m.to(out, fencedReleasing)
	case evicted:
		// The call in flight was sent before the eviction: its success must not make
		// us serve again.
		m.to(out, evictedReleasing)
	}
}

// deleteOp deletes the lease at our revision and waits for it in next.
// A release from serving with a target (HandTo) writes the released-to form at our
// revision instead: the same compare-and-swap, with the same outcomes.
func (m *Machine) deleteOp(out *Output, now time.Time, next SubState) {
	m.releaseAttempts++
	if next == releasing && !m.handTo.Zero() {
		m.issue(out, now, next, Op{Kind: OpUpdate, Purpose: PurposeRelease, Revision: m.rev, Holder: m.cfg.Me.ReleasedTo(m.handTo)})
		return
	}
	m.issue(out, now, next, Op{Kind: OpDelete, Purpose: PurposeRelease, Revision: m.rev})
}

// releaseDone acts on the outcome of a call during a release: the call sent before it
// (a claim's, a renewal's, a publish), the delete, or the read after a delete conflict.
func (m *Machine) releaseDone(out *Output, now time.Time, d done) {
	rec := d.res.Record
	stay := m.sub // where the release goes on with its next call
	if stay == evictedReleasing {
		stay = fencedReleasing
	}
	switch {
	case (d.op.Kind == OpReadEpoch || d.op.Kind == OpWriteEpoch) && d.op.Purpose == PurposeRelease && m.sub == releasing:
		m.markDone(out, now, d)

	case d.op.Kind == OpReadEpoch || d.op.Kind == OpWriteEpoch:
		// A mark cut short by the fence (a successful one still stands), or a settle's
		// call sent before the release, whose outcome the release does not need: the
		// mark that follows reads the record again if it moved.
		if d.op.Purpose == PurposeRelease && d.op.Kind == OpWriteEpoch && d.res.Err == nil {
			m.epochRec, m.marked = d.op.Epoch, true
			m.epochRec.Revision = d.res.Rev
		}
		if stay == releasingClaim {
			m.deleteOp(out, now, stay)
			return
		}
		m.releaseDelete(out, now, stay)

	case d.op.Kind == OpDelete || d.op.Kind == OpUpdate && d.op.Purpose == PurposeRelease:
		switch {
		case d.res.Err == nil && d.op.Kind == OpUpdate:
			out.Events = append(out.Events, Event{Kind: EventHandedOff, Holder: d.op.Holder, Revision: d.res.Rev})
			m.to(out, released)
		case d.res.Err == nil:
			out.Events = append(out.Events, Event{Kind: EventReleased, Revision: d.op.Revision})
			m.to(out, released)
		case d.conflict:
			m.issue(out, now, stay, Op{Kind: OpRead, Purpose: PurposeRelease})
		default:
			out.Events = append(out.Events, Event{Kind: EventReleaseFailed, Revision: d.op.Revision, Err: d.res.Err})
			m.to(out, released)
		}

	case d.op.Kind == OpRead && d.op.Purpose == PurposeRelease:
		switch {
		case d.res.Err != nil:
			out.Events = append(out.Events, Event{Kind: EventReleaseFailed, Revision: m.rev, Err: d.res.Err})
			m.to(out, released)
		case !rec.Free() && rec.Holder == m.cfg.Me && m.releaseAttempts < maxReleaseAttempts:
			m.rev = rec.Revision
			m.deleteOp(out, now, stay)
		default:
			// Free, or another engine's: never delete it.
			out.Events = append(out.Events, Event{Kind: EventReleaseSkipped, Holder: rec.Holder, Revision: rec.Revision})
			m.to(out, released)
		}

	case d.op.Purpose == PurposeClaim:
		// Only a lease that turns out to be ours matters now: it must be deleted. A
		// create that landed unseen frees itself after one lease period, as contenders
		// time its silence.
		switch {
		case d.op.Kind == OpRead && d.res.Err == nil && !rec.Free() && rec.Holder == m.cfg.Me:
			m.take(out, now, m.takeSent, rec.Revision, m.takeUpdate)
		case d.op.Kind != OpRead && d.res.Err == nil:
			kind := EventAcquired
			if d.op.Kind == OpUpdate {
				kind = EventTookOver
			}
			out.Events = append(out.Events, Event{Kind: kind, Holder: m.seen.Holder, Revision: d.res.Rev})
			m.take(out, now, d.sent, d.res.Rev, d.op.Kind == OpUpdate)
		default:
			out.Events = append(out.Events, Event{Kind: EventReleaseSkipped})
			m.to(out, released)
		}

	case d.op.Kind == OpPublish:
		m.published(out, d)
		m.releaseDelete(out, now, stay)

	case d.op.Kind == OpRead: // a renewal's, sent before the release
		switch {
		case d.res.Err != nil:
			m.renewFailed(out, now, d.res.Err)
			m.releaseDelete(out, now, stay)
		case rec.Free():
			out.Events = append(out.Events, Event{Kind: EventReleaseSkipped})
			m.to(out, released)
		case rec.Holder == m.cfg.Me:
			m.rev = rec.Revision
			m.releaseDelete(out, now, stay)
		default:
			m.lose(out, rec)
		}

	default: // a renewal's update or create, sent before the release
		switch {
		case d.res.Err == nil:
			if d.op.Kind == OpCreate {
				m.unpublished = true
				m.retaken(d.sent)
			}
			m.rev = d.res.Rev
			if d.sent.After(m.lastOK) {
				m.lastOK = d.sent
			}
			out.Events = append(out.Events, Event{Kind: EventRenewed, Revision: d.res.Rev})
			next := stay
			if m.sub == fencedReleasing && now.Before(m.fenceAt()) && m.due != epochToSettle {
				next = releasing
				out.Events = append(out.Events, Event{Kind: EventRestored, Revision: d.res.Rev})
			}
			m.releaseDelete(out, now, next)
		case d.conflict && d.op.Kind == OpUpdate:
			m.issueAt(out, now, d.sent, stay, m.renewalOp(OpRead, 0))
		case d.conflict:
			m.lose(out, Record{})
		default:
			m.renewFailed(out, now, d.res.Err)
			m.releaseDelete(out, now, stay)
		}
	}
}
