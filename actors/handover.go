package actors

import (
	"context"
	"slices"
	"time"

	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/lease"
)

// The root actor's handover cascade (docs/architecture.md, cascade 1): its phases, in
// the order handover begins them, and the replies each waits for.

// handover runs the handover cascade (docs/architecture.md, cascade 1). msg is what
// arrived: the Handover that starts it, a reply, or a phase's deadline. Each phase
// sends its message (begin) and waits for its replies, bounded by its deadline; once
// the wait is over, the next phase begins:
//
//	jobs      StopAccepting{drain deadline} → jobs host       waits for its Drained
//	          (the host cancels the runs at the deadline)     past the deadline while a
//	                                                          run has not returned: the
//	                                                          lease is kept (holdForJobs)
//	release   Release → ownership                             waits for Released
//	                                                          (two renewal periods)
//	successor the wait for the new holder, on a goroutine:    waits for successorDone
//	          the lease names it, its services answer at      (lease/4 after the release,
//	          the broker; we go on serving meanwhile          at most half the drain)
//	drain     StopAccepting{drain deadline} → every member    waits for Drained from each
//	sessions  the second wait for sessions, on a goroutine    waits for sessionsDone
//	                                                          (the drain deadline)
//	stop      Stop → every member and the jobs host           waits for Down from each
//	                                                          (stopBound)
//	drained   MarkDrained → ownership (the epoch record       waits for DrainMarked
//	          says drained: a successor bumps at once)        (two renewal periods)
//	done      Ended closes; Err is nil.
func (a *rootActor) handover(c *actor.Context, msg any) {
	st := a.st
	switch m := msg.(type) {
	case Handover:
		if st.phase != PhaseRelaying {
			return // one cascade; Handover again waits for it
		}
		a.stopRetries()
		a.rollCall(c)
	case rollCallDone:
		if !a.rollCalled(m) {
			return
		}
	case Drained:
		if (st.phase != PhaseJobs && st.phase != PhaseDrain) || !a.answered(m.From) {
			return
		}
	case Released:
		if st.phase != PhaseRelease {
			return
		}
	case successorDone:
		if st.phase != PhaseSuccessor {
			return
		}
		a.successorFound(m)
	case sessionsDone:
		if st.phase != PhaseSessions {
			return
		}
		if m.err != nil {
			a.r.log.Warn("sessions still open at the drain deadline", zap.Error(m.err))
		}
	case Down:
		if st.phase != PhaseStop || !a.answered(m.From) {
			return
		}
	case DrainMarked:
		if st.phase != PhaseDrained {
			return
		}
	case phaseDeadline:
		if st.phase != m.phase {
			return
		}
		if m.phase == PhaseSuccessor {
			a.noSuccessor(lease.Holder{}) // an engine without a standby ends this way
			break
		}
		if m.phase == PhaseJobs && a.holdForJobs(c) {
			return
		}
		a.r.log.Warn("handover phase deadline passed", zap.Stringer("phase", m.phase), zap.Int("unanswered", len(st.waiting)))
	default:
		return
	}
	for p := a.next(st.phase); !a.begin(c, p); p = a.next(p) {
	}
}

// begin enters phase p and sends its message. It reports whether the phase waits;
// one with nothing to wait for is over at once, and the next one begins.
func (a *rootActor) begin(c *actor.Context, p Phase) (waits bool) {
	r, st := a.r, a.st
	switch p {
	case PhaseJobs:
		if r.cfg.Jobs == nil {
			return false
		}
		st.drainBy = time.Now().Add(r.cfg.Drain)
		a.enter(c, p, st.drainBy, r.cfg.Jobs)
		return a.stopJobs(c, StopAccepting{Deadline: st.drainBy})
	case PhaseRelease:
		a.enter(c, p, time.Now().Add(2*r.cfg.Ownership.Config().RenewEvery()))
		if r.cfg.Ownership.Status().State.Terminal() {
			return false // nothing to release: lost, or released already
		}
		c.Send(r.cfg.Ownership.PID(), Release{})
		return true
	case PhaseSuccessor:
		if r.cfg.Successor == nil {
			return false
		}
		return a.beginSuccessor(c)
	case PhaseDrain:
		// drain_seconds count from the release, however long we waited for the
		// successor: the epoch's deferral relies on our drain ending first (Epoch, (b)).
		from := st.released
		if from.IsZero() {
			from = time.Now()
		}
		st.drainBy = from.Add(r.cfg.Drain)
		a.enter(c, p, st.drainBy, r.cfg.Members...)
		if len(r.cfg.Members) == 0 || r.cfg.Drain <= 0 {
			return false
		}
		a.stopAccepting(c, StopAccepting{Deadline: st.drainBy})
		return true
	case PhaseSessions:
		a.enter(c, p, st.drainBy)
		if r.cfg.Sessions == nil || !time.Now().Before(st.drainBy) {
			return false
		}
		a.waitSessions(c)
		return true
	case PhaseStop:
		pids := a.members(true)
		a.enter(c, p, time.Now().Add(stopBound), pids...)
		if len(pids) == 0 {
			return false
		}
		a.fanOut(c, Stop{}, true)
		return true
	case PhaseDrained:
		// After the drain and sessions phases and the stop: nothing of ours runs any
		// more, so the successor may fence our epoch now instead of at its drain_seconds.
		a.enter(c, p, time.Now().Add(2*r.cfg.Ownership.Config().RenewEvery()))
		c.Send(r.cfg.Ownership.PID(), MarkDrained{})
		return true
	default:
		a.enter(c, PhaseDone, time.Time{})
		a.end(nil)
		return true
	}
}

// enter makes p the current phase, waiting for an answer from each of pids, bounded by
// deadline; it reports the duration of the phase it leaves.
func (a *rootActor) enter(c *actor.Context, p Phase, deadline time.Time, pids ...*actor.PID) {
	r, st := a.r, a.st
	now := time.Now()
	if st.phase > PhaseRelaying && r.cfg.OnPhase != nil {
		r.cfg.OnPhase(st.phase, now.Sub(st.phaseStart))
	}
	st.phase, st.phaseStart, st.deadline = p, now, deadline
	st.waiting = map[string]bool{}
	for _, pid := range pids {
		st.waiting[pid.String()] = true
	}
	r.log.Info("handover", zap.Stringer("phase", p), zap.Int("waiting_for", len(pids)),
		zap.Uint64("revision", st.revision), zap.Uint64("epoch", st.epoch))
	a.armPhase(c)
}

// answered counts a member's answer for the current phase; it reports whether the
// phase has every answer it waits for.
func (a *rootActor) answered(from *actor.PID) bool {
	st := a.st
	if from == nil || !st.waiting[from.String()] {
		return false
	}
	delete(st.waiting, from.String())
	return len(st.waiting) == 0
}

// waitSessions starts the second wait for sessions, bounded by the drain deadline.
func (a *rootActor) waitSessions(c *actor.Context) {
	wait := a.r.cfg.Sessions
	a.goWait(c, a.st.drainBy, func(ctx context.Context) any { return sessionsDone{err: wait(ctx)} })
}

// goWait runs wait on a goroutine of the root's, bounded by deadline, and sends the
// root what it returns. Stopped cancels it and Close waits for it.
func (a *rootActor) goWait(c *actor.Context, deadline time.Time, wait func(ctx context.Context) any) {
	st := a.st
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	done := make(chan struct{})
	// The waits of the cascade so far, less those that have returned.
	st.waits = slices.DeleteFunc(st.waits, func(w bgWait) bool {
		select {
		case <-w.done:
			return true
		default:
			return false
		}
	})
	st.waits = append(st.waits, bgWait{cancel: cancel, done: done})
	e, self := c.Engine(), c.PID()
	go func() {
		defer close(done)
		defer cancel()
		e.Send(self, wait(ctx))
	}()
}

// holdForJobs is the jobs phase at its deadline (the drain deadline): the jobs host has
// cancelled the runs still going, and the phase waits on, holding and renewing the
// lease, until they return. A run that ignores its context must not go on while the
// next holder starts the same job, and only the lease keeps the next holder from
// starting it. It reports whether the phase waits; it does not once the lease is no
// longer ours to keep (lost, or released already), nor when the fail point
// release-before-jobs put the release first. The deadline is armed again a lease period
// later, so the log says, once a lease period, that the handover still waits.
func (a *rootActor) holdForJobs(c *actor.Context) (waits bool) {
	r, st := a.r, a.st
	if len(st.waiting) == 0 || a.next(PhaseRelaying) != PhaseJobs {
		return false
	}
	switch r.cfg.Ownership.Status().State {
	case lease.StateServing, lease.StateFenced:
	default:
		return false
	}
	period := r.cfg.Ownership.Config().Lease
	r.log.Warn("handover: a job's run has not returned since it was cancelled at the drain deadline; the engine keeps the lease until it returns, so no other engine starts the job meanwhile",
		zap.Duration("waited", time.Since(st.phaseStart)), zap.Duration("next_report_in", period))
	st.deadline = time.Now().Add(period)
	a.armPhase(c)
	return true
}
