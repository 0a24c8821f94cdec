package lease

import "time"

// done is the outcome of a call, with the call.
type done struct {
	op       Op
	res      Result
	sent     time.Time
	conflict bool
}

// step handles one input: the handler, then the deadlines, then the Output's watch,
// timers, gate and role, from where the step began and where it ended.
func (m *Machine) step(in Input, now time.Time, handle func(*Output)) Output {
	var out Output
	b := before{from: m.sub, lastOK: m.lastOK, epoch: m.epoch, epochWatch: m.WatchingEpoch()}
	m.in = in
	handle(&out)
	m.in = InputDeadline
	m.evaluate(&out, now)
	m.finish(&out, now, b)
	return out
}

// before is what a step began with.
type before struct {
	from       SubState
	lastOK     time.Time
	epoch      uint64
	epochWatch bool
}

func (m *Machine) finish(out *Output, now time.Time, b before) {
	from, lastOK := b.from, b.lastOK
	was, is := from.attrs(), m.sub.attrs()
	out.Watch = watchMove(was.watch, is.watch)
	out.EpochWatch = watchMove(b.epochWatch, m.WatchingEpoch())
	out.Deadlines = m.Deadlines()
	switch {
	case is.state == StateServing && (was.state != StateServing || !m.lastOK.Equal(lastOK)):
		out.Gate = GateMove{Kind: GateAllow, Until: m.fenceAt()}
	case is.state == StateServing:
	case was.state == StateServing && is.state == StateReleased:
		out.Gate = GateMove{Kind: GateDrain}
	case was.state == StateServing:
		out.Gate = GateMove{Kind: GateClose}
	}
	switch {
	case m.sub == refused && from != refused:
		out.Role = m.roleOf(m.sub, was.state)
	case is.state != was.state:
		out.Role = m.roleOf(m.sub, was.state)
	}
	if is.state == StateServing && was.state == StateServing && m.epoch != b.epoch {
		out.EpochChanged = m.epoch
	}
	if is.state == StateServing && was.state != StateServing && m.due == epochToSettle {
		m.report(out, &TransitionError{From: from, To: m.sub, Input: m.in, Reason: "serving under an epoch not settled"})
	}
	m.check(out, now)
}

func watchMove(was, is bool) WatchMove {
	switch {
	case !was && is:
		return WatchOn
	case was && !is:
		return WatchOff
	}
	return WatchKeep
}

// check reports a broken invariant of the table's.
func (m *Machine) check(out *Output, now time.Time) {
	a := m.sub.attrs()
	switch {
	case m.inflight == nil && a.calls != 0:
		m.report(out, &TransitionError{From: m.sub, To: m.sub, Input: m.in, Reason: "no call in flight"})
	case m.inflight != nil && !a.calls.has(m.inflight.Kind):
		m.report(out, &TransitionError{From: m.sub, To: m.sub, Input: m.in,
			Reason: "a " + m.inflight.Kind.String() + " in flight"})
	case a.state == StateServing && m.fences() && !now.Before(m.fenceAt()):
		m.report(out, &TransitionError{From: m.sub, To: m.sub, Input: m.in, Reason: "serving past the fence"})
	case m.inflight == nil && !out.Deadlines.Next().IsZero() && !out.Deadlines.Next().After(now):
		// The step ended with the deadlines checked at now: one still due is one
		// nothing acts on.
		m.report(out, &TransitionError{From: m.sub, To: m.sub, Input: m.in, Reason: "a deadline past that nothing acts on"})
	}
}

// to moves the machine to next, checking the move against the table.
func (m *Machine) to(out *Output, next SubState) {
	if !transitionTable.Legal(m.sub, m.in, next) {
		m.report(out, &TransitionError{From: m.sub, To: next, Input: m.in})
	}
	out.Moves = append(out.Moves, Move{From: m.sub, To: next, Input: m.in})
	m.sub = next
}

func (m *Machine) report(out *Output, err *TransitionError) {
	m.illegal++
	m.lastIllegal = err
	out.Events = append(out.Events, Event{Kind: EventIllegalTransition, Err: err})
}

// issue sends op now and moves to next, the sub-state that waits for it.
func (m *Machine) issue(out *Output, now time.Time, next SubState, op Op) {
	m.issueAt(out, now, now, next, op)
}

// issueAt issues op recording sent as its send time: a renewal's re-read and the
// write that follows count from when the renewal itself was sent.
func (m *Machine) issueAt(out *Output, now, sent time.Time, next SubState, op Op) {
	if m.inflight != nil {
		m.report(out, &TransitionError{From: m.sub, To: next, Input: m.in, Reason: "a second call in flight"})
	}
	m.nextID++
	op.ID = m.nextID
	op.Timeout = m.cfg.RenewEvery()
	switch op.Kind {
	case OpPublish, OpReadEpoch, OpWriteEpoch:
		// Between taking the lease and serving come a publish, an epoch read and a write:
		// together they must not hold up serving, or the renewal after them, for long.
		op.Timeout /= 4
	}
	m.inflight, m.sentAt = &op, sent
	switch {
	case op.Kind == OpUpdate && op.Purpose == PurposeRenewal && sent.Equal(now):
		m.nextRenew = now.Add(m.cfg.RenewEvery())
	case (op.Kind == OpCreate || op.Kind == OpUpdate) && op.Purpose == PurposeClaim:
		m.takeSent, m.takeUpdate = sent, op.Kind == OpUpdate
		m.handoffTake = false
	}
	out.Op = &op
	m.to(out, next)
}

// evaluate acts on the deadlines that are due (input Deadline).
func (m *Machine) evaluate(out *Output, now time.Time) {
	if twin, ok := fencedTwin[m.sub]; ok && m.fences() && !now.Before(m.fenceAt()) {
		m.to(out, twin)
		out.Events = append(out.Events, Event{Kind: EventFenced, Revision: m.rev})
	}
	if m.inflight != nil {
		return
	}
	switch m.sub {
	case holding, fenced:
		switch {
		case !now.Before(m.nextRenew):
			m.issue(out, now, renewingIn[m.sub == holding], m.renewalOp(OpUpdate, m.rev))
		case m.sub == holding && m.due != epochSettled && !now.Before(m.bumpAt):
			m.settle(out, now, advancingEpoch)
		}
	case claimRetryWait, watchRetryWait, standbyRetryWait:
		if !now.Before(m.retryAt) {
			m.issue(out, now, readingIn[m.sub.mode()], m.claimOp(OpRead))
		} else if m.sub == standbyRetryWait && m.standbyDue(now) {
			m.standbyTimedOut(out)
		}
	case claimWatching, standingBy:
		switch {
		case !now.Before(m.takeoverAt()):
			// Watchers can be blind for a while after a reconnect: re-read before the CAS.
			m.issue(out, now, readingIn[m.sub.mode()], m.claimOp(OpRead))
		case m.sub == standingBy && m.standbyDue(now):
			m.standbyTimedOut(out)
		}
	}
}

// standbyDue reports whether the standby timeout has passed; a hot standby waiting for
// its own rollout has none.
func (m *Machine) standbyDue(now time.Time) bool {
	return !m.standbyUntil.IsZero() && !now.Before(m.standbyUntil)
}

func (m *Machine) standbyTimedOut(out *Output) {
	m.fail(out, Event{Kind: EventStandbyTimedOut, Holder: m.seen.Holder, Revision: m.seen.Revision},
		&StandbyTimeoutError{Holder: m.seen.Holder, Timeout: m.cfg.StandbyTimeout})
}

func (m *Machine) fail(out *Output, ev Event, err error) {
	m.err = err
	m.seen = Record{}
	out.Events = append(out.Events, ev)
	m.to(out, refused)
}

func (m *Machine) lose(out *Output, rec Record) {
	m.lostTo = rec.Holder
	out.Events = append(out.Events, Event{Kind: EventLost, Holder: rec.Holder, Revision: rec.Revision})
	m.to(out, lost)
}
