package sessions

// The role commands, in the host actor. One runs at a time: a command that needs the
// broker starts a step (actors.StartStep) on a goroutine of the host's, which reports back,
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
func (a *hostActor) enqueue(cmd *actors.RoleCommand) {
	if cmd.Stops() && a.step != nil && a.step.kind != stepStop {
		a.step.cancel()
	}
	a.queue.Push(cmd)
	a.next()
}

// next runs the commands waiting until one starts a step.
func (a *hostActor) next() {
	a.queue.Run(func(cmd *actors.RoleCommand) bool {
		switch cmd.Msg.(type) {
		case actors.Serve:
			return a.serve(cmd)
		case actors.StopAccepting:
			return a.stopAccepting(cmd)
		default:
			return a.stop(cmd)
		}
	})
	a.publish()
}

// serve subscribes what is missing; it reports whether it started a step.
func (a *hostActor) serve(cmd *actors.RoleCommand) bool {
	h := a.h
	if a.phase == actors.RoleClosed {
		a.answer(cmd, fmt.Errorf("transfer host %s: %w", h.prefix, ErrClosed))
		return false
	}
	owner := h.ownerSubs == nil
	open := h.openSub == nil && len(h.cfg.Handlers) > 0
	if !owner && !open {
		a.phase = actors.RoleServing
		a.answer(cmd, nil)
		return false
	}
	from, began := a.phase, false
	if h.epoch == nil {
		a.beginEpoch()
		began = true
	}
	a.phase = actors.RoleSubscribing
	return a.startStep(stepSubscribe, cmd, from, began, func(ctx context.Context) stepResult {
		return h.subscribe(ctx, owner, open)
	})
}

// stopAccepting ends <prefix>.open at the broker, or confirms again that it ended.
func (a *hostActor) stopAccepting(cmd *actors.RoleCommand) bool {
	h := a.h
	d := h.openDrain
	if h.openSub != nil {
		d = newDrain(h.nc, []*nats.Subscription{h.openSub})
		h.openSub, h.openDrain = nil, d
	}
	if a.phase == actors.RoleServing {
		a.phase = actors.RoleDraining
	}
	if d == nil {
		a.answer(cmd, nil)
		a.watchDrain(cmd)
		return false
	}
	from := a.phase
	a.phase = actors.RoleStoppingAccepting
	return a.startStep(stepUnsubscribe, cmd, from, false, func(ctx context.Context) stepResult {
		// Again, if an earlier StopAccepting could not begin it (the connection was
		// down): it drains what is not draining yet.
		return stepResult{err: errors.Join(d.begin(ctx), d.confirm(ctx))}
	})
}

// stop ends everything at once: the sessions now, the subscriptions on the stop step,
// which also waits for the handlers.
func (a *hostActor) stop(cmd *actors.RoleCommand) bool {
	h := a.h
	if a.phase == actors.RoleClosed {
		a.answer(cmd, nil)
		return false
	}
	subs := a.takeSubscriptions()
	if len(subs) == 0 && len(h.sessions) == 0 && h.epoch == nil && h.work.Running() == 0 {
		switch {
		case cmd.Closes():
			a.phase = actors.RoleClosed
		case a.phase != actors.RoleIdle:
			a.phase = actors.RoleStopped
		}
		a.answer(cmd, nil)
		return false
	}
	for _, e := range h.sessions {
		a.closeSession(e, "the host stopped")
	}
	a.endEpoch()
	from := a.phase
	a.phase = actors.RoleStopping
	return a.startStep(stepStop, cmd, from, false, func(ctx context.Context) stepResult {
		h.unsubscribe(subs)
		return stepResult{err: h.work.Wait(ctx)}
	})
}

// stepDone takes the report of the step that ended, answers its command and runs the
// next one.
func (a *hostActor) stepDone(s *actors.RoleStep) {
	run := a.step
	if run == nil || s != run.s {
		return // the step of an instance that stopped: nothing of it is ours
	}
	h := a.h
	a.step = nil
	cmd := a.queue.Done()
	r := run.result()
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
			a.answer(cmd, r.err)
			break
		}
		if r.owner != nil {
			h.ownerSubs = r.owner
		}
		if r.open != nil {
			h.openSub, h.openDrain = r.open, nil
		}
		a.phase = actors.RoleServing
		a.answer(cmd, nil)
	case stepUnsubscribe:
		a.phase = actors.RoleDraining
		var err error
		if r.err != nil {
			err = fmt.Errorf("transfer host %s: stop accepting: %w", h.prefix, r.err)
			h.log.Error("transfer host: stop accepting failed", zap.Error(err))
		}
		a.answer(cmd, err)
		a.watchDrain(cmd)
	case stepStop:
		a.phase = actors.RoleStopped
		if cmd.Closes() {
			a.phase = actors.RoleClosed
		}
		if r.err != nil {
			h.log.Warn("transfer host stopped with handlers still running", zap.Error(r.err))
		}
		a.answer(cmd, nil)
	}
	a.next()
}

// answer tells whoever sent cmd how it ended.
func (a *hostActor) answer(cmd *actors.RoleCommand, err error) {
	if _, ok := cmd.Msg.(actors.Serve); ok && err != nil && cmd.From != nil {
		a.h.log.Error("transfer host did not start serving", zap.Error(err))
	}
	cmd.Answer(a.eng, a.self, err)
}

// watchDrain starts the wait, for the actor that sent StopAccepting, until nothing is
// open, bounded by its deadline and ended by Stop (which closes what is left, so
// nothing drained).
func (a *hostActor) watchDrain(cmd *actors.RoleCommand) {
	if cmd.From == nil {
		return
	}
	h := a.h
	parent := h.life
	if h.epoch != nil {
		parent = h.epoch
	}
	ctx, cancel := withDeadline(parent, cmd.Deadline())
	eng, self, to, epoch := a.eng, a.self, cmd.From, a.epochs
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
