package lease

import "time"

// The sub-states of a held lease, by whether it serves.
var (
	renewingIn      = map[bool]SubState{true: renewing, false: fencedRenewing}
	renewReadingIn  = map[bool]SubState{true: renewReading, false: fencedReading}
	renewCreatingIn = map[bool]SubState{true: renewCreating, false: fencedCreating}
	restingIn       = map[bool]SubState{true: holding, false: fenced}
)

func (m *Machine) renewalOp(kind OpKind, rev uint64) Op {
	op := Op{Kind: kind, Purpose: PurposeRenewal, Revision: rev}
	if kind != OpRead {
		op.Holder = m.cfg.Me
	}
	return op
}

// holdDone acts on the outcome of a call that keeps the lease (serving or fenced).
func (m *Machine) holdDone(out *Output, now time.Time, d done) {
	serving := m.State() == StateServing
	switch d.op.Kind {
	case OpUpdate, OpCreate:
		switch {
		case d.res.Err == nil:
			if d.op.Kind == OpCreate {
				m.unpublished = true // the lease is ours again: say our period again
				m.retaken(d.sent)
			}
			m.renewed(out, now, d.sent, d.res.Rev, d.op.Kind == OpCreate)
		case d.conflict && d.op.Kind == OpUpdate:
			m.issueAt(out, now, d.sent, renewReadingIn[serving], m.renewalOp(OpRead, 0))
		case d.conflict:
			// Our lease was deleted and someone created it before us.
			m.lose(out, Record{})
		default:
			m.renewFailed(out, now, d.res.Err)
			m.to(out, restingIn[serving])
		}
	case OpRead:
		switch rec := d.res.Record; {
		case d.res.Err != nil:
			m.renewFailed(out, now, d.res.Err)
			m.to(out, restingIn[serving])
		case rec.Free():
			// Deleted from outside: take it again. The send time stays the renewal's.
			m.issueAt(out, now, d.sent, renewCreatingIn[serving], m.renewalOp(OpCreate, 0))
		case rec.Holder == m.cfg.Me:
			// An earlier renewal landed but its reply was lost: renew at the revision read.
			m.issueAt(out, now, d.sent, renewingIn[serving], m.renewalOp(OpUpdate, rec.Revision))
		default:
			m.lose(out, rec)
		}
	case OpPublish:
		m.published(out, d)
		m.to(out, restingIn[serving])
	}
}

// renewed records a successful renewal (or create) at rev, sent at sent, and moves to
// where it leads: a lease taken again (created) settles its epoch first, serving or
// not, and so does a restore while the epoch is still to settle; then serving again
// after a fence if it was sent in time, publishing our period if it is due and fits
// before the next renewal.
func (m *Machine) renewed(out *Output, now, sent time.Time, rev uint64, created bool) {
	m.rev = rev
	if sent.After(m.lastOK) {
		m.lastOK = sent
	}
	out.Events = append(out.Events, Event{Kind: EventRenewed, Revision: rev})
	serving := m.State() == StateServing
	inTime := now.Before(m.fenceAt())
	if m.due == epochToSettle && (serving && created || !serving && inTime) {
		m.settle(out, now, map[bool]SubState{true: advancingEpoch, false: fencedSettlingEpoch}[serving])
		return
	}
	if !serving && inTime {
		// A success that arrives after its own fence deadline proves nothing about now.
		serving = true
		out.Events = append(out.Events, Event{Kind: EventRestored, Revision: rev})
	}
	if serving && m.unpublished && !now.Add(m.cfg.RenewEvery()/4).After(m.nextRenew) {
		m.issue(out, now, republishing, m.publishOp())
		return
	}
	m.to(out, restingIn[serving])
}

// retaken records that the lease was taken (again) by a write sent at sent: its epoch
// must be settled before it serves.
func (m *Machine) retaken(sent time.Time) {
	m.due, m.takenAt, m.tookOver = epochToSettle, sent, false
	m.tampered = nil // a new take judges the stores afresh
}

// renewFailed records a renewal of unknown outcome. The next attempt comes sooner than
// a full period: a reply lost to a blip should not cost the lease/2 fencing margin.
func (m *Machine) renewFailed(out *Output, now time.Time, err error) {
	out.Events = append(out.Events, Event{Kind: EventRenewFailed, Revision: m.rev, Err: err})
	if retry := now.Add(m.cfg.RenewEvery() / 4); retry.Before(m.nextRenew) {
		m.nextRenew = retry
	}
}

// own acts on a record the watch delivered while we hold the lease. Our own writes are
// not news (a renewal whose reply is still on its way), nor is anything older than our
// revision (a late delivery, a watch restarted). Anything else (a delete, a purge, a
// value naming another engine or none) is an eviction: we stop serving at once, before
// a renewal could notice, and a read decides what follows. An eviction is reported
// once per read it calls for.
func (m *Machine) own(out *Output, now time.Time, rec Record) {
	switch {
	case !rec.Free() && (rec.Holder == m.cfg.Me || rec.Revision <= m.rev):
		return
	case rec.Free() && rec.Freed != 0 && rec.Freed <= m.rev:
		return
	case m.sub == evicted:
		return // the read it calls for is already due
	}
	if m.sub != evictedReading {
		out.Events = append(out.Events, Event{Kind: EventEvicted, Holder: rec.Holder, Revision: max(rec.Revision, rec.Freed)})
	}
	if m.inflight != nil {
		m.to(out, evicted)
		return
	}
	// What the watch showed may already be out of date: read, and go on by the rules of
	// a renewal conflict (free: create it again; ours: renew; another's: lost).
	m.issue(out, now, evictedReading, m.renewalOp(OpRead, 0))
}

// evictedDone acts on the outcome of a call sent before an eviction: whatever it
// says, a read sent after the eviction decides, except that a success still counts
// (it was sent in time, or not) and another holder is lost at once.
func (m *Machine) evictedDone(out *Output, now time.Time, d done) {
	var read bool
	switch d.op.Kind {
	case OpUpdate, OpCreate:
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
			read = true
		case d.conflict && d.op.Kind == OpCreate:
			m.lose(out, Record{})
		case d.conflict:
			m.issueAt(out, now, d.sent, evictedReading, m.renewalOp(OpRead, 0))
		default:
			m.renewFailed(out, now, d.res.Err)
			read = true
		}
	case OpRead:
		switch rec := d.res.Record; {
		case d.res.Err != nil:
			m.renewFailed(out, now, d.res.Err)
			read = true
		case rec.Free():
			m.issueAt(out, now, d.sent, evicted, m.renewalOp(OpCreate, 0))
		case rec.Holder == m.cfg.Me:
			m.issueAt(out, now, d.sent, evicted, m.renewalOp(OpUpdate, rec.Revision))
		default:
			m.lose(out, rec)
		}
	case OpPublish:
		m.published(out, d)
		read = true
	case OpReadEpoch, OpWriteEpoch:
		// A settle's, sent before the eviction: the epoch it may have written is found
		// again by the next settle (tried).
		read = true
	}
	if read {
		m.issue(out, now, evictedReading, m.renewalOp(OpRead, 0))
	}
}
