package sessions

// The role commands, in the host actor. One runs at a time: a command that needs the
// broker starts a step on a goroutine of the host's, which reports back with stepDone,
// and the next command starts from the mailbox after it.
//
//	Serve          idle, stopped, draining ─► subscribing ─► serving (or back, undone)
//	StopAccepting  serving, draining ─► stopping-accepting ─► draining; then, for an
//	               actor, a wait for the sessions that answers Drained
//	Stop, Close    any ─► stopping ─► stopped (Stop) or closed (Close)

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/abi-engine/engine/actors"
)

// enqueue takes a role command. A Stop or a Close does not wait out the step running
// (a Serve or a StopAccepting waiting for a broker that went away): it cuts it short.
func (a *hostActor) enqueue(cmd roleCmd) {
	if (cmd.role == roleStop || cmd.role == roleClose) && a.step != nil && a.step.kind != stepStop {
		a.step.cancel()
	}
	a.queue = append(a.queue, cmd)
	a.next()
}

// next runs the commands waiting until one starts a step.
func (a *hostActor) next() {
	for a.step == nil && len(a.queue) > 0 {
		cmd := a.queue[0]
		a.queue = a.queue[1:]
		switch cmd.role {
		case roleServe:
			a.serve(cmd)
		case roleStopAccepting:
			a.stopAccepting(cmd)
		default:
			a.stop(cmd)
		}
	}
	a.publish()
}

// serve subscribes what is missing.
func (a *hostActor) serve(cmd roleCmd) {
	h := a.h
	if a.phase == phaseClosed {
		a.answer(cmd, fmt.Errorf("transfer host %s: %w", h.prefix, ErrClosed))
		return
	}
	owner := h.ownerSubs == nil
	open := h.openSub == nil && len(h.cfg.Handlers) > 0
	if !owner && !open {
		a.phase = phaseServing
		a.answer(cmd, nil)
		return
	}
	from, began := a.phase, false
	if h.epoch == nil {
		a.beginEpoch()
		began = true
	}
	a.phase = phaseSubscribing
	a.startStep(stepSubscribe, cmd, from, began, func(ctx context.Context) stepResult {
		return h.subscribe(ctx, owner, open)
	})
}

// stopAccepting ends <prefix>.open at the broker, or confirms again that it ended.
func (a *hostActor) stopAccepting(cmd roleCmd) {
	h := a.h
	d := h.openDrain
	if h.openSub != nil {
		d = newDrain(h.nc, []*nats.Subscription{h.openSub})
		h.openSub, h.openDrain = nil, d
	}
	if a.phase == phaseServing {
		a.phase = phaseDraining
	}
	if d == nil {
		a.answer(cmd, nil)
		a.watchDrain(cmd)
		return
	}
	from := a.phase
	a.phase = phaseStoppingAccepting
	a.startStep(stepUnsubscribe, cmd, from, false, func(ctx context.Context) stepResult {
		// Again, if an earlier StopAccepting could not begin it (the connection was
		// down): it drains what is not draining yet.
		return stepResult{err: errors.Join(d.begin(ctx), d.confirm(ctx))}
	})
}

// stop ends everything at once: the sessions now, the subscriptions on the stop step,
// which also waits for the handlers.
func (a *hostActor) stop(cmd roleCmd) {
	h := a.h
	if a.phase == phaseClosed {
		a.answer(cmd, nil)
		return
	}
	subs := a.takeSubscriptions()
	if len(subs) == 0 && len(h.sessions) == 0 && h.epoch == nil && h.work.Running() == 0 {
		switch {
		case cmd.role == roleClose:
			a.phase = phaseClosed
		case a.phase != phaseIdle:
			a.phase = phaseStopped
		}
		a.answer(cmd, nil)
		return
	}
	for _, e := range h.sessions {
		a.closeSession(e, "the host stopped")
	}
	a.endEpoch()
	from := a.phase
	a.phase = phaseStopping
	a.startStep(stepStop, cmd, from, false, func(ctx context.Context) stepResult {
		h.unsubscribe(subs)
		return stepResult{err: h.work.Wait(ctx)}
	})
}

// stepDone takes the report of the step that ended, answers its command and runs the
// next one.
func (a *hostActor) stepDone(run *stepRun) {
	if run != a.step {
		return // the step of an instance that stopped: nothing of it is ours
	}
	h := a.h
	a.step = nil
	r := run.res
	switch run.kind {
	case stepSubscribe:
		if r.err != nil {
			// The step ended what it had subscribed; end the rest of what Serve began.
			if run.began {
				for _, e := range h.sessions {
					a.closeSession(e, "the host did not start serving")
				}
				a.endEpoch()
			}
			a.phase = run.from
			a.answer(run.cmd, r.err)
			break
		}
		if r.owner != nil {
			h.ownerSubs = r.owner
		}
		if r.open != nil {
			h.openSub, h.openDrain = r.open, nil
		}
		a.phase = phaseServing
		a.answer(run.cmd, nil)
	case stepUnsubscribe:
		a.phase = phaseDraining
		var err error
		if r.err != nil {
			err = fmt.Errorf("transfer host %s: stop accepting: %w", h.prefix, r.err)
			h.log.Error("transfer host: stop accepting failed", zap.Error(err))
		}
		a.answer(run.cmd, err)
		a.watchDrain(run.cmd)
	case stepStop:
		a.phase = phaseStopped
		if run.cmd.role == roleClose {
			a.phase = phaseClosed
		}
		if r.err != nil {
			h.log.Warn("transfer host stopped with handlers still running", zap.Error(r.err))
		}
		a.answer(run.cmd, nil)
	}
	a.next()
}

// answer tells whoever sent cmd how it ended.
func (a *hostActor) answer(cmd roleCmd, err error) {
	if cmd.done != nil {
		select {
		case cmd.done <- err:
		default: // answered already: a command handled again after a crash
		}
	}
	if cmd.from == nil {
		return
	}
	var reply any
	switch cmd.role {
	case roleServe:
		if err != nil {
			a.h.log.Error("transfer host did not start serving", zap.Error(err))
			reply = actors.ServeFailed{From: a.self, Err: err}
		} else {
			reply = actors.Accepting{From: a.self, On: true}
		}
	case roleStopAccepting:
		reply = actors.Accepting{From: a.self, On: false}
	default:
		reply = actors.Down{From: a.self}
	}
	a.eng.Send(cmd.from, reply)
}

// watchDrain starts the wait, for the actor that sent StopAccepting, until nothing is
// open, bounded by its deadline and ended by Stop (which closes what is left, so
// nothing drained).
func (a *hostActor) watchDrain(cmd roleCmd) {
	if cmd.from == nil {
		return
	}
	h := a.h
	parent := h.life
	if h.epoch != nil {
		parent = h.epoch
	}
	ctx, cancel := withDeadline(parent, cmd.deadline)
	eng, self, to, epoch := a.eng, a.self, cmd.from, a.epochs
	h.steps.Go(func() {
		defer cancel()
		eng.Send(self, drainDone{to: to, err: h.SessionsFinished(ctx), epoch: epoch})
	})
}

// beginEpoch starts what lasts from Serve to Stop: the parent of the sessions'
// contexts, the handlers' group and the reaper.
func (a *hostActor) beginEpoch() {
	h := a.h
	h.epoch, h.endEpoch = context.WithCancel(h.life)
	h.work.Open()
	a.startReaper()
}

// endEpoch ends it: the sessions' contexts are cancelled, no handler starts any more,
// the reaper stops.
func (a *hostActor) endEpoch() {
	h := a.h
	if h.endEpoch != nil {
		h.endEpoch()
		a.epochs++
	}
	h.epoch, h.endEpoch = nil, nil
	a.stopReaper()
	h.work.Shut()
}

// takeSubscriptions hands every subscription of the host to the caller, which ends them.
func (a *hostActor) takeSubscriptions() []*nats.Subscription {
	h := a.h
	subs := append([]*nats.Subscription(nil), h.ownerSubs...)
	if h.openSub != nil {
		subs = append(subs, h.openSub)
	}
	if h.openDrain != nil {
		subs = append(subs, h.openDrain.subs...)
	}
	h.ownerSubs, h.openSub, h.openDrain = nil, nil, nil
	return subs
}

// startReaper starts the goroutine that asks the host actor, every reapTick on the
// host's clock, to close idle sessions. Its ticker is the host actor's: stopped at
// Stop, at a restart after a panic and when the actor stops.
func (a *hostActor) startReaper() {
	h := a.h
	stop := make(chan struct{})
	t := h.clock.NewTicker(h.reapTick)
	eng, self := a.eng, a.self
	if !h.work.Go(func() {
		defer t.Stop()
		for {
			select {
			case <-t.C():
				eng.Send(self, reapTick{})
			case <-stop:
				return
			}
		}
	}) {
		t.Stop()
		return
	}
	a.reaper = stop
}

func (a *hostActor) stopReaper() {
	if a.reaper != nil {
		close(a.reaper)
		a.reaper = nil
	}
}
