package lease

import (
	"fmt"
	"time"
)

// This file is the machine's part of the epoch (docs/design.md §4.7, docs/architecture.md
// "Epoch"): settling it after every write that takes the lease, before serving; the
// deferred bump; and the release's marks, draining and drained.

// epochDue is what the epoch still needs while the lease is ours. Like unpublished, it
// is a fact about the store, not a place in the table.
type epochDue uint8

const (
	epochSettled    epochDue = iota // the epoch we serve under is in the record
	epochToSettle                   // the lease was taken (again): read the record, then bump or defer
	epochDeferred                   // we serve under the epoch of an engine that drains; bump later
	epochBelowStore                 // a data store holds a newer epoch than ours: bump past it
)

// maxEpochWrites bounds the compare-and-swaps of one settle (each conflict reads again),
// so that a settle (each call cut off after lease/16) never holds a renewal up for long:
// only a release's marks write the record besides the holder; maxMarks bounds those of
// one mark.
const (
	maxEpochWrites = 2
	maxMarks       = 2
)

// The sub-state that settles the epoch, by the public state it is part of.
var settlingIn = map[SubState]SubState{
	publishing:        settlingEpoch,
	standbyPublishing: standbySettlingEpoch,
}

// epochAction is what a settle does with the record it read.
type epochAction uint8

const (
	epochBump  epochAction = iota + 1 // take the next epoch at once
	epochDefer                        // serve under the record's epoch; bump later
	epochAdopt                        // the record is a write of ours whose reply was lost
)

// decideEpoch is the rule of docs/architecture.md "Epoch", for the record read after a
// take (or while a bump is deferred), and the epoch a bump writes: the next after the
// record's, ours and any a data store was found holding (StoreAhead), so that it never
// goes back, even over a record recreated empty.
func (m *Machine) decideEpoch(now time.Time, rec EpochRecord) (epochAction, uint64) {
	me := m.cfg.Me.InstanceID
	next := max(rec.Epoch, m.epoch, m.floor) + 1
	switch {
	case m.tried != 0 && rec.InstanceID == me && rec.Epoch == m.tried && rec.State == EpochServing:
		return epochAdopt, rec.Epoch
	case m.due == epochToSettle && m.tookOver:
		// Taken from a silent holder: it may be paused mid-write. Fence it now.
		return epochBump, next
	case rec.None(), rec.InstanceID == me:
		// No record (N = 1), or our own from before: a lease lost and taken again.
		return epochBump, next
	case m.due == epochBelowStore, m.floor > rec.Epoch:
		// A store is ahead of the record: the record was lost. Deferring to it would
		// serve under an epoch the store refuses.
		return epochBump, next
	case rec.State == EpochDraining && rec.Epoch >= m.epoch && now.Before(m.takenAt.Add(m.cfg.Drain)):
		// A clean release whose drain is under way: its calls must still commit.
		return epochDefer, rec.Epoch
	}
	// Another engine serving (it did not release: crashed, evicted, the lease deleted
	// from outside), drained, or draining for longer than our drain_seconds.
	return epochBump, next
}

func (m *Machine) epochReadOp() Op { return Op{Kind: OpReadEpoch, Purpose: PurposeRenewal} }

// settle starts settling the epoch in next: a read first, always, as the record may
// have moved since we last saw it.
func (m *Machine) settle(out *Output, now time.Time, next SubState) {
	m.epochWrites = 0
	m.issue(out, now, next, m.epochReadOp())
}

// epochDone acts on the outcome of a settle's call (settling, advancing).
func (m *Machine) epochDone(out *Output, now time.Time, d done) {
	switch {
	case d.op.Kind == OpReadEpoch && d.res.Err != nil:
		m.epochFailed(out, now, fmt.Errorf("%s: %w", d.op, d.res.Err))
	case d.op.Kind == OpReadEpoch:
		rec := d.res.Epoch
		m.recordFound = rec.Epoch > 0
		switch act, epoch := m.decideEpoch(now, rec); act {
		case epochAdopt:
			m.bumped(out, rec)
			m.settled(out, now)
		case epochDefer:
			m.deferTo(out, rec)
			m.settled(out, now)
		default:
			if !now.Before(m.fenceAt()) {
				// A bump is written only while the lease is surely ours: past the fence a
				// successor may hold it, and a bump of ours would pass its epoch.
				m.epochFailed(out, now, fmt.Errorf("%s: not bumped: the fence passed (no renewal for %s)",
					d.op, m.cfg.FenceAfter()))
				return
			}
			m.epochRec = rec
			m.epochWrites++
			m.tried = epoch
			m.issue(out, now, m.sub, Op{Kind: OpWriteEpoch, Purpose: PurposeRenewal, Revision: rec.Revision,
				Epoch: EpochRecord{Epoch: epoch, InstanceID: m.cfg.Me.InstanceID, State: EpochServing}})
		}
	case d.res.Err == nil:
		rec := d.op.Epoch
		rec.Revision = d.res.Rev
		m.bumped(out, rec)
		m.settled(out, now)
	case d.conflict && m.epochWrites < maxEpochWrites:
		m.tried = 0 // surely not written
		m.issue(out, now, m.sub, m.epochReadOp())
	default:
		if d.conflict {
			m.tried = 0
		}
		m.epochFailed(out, now, fmt.Errorf("%s: %w", d.op, d.res.Err))
	}
}

// settled moves to serving with the epoch settled (or deferred). From a fenced settle
// that is a restore, if it is still in time; if not, the fence check that follows
// every step fences it again.
func (m *Machine) settled(out *Output, now time.Time) {
	if m.State() == StateFenced && now.Before(m.fenceAt()) {
		out.Events = append(out.Events, Event{Kind: EventRestored, Revision: m.rev})
	}
	m.to(out, holding)
}

// bumped records rec, a write of ours, as the epoch we serve under.
func (m *Machine) bumped(out *Output, rec EpochRecord) {
	prev := m.epochRec
	out.Events = append(out.Events, Event{Kind: EventEpochBumped, Epoch: rec.Epoch, PrevEpoch: prev.Epoch,
		Holder: Holder{InstanceID: prev.InstanceID}, Deferred: m.due == epochDeferred, Revision: rec.Revision})
	m.epoch, m.epochRec, m.due = rec.Epoch, rec, epochSettled
	m.tried, m.tookOver, m.bumpAt = 0, false, time.Time{}
}

// deferTo serves under rec's epoch, which another engine drains, until the record
// turns drained (the epoch watch) or our own drain_seconds since we took the lease.
func (m *Machine) deferTo(out *Output, rec EpochRecord) {
	if m.due != epochDeferred {
		out.Events = append(out.Events, Event{Kind: EventEpochDeferred, Epoch: rec.Epoch,
			Holder: Holder{InstanceID: rec.InstanceID}, Revision: rec.Revision})
	}
	m.epoch, m.epochRec, m.due = rec.Epoch, rec, epochDeferred
	m.tookOver, m.bumpAt = false, m.takenAt.Add(m.cfg.Drain)
}

// epochFailed ends a settle that could not finish. Serving, we go on under the epoch we
// have and try again shortly; otherwise we serve nothing (fenced, the lease kept) until
// a renewal lets us try again: an engine must not serve under an epoch it does not know.
func (m *Machine) epochFailed(out *Output, now time.Time, err error) {
	out.Events = append(out.Events, Event{Kind: EventEpochFailed, Epoch: m.epoch, Err: err})
	if m.sub == advancingEpoch {
		m.bumpAt = now.Add(m.cfg.RenewEvery() / 4)
		m.to(out, holding)
		return
	}
	m.to(out, fenced)
}

// ObserveEpoch reports an epoch record the epoch watch delivered. While a bump is
// deferred, a record that is no longer the draining engine's (drained, or anything
// else) makes the bump due at once; it reads the record first.
func (m *Machine) ObserveEpoch(now time.Time, rec EpochRecord) Output {
	return m.step(InputObserve, now, func(*Output) {
		if !m.WatchingEpoch() || rec.Revision <= m.epochRec.Revision {
			return // a record delivered before the watch stopped, or old news
		}
		if rec.State == EpochDraining && rec.Epoch == m.epoch && rec.InstanceID != m.cfg.Me.InstanceID {
			return // still draining
		}
		if now.Before(m.bumpAt) {
			m.bumpAt = now
		}
	})
}

// StoreAhead reports that a data store holds epoch n and so refuses to serve under
// ours. Every epoch a store adopts was written to the record first by a holder, and
// the record never goes back but by its loss (ABI_ENGINE deleted or recreated), so
// while the lease is ours this means the record was lost: the next bump goes past n,
// at once while holding, or at the settle of the next take. (Only monotony matters
// to the epoch, so a floor too high costs nothing but a number.) An n not above the
// epoch we hold is old news: an answer to an earlier Serve.
func (m *Machine) StoreAhead(now time.Time, n uint64) Output {
	return m.step(InputStoreAhead, now, func(out *Output) {
		// n equal to ours: we took our epoch as new and a store holds it already,
		// adopted by another engine (epoch.Taken); below ours, or known: old news.
		if n < m.epoch || n <= m.floor {
			return
		}
		out.Events = append(out.Events, Event{Kind: EventStoreAhead, Epoch: n, PrevEpoch: m.epoch, Intact: m.recordFound})
		if m.recordFound {
			m.tampered = &StoreAheadError{Store: n, Record: m.epoch}
		}
		m.floor = n
		if m.sub == holding && m.due != epochToSettle {
			m.due, m.bumpAt = epochBelowStore, now
		}
	})
}

// StoreAheadError is a data store found at an epoch not below the lease's epoch record
// while the record was intact: every epoch a store adopts was the record's first, so
// something other than an engine wrote the store's. The engine repairs it (it goes past
// the store's epoch, and the advance supersedes every epoch below it), and reports it
// (Tampered) for as long as it holds the lease, so an operator looks for the writer.
type StoreAheadError struct{ Store, Record uint64 }

func (e *StoreAheadError) Error() string {
	return fmt.Sprintf("a data store held epoch %d, not below the lease's intact epoch record (%d): something other "+
		"than an engine wrote it; the engine went past it and superseded every epoch below it (find who wrote it; "+
		"this clears when the engine hands over or restarts)", e.Store, e.Record)
}

// Tampered is a *StoreAheadError while the lease is ours and a data store was found
// ahead of its intact epoch record (StoreAhead); else nil.
func (m *Machine) Tampered() error {
	if m.sub.ended() || m.Revision() == 0 {
		return nil
	}
	return m.tampered
}

// WatchingEpoch reports whether the driver should watch the epoch record and call
// ObserveEpoch: while a bump is deferred and the lease is ours outside a release.
func (m *Machine) WatchingEpoch() bool { return m.due == epochDeferred && m.sub.attrs().renews }

// Epoch is the epoch we hold while the lease is ours (the one we serve under while
// serving), else 0.
func (m *Machine) Epoch() uint64 {
	if m.sub.ended() {
		return 0
	}
	return m.epoch
}

// markDue: a release from serving marks the record draining first, once, when the
// epoch it serves under is known.
func (m *Machine) markDue() bool { return m.epoch != 0 && m.due != epochToSettle && !m.markSent }

func (m *Machine) markOp(state EpochState, rev uint64) Op {
	return Op{Kind: OpWriteEpoch, Purpose: PurposeRelease, Revision: rev,
		Epoch: EpochRecord{Epoch: m.epoch, InstanceID: m.cfg.Me.InstanceID, State: state}}
}

// releaseDelete is the release's delete of the lease, in next; a release from serving
// marks the epoch draining just before it (next is releasing then).
func (m *Machine) releaseDelete(out *Output, now time.Time, next SubState) {
	if next == releasing && m.markDue() {
		m.markSent, m.marks = true, 1
		m.issue(out, now, releasing, m.markOp(EpochDraining, m.epochRec.Revision))
		return
	}
	m.deleteOp(out, now, next)
}

// markDone acts on the outcome of a mark's call (draining while releasing, drained
// after it) in the sub-state it runs in: a conflict reads the record, and the mark is
// written again only while the record is still of our epoch (drained: and ours). Then a
// draining mark goes on with the delete.
func (m *Machine) markDone(out *Output, now time.Time, d done) {
	state := EpochDraining
	if m.sub == markingDrained {
		state = EpochDrained
	}
	next := func() {
		if state == EpochDrained {
			m.to(out, released)
			return
		}
		m.deleteOp(out, now, m.sub)
	}
	switch rec := d.res.Epoch; {
	case d.op.Kind == OpWriteEpoch && d.res.Err == nil:
		m.epochRec = d.op.Epoch
		m.epochRec.Revision = d.res.Rev
		m.marked = state == EpochDraining
		out.Events = append(out.Events, Event{Kind: EventEpochMarked, Epoch: m.epoch, EpochState: state, Revision: d.res.Rev})
		next()
	case d.op.Kind == OpWriteEpoch && d.conflict:
		m.issue(out, now, m.sub, Op{Kind: OpReadEpoch, Purpose: PurposeRelease})
	case d.op.Kind == OpReadEpoch && d.res.Err == nil && m.marks < maxMarks && rec.Epoch == m.epoch &&
		(state == EpochDraining || rec.InstanceID == m.cfg.Me.InstanceID):
		m.marks++
		m.issue(out, now, m.sub, m.markOp(state, rec.Revision))
	default:
		// Moved on (a newer epoch: we no longer own that one), or a failure: leave it.
		err := d.res.Err
		if err == nil && d.op.Kind == OpReadEpoch {
			err = fmt.Errorf("the record is %s", rec)
		}
		m.marked = false
		out.Events = append(out.Events, Event{Kind: EventEpochMarkSkipped, Epoch: m.epoch, EpochState: state, Err: err})
		next()
	}
}

// MarkDrained reports that the handover's drain is over (its drain and sessions
// phases): a release that marked the epoch draining now marks it drained, so a
// successor that deferred its bump takes it at once.
func (m *Machine) MarkDrained(now time.Time) Output {
	return m.step(InputMarkDrained, now, func(out *Output) {
		if m.sub != released || !m.marked {
			return
		}
		m.marked, m.marks = false, 1
		m.issue(out, now, markingDrained, m.markOp(EpochDrained, m.epochRec.Revision))
	})
}

// MarkingDrained reports whether the mark of MarkDrained is in flight.
func (m *Machine) MarkingDrained() bool { return m.sub == markingDrained }
