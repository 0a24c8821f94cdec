package lease

import (
	"errors"
	"fmt"
	"time"
)

// The claim's sub-states by what they watch: none yet, a holder of our rollout (or of
// none) watched for silence, or another rollout's holder watched while standing by.
type claimMode uint8

const (
	modeFresh claimMode = iota + 1
	modeWatching
	modeStandby
)

func (s SubState) mode() claimMode {
	switch s {
	case claimReading, claimRetryWait, creating, publishing:
		return modeFresh
	case claimWatching, watchReading, watchRetryWait, watchCreating, takingOver:
		return modeWatching
	case standingBy, standbyReading, standbyRetryWait, standbyCreating, standbyTakingOver, standbyPublishing:
		return modeStandby
	}
	return 0
}

// The sub-state each mode waits in for a call of a kind, or for a retry.
var (
	readingIn    = map[claimMode]SubState{modeFresh: claimReading, modeWatching: watchReading, modeStandby: standbyReading}
	creatingIn   = map[claimMode]SubState{modeFresh: creating, modeWatching: watchCreating, modeStandby: standbyCreating}
	retryIn      = map[claimMode]SubState{modeFresh: claimRetryWait, modeWatching: watchRetryWait, modeStandby: standbyRetryWait}
	takingOverIn = map[claimMode]SubState{modeFresh: takingOver, modeWatching: takingOver, modeStandby: standbyTakingOver}
	watchingIn   = map[claimMode]SubState{modeWatching: claimWatching, modeStandby: standingBy}
)

func isConflict(err error) bool { return errors.Is(err, ErrConflict) }

func (m *Machine) claimOp(kind OpKind) Op {
	op := Op{Kind: kind, Purpose: PurposeClaim}
	if kind != OpRead {
		op.Holder = m.cfg.Me
	}
	return op
}

// claimDone acts on the outcome of a claim call (or of the publish that follows it).
func (m *Machine) claimDone(out *Output, now time.Time, d done) {
	mode := m.sub.mode()
	switch d.op.Kind {
	case OpRead:
		if d.res.Err != nil {
			out.Events = append(out.Events, Event{Kind: EventStoreError, Err: fmt.Errorf("%s: %w", d.op, d.res.Err)})
			m.retryAt = now.Add(m.cfg.RenewEvery())
			m.to(out, retryIn[mode])
			return
		}
		rec := d.res.Record
		if t, ok := rec.Holder.Handoff(); ok && t.Names(m.cfg.Me) && !rec.Free() {
			m.see(now, rec)
			m.takeHandoff(out, now, rec)
			return
		}
		if mode != modeFresh && !rec.Free() && rec.Revision == m.seen.Revision {
			// Still the revision we watch: silent since we first saw it. A holder that
			// published a longer period is judged by it: wait on.
			m.learnLease(rec)
			if !now.Before(m.takeoverAt()) {
				op := m.claimOp(OpUpdate)
				op.Revision = m.seen.Revision
				m.issue(out, now, takingOverIn[mode], op)
				return
			}
			m.to(out, watchingIn[mode])
			return
		}
		m.decide(out, now, rec)

	case OpCreate, OpUpdate:
		switch {
		case d.res.Err == nil:
			kind := EventAcquired
			if d.op.Kind == OpUpdate {
				kind = EventTookOver
			}
			if m.handoffTake {
				kind = EventAcquired
			}
			out.Events = append(out.Events, Event{Kind: kind, Holder: m.seen.Holder, Revision: d.res.Rev})
			m.take(out, now, d.sent, d.res.Rev, d.op.Kind == OpUpdate && !m.handoffTake)
		case d.conflict:
			m.issue(out, now, readingIn[mode], m.claimOp(OpRead))
		default:
			// Unknown: the write may have landed. A read tells; if we are the holder
			// we adopt the revision read.
			out.Events = append(out.Events, Event{Kind: EventStoreError, Err: fmt.Errorf("%s: %w", d.op, d.res.Err)})
			m.issue(out, now, readingIn[mode], m.claimOp(OpRead))
		}
	}
}

// decide acts on a record read while claiming or standing by.
func (m *Machine) decide(out *Output, now time.Time, rec Record) {
	mode := m.sub.mode()
	switch {
	case rec.Free():
		m.issue(out, now, creatingIn[mode], m.claimOp(OpCreate))
	case rec.Holder == m.cfg.Me:
		// A create or takeover whose reply was lost did land: it holds since it was sent.
		out.Events = append(out.Events, Event{Kind: EventAcquired, Revision: rec.Revision})
		m.take(out, now, m.takeSent, rec.Revision, m.takeUpdate)
	case mode == modeFresh:
		m.watchNew(out, now, rec)
	default:
		m.consider(out, now, rec)
	}
}

// watchNew starts watching a holder found afresh: stand by for another rollout's,
// watch one of our rollout (or of none) for one lease period (its own, if longer).
func (m *Machine) watchNew(out *Output, now time.Time, rec Record) {
	m.see(now, rec)
	if t, ok := rec.Holder.Handoff(); ok && t.Names(m.cfg.Me) {
		m.takeHandoff(out, now, rec)
		return
	}
	if m.cfg.mayStandBy(rec.Holder) {
		m.standbyUntil = now.Add(m.cfg.StandbyTimeout)
		if m.cfg.hotFor(rec.Holder) {
			m.standbyUntil = time.Time{}
		}
		out.Events = append(out.Events, Event{Kind: EventStandingBy, Holder: rec.Holder, Revision: rec.Revision})
		m.to(out, standingBy)
		return
	}
	m.to(out, claimWatching)
}

// takeHandoff takes a lease released to us (rec, the released-to form) at once, by a
// compare-and-swap at its revision: no silence to wait for. The take is not a takeover
// of a silent holder: the releasing holder marked its epoch draining before it wrote
// the form, as before a delete, so the epoch is settled as after a clean release.
func (m *Machine) takeHandoff(out *Output, now time.Time, rec Record) {
	op := m.claimOp(OpUpdate)
	op.Revision = rec.Revision
	out.Events = append(out.Events, Event{Kind: EventHandedOver, Holder: rec.Holder, Revision: rec.Revision})
	m.issue(out, now, takingOverIn[m.sub.mode()], op)
	m.handoffTake, m.takeUpdate = true, false
}

// consider acts on a record while watching a holder (claim wait or standby), from the
// watch or a read.
func (m *Machine) consider(out *Output, now time.Time, rec Record) {
	mode := m.sub.mode()
	_, handoff := rec.Holder.Handoff()
	switch {
	case rec.Free():
		m.issue(out, now, creatingIn[mode], m.claimOp(OpCreate))
	case rec.Revision == m.seen.Revision:
		// Nothing new; the silence goes on.
	case rec.Holder == m.cfg.Me:
		m.decide(out, now, rec)
	case handoff:
		// Released to us: take it now. Released to another: the holder is silent from
		// this revision on, and we take it over only after a lease of that silence.
		m.see(now, rec)
		if t, _ := rec.Holder.Handoff(); t.Names(m.cfg.Me) {
			m.takeHandoff(out, now, rec)
			return
		}
		m.to(out, watchingIn[mode])
	case mode == modeStandby && rec.Holder.RolloutID == m.cfg.Me.RolloutID && m.cfg.Hot:
		// A hot standby waits for an engine of its own rollout too.
		m.see(now, rec)
		m.to(out, standingBy)
	case mode == modeStandby && rec.Holder.RolloutID == m.cfg.Me.RolloutID:
		// An engine of our own rollout got there first.
		m.fail(out, Event{Kind: EventRefused, Holder: rec.Holder, Revision: rec.Revision}, &AlreadyServingError{Holder: rec.Holder})
	case mode == modeStandby:
		m.see(now, rec)
		m.to(out, standingBy)
	case rec.Holder == m.seen.Holder:
		// The holder renewed: it is alive.
		m.fail(out, Event{Kind: EventRefused, Holder: rec.Holder, Revision: rec.Revision}, &AlreadyServingError{Holder: rec.Holder})
	default:
		// Another holder replaced the one we watched: decide afresh.
		m.watchNew(out, now, rec)
	}
}

// see starts timing rec's silence from now. A watch record carries no period: the one
// known for the same engine is kept, as an engine's period never changes.
func (m *Machine) see(now time.Time, rec Record) {
	if !rec.Holder.Known() || rec.Holder.InstanceID != m.seen.Holder.InstanceID {
		m.seenLease = 0
	}
	m.seen, m.seenAt = rec, now
	m.learnLease(rec)
}

// learnLease keeps the period the holder we watch published, when rec (a read) has it.
func (m *Machine) learnLease(rec Record) {
	if l := rec.HolderLease(); l != 0 && rec.Holder.InstanceID == m.seen.Holder.InstanceID {
		m.seenLease = l
	}
}

// take makes the lease ours at rev, written by a call sent at sent (a takeover of a
// silent holder if tookOver): liveness counts from then, not from when we learnt of it.
// We publish our lease period before we serve, so a contender with a shorter one never
// judges us by it; whatever the publish's outcome, we then settle the epoch and serve.
// While releasing we only hold it to delete it.
func (m *Machine) take(out *Output, now, sent time.Time, rev uint64, tookOver bool) {
	m.rev = rev
	m.lastOK = sent
	m.retaken(sent)
	m.tookOver = tookOver
	m.nextRenew = sent.Add(m.cfg.RenewEvery())
	m.retryAt = time.Time{}
	next := publishing
	if m.sub.mode() == modeStandby {
		next = standbyPublishing
	}
	m.seen, m.seenLease = Record{}, 0
	if m.sub == releasingClaim {
		m.deleteOp(out, now, releasingClaim)
		return
	}
	m.issue(out, now, next, m.publishOp())
}

func (m *Machine) publishOp() Op {
	return Op{Kind: OpPublish, Purpose: PurposeRenewal, Period: Period{InstanceID: m.cfg.Me.InstanceID, Lease: m.cfg.Lease}}
}

// published records a publish's outcome. On failure contenders judge us by their own
// period meanwhile; we try again after the next renewal.
func (m *Machine) published(out *Output, d done) {
	m.unpublished = d.res.Err != nil
	if d.res.Err != nil {
		out.Events = append(out.Events, Event{Kind: EventStoreError, Err: fmt.Errorf("%s: %w", d.op, d.res.Err)})
	}
}
