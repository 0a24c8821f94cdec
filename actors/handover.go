package actors

import (
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/abi-engine/engine/lease"
)

// The handover cascade of HandoverMachine (docs/architecture.md, cascade 1): its
// phases, in the order handover begins them, and the replies each waits for.

// handover runs the handover cascade. msg is what arrived: the Handover that starts it,
// a reply, or a phase's deadline. Each phase sends its message (begin) and waits for its
// replies, bounded by its deadline; once the wait is over, the next phase begins:
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
func (m *HandoverMachine) handover(out *HandoverOutput, now time.Time, msg any) {
	switch msg := msg.(type) {
	case Handover:
		if m.phase != PhaseRelaying {
			return // one cascade; Handover again waits for it
		}
		out.StopRetries = true
		m.rollCall(out, now)
	case rollCallDone:
		if !m.rollCalled(out, msg) {
			return
		}
	case Drained:
		if (m.phase != PhaseJobs && m.phase != PhaseDrain) || !m.answered(msg.From) {
			return
		}
	case Released:
		if m.phase != PhaseRelease {
			return
		}
	case Lost:
		// The ownership ignores a Release once the lease is gone: the release phase
		// waits for a Released that will not come. Lost between the Handover and the
		// release, the phase would have found the lease gone as it began.
		if m.phase != PhaseRelease {
			return
		}
	case successorDone:
		if m.phase != PhaseSuccessor {
			return
		}
		m.successorFound(out, now, msg)
	case sessionsDone:
		if m.phase != PhaseSessions {
			return
		}
		if msg.err != nil {
			out.log(zapcore.WarnLevel, "sessions still open at the drain deadline", zap.Error(msg.err))
		}
	case Down:
		if m.phase != PhaseStop || !m.answered(msg.From) {
			return
		}
	case DrainMarked:
		if m.phase != PhaseDrained {
			return
		}
	case phaseDeadline:
		if m.phase != msg.phase {
			return
		}
		if msg.phase == PhaseSuccessor {
			m.noSuccessor(out, lease.Holder{}) // an engine without a standby ends this way
			break
		}
		if msg.phase == PhaseJobs && m.holdForJobs(out, now) {
			return
		}
		out.log(zapcore.WarnLevel, "handover phase deadline passed", zap.Stringer("phase", msg.phase), zap.Int("unanswered", len(m.waiting)))
	default:
		return
	}
	for p := m.next(m.phase); !m.begin(out, now, p); p = m.next(p) {
		if m.phase == p {
			m.in = InputOver // the phase begun had nothing to wait for
		}
	}
}

// begin enters phase p and sends its message. It reports whether the phase waits;
// one with nothing to wait for is over at once, and the next one begins. A phase with
// nothing to do at all (no jobs host, no successor check) is not entered.
func (m *HandoverMachine) begin(out *HandoverOutput, now time.Time, p Phase) (waits bool) {
	cfg := &m.cfg
	switch p {
	case PhaseJobs:
		if cfg.jobs == nil {
			return false
		}
		m.drainBy = now.Add(cfg.drain)
		m.enter(out, now, p, m.drainBy, cfg.jobs)
		return m.stopJobs(out, now, StopAccepting{Deadline: m.drainBy})
	case PhaseRelease:
		m.enter(out, now, p, now.Add(2*cfg.lease.RenewEvery()))
		if m.owner.Terminal() {
			return false // nothing to release: lost, or released already
		}
		out.send(cfg.ownership, Release{})
		return true
	case PhaseSuccessor:
		if !cfg.successor {
			return false
		}
		return m.beginSuccessor(out, now)
	case PhaseDrain:
		// drain_seconds count from the release, however long we waited for the
		// successor: the epoch's deferral relies on our drain ending first (Epoch, (b)).
		from := m.released
		if from.IsZero() {
			from = now
		}
		m.drainBy = from.Add(cfg.drain)
		m.enter(out, now, p, m.drainBy, cfg.members...)
		if len(cfg.members) == 0 || cfg.drain <= 0 {
			return false
		}
		m.stopAccepting(out, now, StopAccepting{Deadline: m.drainBy})
		return true
	case PhaseSessions:
		m.enter(out, now, p, m.drainBy)
		if !cfg.sessions || !now.Before(m.drainBy) {
			return false
		}
		out.Waits = append(out.Waits, WaitStart{Kind: WaitSessions, Deadline: m.drainBy})
		return true
	case PhaseStop:
		pids := m.members(true)
		m.enter(out, now, p, now.Add(stopBound), pids...)
		if len(pids) == 0 {
			return false
		}
		m.fanOut(out, Stop{}, true)
		return true
	case PhaseDrained:
		// After the drain and sessions phases and the stop: nothing of ours runs any
		// more, so the successor may fence our epoch now instead of at its drain_seconds.
		m.enter(out, now, p, now.Add(2*cfg.lease.RenewEvery()))
		out.send(cfg.ownership, MarkDrained{})
		return true
	default:
		m.enter(out, now, PhaseDone, time.Time{})
		m.end(out, nil)
		return true
	}
}

// enter makes p the current phase, waiting for an answer from each of pids, bounded by
// deadline; it reports the duration of the phase it leaves.
func (m *HandoverMachine) enter(out *HandoverOutput, now time.Time, p Phase, deadline time.Time, pids ...*actor.PID) {
	if m.phase > PhaseRelaying {
		out.Phases = append(out.Phases, PhaseTime{Phase: m.phase, D: now.Sub(m.phaseStart)})
	}
	m.to(out, p)
	m.phaseStart, m.deadline = now, deadline
	m.waiting = map[string]bool{}
	for _, pid := range pids {
		m.waiting[pid.String()] = true
	}
	out.log(zapcore.InfoLevel, "handover", zap.Stringer("phase", p), zap.Int("waiting_for", len(pids)),
		zap.Uint64("revision", m.revision), zap.Uint64("epoch", m.epoch))
}

// answered counts a member's answer for the current phase; it reports whether the
// phase has every answer it waits for.
func (m *HandoverMachine) answered(from *actor.PID) bool {
	if from == nil || !m.waiting[from.String()] {
		return false
	}
	delete(m.waiting, from.String())
	return len(m.waiting) == 0
}

// holdForJobs is the jobs phase at its deadline (the drain deadline): the jobs host has
// cancelled the runs still going, and the phase waits on, holding and renewing the
// lease, until they return. A run that ignores its context must not go on while the
// next holder starts the same job, and only the lease keeps the next holder from
// starting it. It reports whether the phase waits; it does not once the lease is no
// longer ours to keep (lost, or released already), nor when the fail point
// release-before-jobs put the release first. The deadline is moved a lease period
// later, so the log says, once a lease period, that the handover still waits.
func (m *HandoverMachine) holdForJobs(out *HandoverOutput, now time.Time) (waits bool) {
	if len(m.waiting) == 0 || m.next(PhaseRelaying) != PhaseJobs {
		return false
	}
	switch m.owner {
	case lease.StateServing, lease.StateFenced:
	default:
		return false
	}
	period := m.cfg.lease.Lease
	out.log(zapcore.WarnLevel, "handover: a job's run has not returned since it was cancelled at the drain deadline; the engine keeps the lease until it returns, so no other engine starts the job meanwhile",
		zap.Duration("waited", now.Sub(m.phaseStart)), zap.Duration("next_report_in", period))
	m.deadline = now.Add(period)
	m.to(out, PhaseJobs)
	return true
}

// next is the handover phase after p: the next one, or with release-before-jobs the
// release first and the jobs last (after the drain, before the stop).
func (m *HandoverMachine) next(p Phase) Phase {
	if m.cfg.faults.releaseBeforeJobs {
		switch p {
		case PhaseRelaying:
			return PhaseRelease
		case PhaseRelease:
			return PhaseSuccessor
		case PhaseSuccessor:
			return PhaseDrain
		case PhaseSessions:
			return PhaseJobs
		case PhaseJobs:
			return PhaseStop
		}
	}
	return p + 1
}

// stopJobs tells the jobs host to stop; the phase waits for its Drained. With
// release-before-jobs (the lease released a while ago) it tells it only a lease later.
func (m *HandoverMachine) stopJobs(out *HandoverOutput, now time.Time, msg StopAccepting) (waits bool) {
	if m.cfg.faults.releaseBeforeJobs {
		m.later(out, now, m.cfg.lease.Lease, msg, m.cfg.jobs)
		return true
	}
	out.send(m.cfg.jobs, msg)
	return true
}

// stopAccepting tells every member to stop accepting; with serve-after-release only
// lease/2 later (after the successor answered), past the designed overlap of lease/4.
func (m *HandoverMachine) stopAccepting(out *HandoverOutput, now time.Time, msg StopAccepting) {
	if m.cfg.faults.serveAfterRelease {
		m.later(out, now, m.cfg.lease.Lease/2, msg, m.cfg.members...)
		return
	}
	m.fanOut(out, msg, false)
}

// later holds msg to pids back for d (a fail point's), sent from the root so their
// replies reach it.
func (m *HandoverMachine) later(out *HandoverOutput, now time.Time, d time.Duration, msg any, pids ...*actor.PID) {
	out.log(zapcore.WarnLevel, "fail point: holding a handover message back", zap.String("message", fmt.Sprintf("%T", msg)), zap.Duration("for", d))
	out.Held = append(out.Held, Held{At: now.Add(d), Msg: msg, To: pids})
}
