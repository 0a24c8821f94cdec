package sessions

import (
	"fmt"

	"github.com/anthdm/hollywood/actor"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/actors"
	"github.com/abi-engine/engine/protocol"
)

// Producer makes the host actor. Its role state (the phase, the step running, the
// commands waiting) is its own; everything that must outlive a crash is in the
// TransferHost, so the actor that actors.Recover restarts in place after a panic (an
// actors.Kill, or a bug) carries on with the same subscriptions and sessions.
func (h *TransferHost) Producer() actor.Producer {
	return func() actor.Receiver { return &hostActor{h: h, phase: actors.RoleIdle} }
}

// SpawnOptions are the options the host actor must be spawned with: actors.SpawnOpts
// (the recover middleware and the restart backstop) with an id made of the prefix and
// the owner, so two hosts never collide.
func (h *TransferHost) SpawnOptions() []actor.OptFunc {
	return actors.SpawnOpts(h.prefix + "@" + h.owner)
}

// Spawn spawns the host actor at the top of engine e (kind "transfer") and returns its
// PID. A parent actor spawns it as its child with Producer and SpawnOptions instead.
func (h *TransferHost) Spawn(e *actor.Engine) *actor.PID {
	return e.Spawn(h.Producer(), "transfer", h.SpawnOptions()...)
}

// hostActor opens sessions, routes their calls, keeps the registry and the budget,
// reaps idle sessions and obeys the role commands. Its fields are its role state,
// touched only in Receive.
type hostActor struct {
	h       *TransferHost
	eng     *actor.Engine
	self    *actor.PID
	ignored bool // a second actor of the same host: it does nothing

	phase  actors.RolePhase
	epochs uint64           // how many times an epoch (Serve to Stop) ended
	step   *stepRun         // the broker step running, nil between steps
	queue  actors.RoleQueue // the role command whose step runs, and those waiting for it
	reaper chan struct{}    // closed to stop the reaper goroutine; nil while none runs
}

var _ actors.Restarter = (*hostActor)(nil)

func (a *hostActor) Receive(c *actor.Context) {
	switch c.Message().(type) {
	case actor.Initialized:
		a.init(c)
		return
	case actor.Started:
		return
	case actor.Stopped:
		a.stopped()
		return
	}
	if a.ignored {
		return
	}
	a.handle(c.Message(), c.Sender())
}

// handle is Receive for every message but hollywood's own; sender is who sent it.
func (a *hostActor) handle(msg any, sender *actor.PID) {
	h := a.h
	switch m := msg.(type) {
	case *call:
		a.route(m)
	case callEnded:
		a.callEnded(m.e)
	case reserve:
		a.reserve(m)
	case *parkCall:
		a.park(m)
	case *takeUpload:
		a.takeUpload(m)
	case reapTick:
		a.reap()
	case endSession:
		a.endSession(m)
	case sessionLost:
		if !m.e.closed {
			a.closeSession(m.e, "its actor crashed and the session's data with it")
			a.publish()
		}
	case closeParked:
		if e := h.sessions[m.id]; e != nil {
			a.closeSession(e, m.reason)
			a.publish()
		}
	case actors.Serve, actors.StopAccepting, actors.Stop, actors.RoleAsk:
		cmd, _ := actors.TakeRole(m, sender)
		a.enqueue(cmd)
	case *actors.RoleStep:
		a.stepDone(m)
	case drainDone:
		switch {
		case m.epoch != a.epochs:
			// A Stop ended the wait: what was left was closed, not drained.
		case m.err != nil:
			h.log.Warn("transfer host: sessions not finished by the deadline", zap.Error(m.err))
		default:
			a.eng.Send(m.to, actors.Drained{From: a.self})
		}
	case redelivery:
		a.handle(m.msg, sender)
	default:
		h.log.Warn("transfer host actor ignored an unknown message", zap.String("type", fmt.Sprintf("%T", m)))
	}
}

// init records where the host actor is. A second actor of the same host (spawned
// twice) is ignored: the host has one registry and one set of subscriptions.
func (a *hostActor) init(c *actor.Context) {
	a.eng, a.self = c.Engine(), c.PID()
	if !a.h.ref.CompareAndSwap(nil, &hostRef{eng: a.eng, pid: a.self}) {
		a.ignored = true
		a.h.log.Error("transfer host spawned twice; the second actor is ignored", zap.Stringer("first", a.h.PID()), zap.Stringer("second", a.self))
	}
}

// publish gives the handles a new view of the host.
func (a *hostActor) publish() {
	h := a.h
	pids := make(map[string]*actor.PID, len(h.sessions))
	for id, e := range h.sessions {
		pids[id] = e.pid
	}
	h.view.Store(hostView{serving: h.epoch != nil, sessions: pids, drain: h.openDrain})
}

// Restart is the in-place restart after a panic. The role state is kept: a command in
// progress is still in progress (its step goroutine will report) and its sender still
// waits for the answer. The message that crashed is answered (a call INTERNAL) or, a
// role command or a report, handled once more; the reaper is restarted, so no timer of
// the crashed instance outlives it.
func (a *hostActor) Restart(c *actor.Context) {
	h := a.h
	h.crashed(c)
	crash := protocol.Errorf(protocol.Internal, "the engine's transfer actor crashed while handling this call")
	switch m := c.Message().(type) {
	case *call:
		m.fail(crash)
	case *parkCall:
		m.answer(parkResult{err: crash})
	case *takeUpload:
		m.answer(takeResult{err: crash})
	case reserve:
		if m.ends {
			m.call.fail(crash)
		}
		a.eng.Send(m.e.pid, reserved{err: crash})
	case endSession:
		m.call.fail(m.err)
		a.eng.Send(a.self, sessionLost{e: m.e})
	case redelivery:
		h.log.Error("transfer host actor crashed twice on one message; it is dropped", zap.String("message", fmt.Sprintf("%T", m.msg)))
		if ask, ok := m.msg.(actors.RoleAsk); ok {
			cmd, _ := actors.TakeRole(ask, nil)
			cmd.Answer(a.eng, a.self, fmt.Errorf("transfer host %s: %s: the host actor crashed", h.prefix, cmd.Name()))
		}
	case actors.Kill, actor.Initialized, actor.Started, actor.Stopped:
	default:
		a.eng.SendWithSender(a.self, redelivery{msg: m}, c.Sender())
	}
	a.stopReaper()
	if h.epoch != nil {
		a.startReaper()
	}
}

// crashed logs the panic of one of the host's actors. actors.Recover has already
// recovered it, and reported it on the engine's event stream.
func (h *TransferHost) crashed(c *actor.Context) {
	h.log.Error("transfer actor crashed; restarted in place", zap.Stringer("pid", c.PID()), zap.String("message", fmt.Sprintf("%T", c.Message())))
}

// stopped runs when the host actor stops. After Close it has nothing left to do. Stopped
// without it (a parent, or the engine's teardown, poisoned it), it ends what the host
// holds as Stop would: what it can at once, the broker's part on a goroutine that Close
// (or Stop) waits for, which also answers the role commands still waiting.
func (a *hostActor) stopped() {
	h := a.h
	if a.ignored {
		return
	}
	defer h.actorGone()
	if a.phase == actors.RoleClosed && a.step == nil {
		return
	}
	h.log.Info("transfer host actor stopped without Close; stopping what it holds")
	run, cmds := a.step, a.queue.Drain() // the command of the step running first
	a.step = nil
	if run != nil {
		run.cancel()
	}
	subs := a.takeSubscriptions()
	for _, e := range h.sessions {
		a.closeSession(e, "the host actor stopped")
	}
	a.endEpoch()
	a.phase = actors.RoleClosed
	a.publish()
	h.steps.Go(func() {
		if run != nil {
			// A subscribe step's subscriptions are ours to end.
			subs = append(subs, run.result().subs()...)
		}
		h.unsubscribe(subs)
		_ = h.work.Wait(h.life)
		for _, cmd := range cmds {
			var err error
			if _, ok := cmd.Msg.(actors.Serve); ok {
				err = fmt.Errorf("transfer host %s: %w", h.prefix, errActorGone)
			}
			a.answer(cmd, err)
		}
	})
}
